package cpu

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// runner is *testing.T or *testing.B.
type runner[T any] interface {
	Run(string, func(T)) bool
	Skip(...any)
}

// eachKernels runs f as a subtest for every variant this machine runs whose
// kernels have what use asks for (nil: every variant), and skips when none
// has.
func eachKernels[T runner[T]](t T, use func(*kernels) bool, f func(t T, kern *kernels)) {
	n := 0
	for _, tg := range Targets {
		if k, ok := kernelsOf(tg.Variant); ok && (use == nil || use(k)) {
			n++
			t.Run(tg.Name, func(t T) { f(t, k) })
		}
	}
	if n == 0 {
		t.Skip("no variant runs these kernels here")
	}
}

// eachDecode runs f for each variant with decode kernels.
func eachDecode[T runner[T]](t T, f func(t T, kern *kernels)) {
	eachKernels(t, func(k *kernels) bool { return k.hasDecode(square(64)) }, f)
}

// eachBwdKernels runs f for each variant with the tiled backward's kernels.
func eachBwdKernels[T runner[T]](t T, f func(t T, kern *kernels)) {
	eachKernels(t, func(k *kernels) bool { return k.gemm != nil && k.bwdProb != nil }, f)
}

// kernelMarks are the parts of a function name that say which variant's
// instructions it uses: a variant's table may name no function without one
// of its marks.
var kernelMarks = map[Variant][]string{
	AVX512: {"AVX512", "FMA512"},
	AVX2:   {"AVX2", "FMA256"}, // not "256": tileAVX512D256 is AVX-512's
	NEON:   {"NEON"},
	PureGo: {"Go"},
}

// TestKernelTables: every function in a variant's table, its kernels by
// head dimensions (byDims) included, is that variant's own (the AVX2
// variant runs no AVX-512 helper even on a CPU with AVX-512), and every
// variant this machine runs has a microkernel.
func TestKernelTables(t *testing.T) {
	for _, tg := range Targets {
		k, ok := kernelsOf(tg.Variant)
		if !ok {
			continue
		}
		if k.tile == nil {
			t.Errorf("%s: no tile kernel", tg.Name)
		}
		marks := kernelMarks[tg.Variant]
		if marks == nil {
			t.Errorf("%s: no name marks in kernelMarks", tg.Name)
			continue
		}
		var check func(name string, v reflect.Value)
		check = func(name string, v reflect.Value) {
			switch v.Kind() {
			case reflect.Array, reflect.Slice:
				for i := 0; i < v.Len(); i++ {
					check(name, v.Index(i))
				}
			case reflect.Struct: // a dimKernels of byDims
				for i := 0; i < v.NumField(); i++ {
					check(name+"."+v.Type().Field(i).Name, v.Field(i))
				}
			case reflect.Func:
				if v.IsNil() || name == "tile" || name == "tileScore" { // adapter closures
					return
				}
				fn := runtime.FuncForPC(v.Pointer()).Name()
				for _, m := range marks {
					if strings.Contains(fn[strings.LastIndex(fn, ".")+1:], m) {
						return
					}
				}
				t.Errorf("%s: field %s holds %s, not one of its own kernels (%v)", tg.Name, name, fn, marks)
			}
		}
		v := reflect.ValueOf(k).Elem()
		for i := 0; i < v.NumField(); i++ {
			check(v.Type().Field(i).Name, v.Field(i))
		}
	}
}

// TestPrefetchRows: the prefetch loop of every variant that has one reads
// nothing it may not (rows up to the last element of a slice, odd
// pitches and lengths, 16-bit elements) and changes nothing, and
// prefetchRows refuses a request past the slice (its bounds check, which
// stands for the asm's: a prefetch never faults, so a wrong row would pass
// unseen).
func TestPrefetchRows(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.prefetch != nil }, func(t *testing.T, k *kernels) {
		x := make([]float32, 4099)
		for i := range x {
			x[i] = float32(i)
		}
		x16 := make([]uint16, 999)
		for _, c := range []struct{ at, rows, pitch, n int }{
			{0, 1, 0, 1}, {3, 5, 817, 17}, {0, 48, 85, 64}, {4099 - 128, 1, 0, 128}, {1, 3, 1365, 1},
		} {
			prefetchRows(k, x, c.at, c.rows, c.pitch, c.n)
			prefetchRows(k, x16, c.at/5, c.rows, c.pitch/5, c.n)
		}
		for i, v := range x {
			if v != float32(i) {
				t.Fatalf("x[%d] = %v after prefetching", i, v)
			}
		}
		for i, v := range x16 {
			if v != 0 {
				t.Fatalf("x16[%d] = %v after prefetching", i, v)
			}
		}
		defer func() {
			if recover() == nil {
				t.Error("prefetchRows read past the slice without a panic")
			}
		}()
		prefetchRows(k, x, 4099-192, 2, 128, 65) // the second row ends past x
	})
}
