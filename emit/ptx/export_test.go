package ptx

// Mutants of the score stage for the external tests (score_test.go):
// kernels that must fail the checks.
const (
	MutAlibiJI      = mutAlibiJI      // ALiBi's distance j - i
	MutCapAfterMask = mutCapAfterMask // the soft-cap applied after masking
	MutSinkTwice    = mutSinkTwice    // the sink counted twice in the denominator
	MutDSinkSign    = mutDSinkSign    // dsink with the wrong sign
)

// WithScoreMutant returns cfg generating mutant m of the score stage.
func WithScoreMutant(cfg Config, m int) Config {
	cfg.scoreMutant = m
	return cfg
}
