package ptx

import (
	"strings"
	"testing"
)

// mutants yields src with one token removed or duplicated, at every step-th
// token.
func mutants(src string, step int) []string {
	toks, err := lex(src)
	if err != nil {
		panic(err)
	}
	var out []string
	for i := 0; i+1 < len(toks); i += step {
		t := toks[i]
		out = append(out, src[:t.off]+src[t.off+len(t.s):])             // delete
		out = append(out, src[:t.off]+t.s+" "+t.s+src[t.off+len(t.s):]) // duplicate
	}
	return out
}

// runAny parses src and, if it parses, runs every kernel it has with small
// limits. It must never panic or hang, whatever src is.
func runAny(t *testing.T, src string) {
	m, err := Parse("m.ptx", src)
	if err != nil {
		if _, ok := err.(ErrorList); !ok {
			t.Fatalf("Parse returned %T", err)
		}
		return
	}
	dev := NewDevice()
	dev.MaxWarpInstructions = 20000
	bufs := make([]any, 0, 8)
	for _, k := range m.Kernels() {
		bufs = bufs[:0]
		for _, p := range k.Params {
			switch p.Type {
			case ".u64", ".b64", ".s64":
				a, _ := dev.Alloc(1 << 16)
				bufs = append(bufs, a)
			case ".f32":
				bufs = append(bufs, float32(1))
			default:
				bufs = append(bufs, uint32(64))
			}
		}
		_, _ = dev.Launch(m, k.Name, [3]int{2, 1, 1}, [3]int{128, 1, 1}, 2*6144, bufs...)
	}
}

func TestMutantsDoNotPanic(t *testing.T) {
	step := 7
	if testing.Short() {
		step = 11
	}
	for _, src := range []string{matmulPTX, softmaxPTX} {
		for _, m := range mutants(src, step) {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic %v on\n%s", r, m)
					}
				}()
				runAny(t, m)
			}()
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(matmulPTX)
	f.Add(softmaxPTX)
	f.Add(strings.Replace(aluPTX, "BODY", "\tshfl.sync.bfly.b32 %r0, %r7, 1, 0x1f, 0xffffffff;"+r32, 1))
	f.Fuzz(func(t *testing.T, src string) {
		runAny(t, src)
	})
}
