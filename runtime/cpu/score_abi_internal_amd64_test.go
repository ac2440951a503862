package cpu

import (
	"testing"
	"unsafe"
)

// TestScoreABI holds emit/avo's view of the score stage to this package's:
// the scoreTile offsets and size the kernels address, the flag bits and
// the tanh constants its constant table holds, which genkernel records in
// score_abi_amd64_test.go (go generate keeps it current).
func TestScoreABI(t *testing.T) {
	var sc scoreTile
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"cap", unsafe.Offsetof(sc.cap), avoScoreCapOff},
		{"invCap", unsafe.Offsetof(sc.invCap), avoScoreInvCapOff},
		{"flags", unsafe.Offsetof(sc.flags), avoScoreFlagsOff},
		{"slope", unsafe.Offsetof(sc.slope), avoScoreSlopeOff},
		{"rows", unsafe.Offsetof(sc.rows), avoScoreRowsOff},
		{"cols", unsafe.Offsetof(sc.cols), avoScoreColsOff},
		{"size", unsafe.Sizeof(sc), avoScoreSize},
	} {
		if c.got != c.want {
			t.Errorf("scoreTile %s at %d, emit/avo says %d", c.name, c.got, c.want)
		}
	}
	if scoreCap != avoScoreCap || scoreAlibi != avoScoreAlibi || scoreAbs != avoScoreAbs {
		t.Errorf("flags %d %d %d, emit/avo says %d %d %d", scoreCap, scoreAlibi, scoreAbs, avoScoreCap, avoScoreAlibi, avoScoreAbs)
	}
	poly := [8]float64{tanhT3, tanhT5, tanhT7, tanhT9, tanhT11, tanhT13, tanhT15, tanhT17}
	if poly != avoTanhPoly {
		t.Errorf("tanh coefficients %v, emit/avo says %v", poly, avoTanhPoly)
	}
	if tanhSmall != avoTanhSmall || tanhM2L2E != avoTanhM2L2E {
		t.Errorf("tanh threshold and exponent scale %v %v, emit/avo says %v %v", tanhSmall, tanhM2L2E, avoTanhSmall, avoTanhM2L2E)
	}
}
