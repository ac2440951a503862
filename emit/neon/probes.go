package neon

// PeakChains is the number of independent FMLA chains of the peak loop:
// enough for a 4-cycle FMLA latency on up to three 128-bit FMA pipes (12
// chains), like the amd64 loops.
const PeakChains = 12

// PeakName and ReadSumName are the probes' Go names.
const (
	PeakName    = "peakNEON"
	ReadSumName = "readSumNEON"
	// ReadSumBlock is the floats one iteration of the read loop consumes.
	ReadSumBlock = 32
)

// EmitPeak returns func(n int) running n iterations of PeakChains
// independent FMLA chains on 128-bit registers (PeakChains*8 flops an
// iteration): the FP32 FMA peak benchmarks compare the kernels against.
func EmitPeak() *Func {
	f := NewFunc(PeakName, []Param{{"n", "int"}}, nil,
		"peakNEON runs n iterations of 12 independent FMLA chains on 128-bit",
		"registers (96 flops per iteration) to measure the FP32 FMA peak.")
	f.NoEsc = false
	f.I("MOVD %s, R0", f.Arg("n"))
	for i := V(0); i < PeakChains+2; i++ {
		f.zero(i)
	}
	f.I("CMP $0, R0")
	f.I("BLE done")
	f.Label("loop")
	for i := V(0); i < PeakChains; i++ {
		f.fmla(i, PeakChains, PeakChains+1)
	}
	f.I("SUBS $1, R0")
	f.I("BNE loop")
	f.Label("done")
	f.I("RET")
	return f
}

// EmitReadSum returns func(p *float32, n int) float32, the sum of the
// first n - n%ReadSumBlock floats at p (0 when none) in eight vector
// accumulators: the read-bandwidth probe's loop.
func EmitReadSum() *Func {
	f := NewFunc(ReadSumName, []Param{{"p", "*float32"}, {"n", "int"}}, &Param{"ret", "float32"},
		"readSumNEON returns the sum of the first n - n%32 float32 at p (0 when",
		"n < 32), read with 128-bit loads into eight accumulators.")
	f.I("MOVD %s, R0", f.Arg("p"))
	f.I("MOVD %s, R1", f.Arg("n"))
	for i := V(0); i < 8; i++ {
		f.zero(i)
	}
	f.I("CMP $0, R1")
	f.I("BLE done")
	f.I("LSR $5, R1")
	f.I("CBZ R1, done")
	f.Label("loop")
	f.I("VLD1.P 64(R0), %s", vlist(8, 4))
	f.I("VLD1.P 64(R0), %s", vlist(12, 4))
	for i := V(0); i < 8; i++ {
		f.fadd(i, i, 8+i)
	}
	f.I("SUBS $1, R1")
	f.I("BNE loop")
	f.Label("done")
	for step := V(1); step < 8; step *= 2 {
		for i := V(0); i+step < 8; i += 2 * step {
			f.fadd(i, i, i+step)
		}
	}
	f.faddp(0, 0, 0)
	f.faddp2s(0, 0)
	f.I("FMOVS F0, %s", f.Ret())
	f.I("RET")
	return f
}
