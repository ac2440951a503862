package cpu

import (
	"testing"
	"unsafe"

	"github.com/attngen/attngen/emit/neon"
)

// TestScoreABINEON holds emit/neon's view of the score stage to this
// package's, as TestScoreABI holds emit/avo's: the scoreTile offsets and
// size the NEON kernels address, the flag bits and the tanh constants
// they load.
func TestScoreABINEON(t *testing.T) {
	var sc scoreTile
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"cap", unsafe.Offsetof(sc.cap), neon.ScoreCapOff},
		{"invCap", unsafe.Offsetof(sc.invCap), neon.ScoreInvCapOff},
		{"flags", unsafe.Offsetof(sc.flags), neon.ScoreFlagsOff},
		{"slope", unsafe.Offsetof(sc.slope), neon.ScoreSlopeOff},
		{"rows", unsafe.Offsetof(sc.rows), neon.ScoreRowsOff},
		{"cols", unsafe.Offsetof(sc.cols), neon.ScoreColsOff},
		{"size", unsafe.Sizeof(sc), neon.ScoreSize},
	} {
		if c.got != c.want {
			t.Errorf("scoreTile %s at %d, emit/neon says %d", c.name, c.got, c.want)
		}
	}
	if scoreCap != neon.ScoreCap || scoreAlibi != neon.ScoreAlibi || scoreAbs != neon.ScoreAbs {
		t.Errorf("flags %d %d %d, emit/neon says %d %d %d", scoreCap, scoreAlibi, scoreAbs, neon.ScoreCap, neon.ScoreAlibi, neon.ScoreAbs)
	}
	poly := [8]float64{tanhT3, tanhT5, tanhT7, tanhT9, tanhT11, tanhT13, tanhT15, tanhT17}
	if poly != neon.TanhPoly {
		t.Errorf("tanh coefficients %v, emit/neon says %v", poly, neon.TanhPoly)
	}
	if tanhSmall != neon.TanhSmall || tanhM2L2E != neon.TanhM2L2E {
		t.Errorf("tanh threshold and exponent scale %v %v, emit/neon says %v %v", tanhSmall, tanhM2L2E, neon.TanhSmall, neon.TanhM2L2E)
	}
}
