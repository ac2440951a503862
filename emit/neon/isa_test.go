package neon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// encodingCases returns every encoder of isa.go with a few register and
// immediate choices each (registers at both ends of 0..31 and between).
func encodingCases() []Inst {
	regs := [][3]V{{0, 1, 2}, {31, 17, 5}, {9, 30, 22}, {16, 8, 31}}
	var out []Inst
	for _, r := range regs {
		for _, o := range ops3 {
			out = append(out, o.inst(r[0], r[1], r[2]))
		}
		for _, o := range ops2 {
			out = append(out, o.inst(r[0], r[1]))
		}
		for _, o := range opsElem {
			for idx := 0; idx < 4; idx++ {
				out = append(out, o.inst(r[0], r[1], r[2], idx))
			}
		}
		for _, sh := range []int{0, 1, 16, 23, 31} {
			out = append(out, shl4s(r[0], r[1], sh))
		}
		for _, sh := range []int{1, 13, 16, 31, 32} {
			out = append(out, ushr4s(r[0], r[1], sh))
		}
		out = append(out, uxtl(r[0], r[1], false), uxtl(r[0], r[1], true),
			dupGP(r[0], int(r[2])%26), mov(r[0], r[1]), zeroV(r[0]))
		for idx := 0; idx < 4; idx++ {
			out = append(out, dupElem(r[0], r[1], idx))
		}
	}
	return out
}

var objdumpLine = regexp.MustCompile(`^\s+\S+\.s:(\d+)\s+0x[0-9a-f]+\s+([0-9a-f]{8})\s+(.*?)\s*//\s*(.*?)\s*$`)

// assemble assembles body (lines of one TEXT symbol) for arm64 with the
// Go toolchain and returns, for each line of the source file, the
// encoding and the GNU text go tool objdump -gnu prints for it.
func assemble(t *testing.T, body []string) map[int][2]string {
	t.Helper()
	dir := t.TempDir()
	src := "#include \"textflag.h\"\nTEXT ·enc(SB), NOSPLIT, $0-0\n" + strings.Join(body, "\n") + "\n\tRET\n"
	sfile := filepath.Join(dir, "x.s")
	if err := os.WriteFile(sfile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	obj := filepath.Join(dir, "x.o")
	asm := exec.Command(gobin, "tool", "asm", "-p", "x", "-I", filepath.Join(runtime.GOROOT(), "pkg", "include"), "-o", obj, sfile)
	asm.Env = append(os.Environ(), "GOARCH=arm64", "GOOS=linux")
	if b, err := asm.CombinedOutput(); err != nil {
		t.Fatalf("go tool asm: %v\n%s", err, b)
	}
	b, err := exec.Command(gobin, "tool", "objdump", "-gnu", obj).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, b)
	}
	got := map[int][2]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := objdumpLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			got[n] = [2]string{m[2], m[4]}
		}
	}
	return got
}

// hex is an encoding as objdump prints it.
func hex(enc uint32) string { return fmt.Sprintf("%08x", enc) }

func norm(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// TestEncodings holds every encoder to the Go toolchain: where Go's
// assembler knows the instruction, the Go text must assemble to the
// encoding given; every encoding (the WORDs the kernels carry included)
// must disassemble to the GNU text given.
func TestEncodings(t *testing.T) {
	cases := encodingCases()
	var body []string
	word, goLine := map[int]Inst{}, map[int]Inst{}
	for _, in := range cases {
		body = append(body, fmt.Sprintf("\tWORD $0x%08x", in.Enc))
		word[len(body)+2] = in // the body starts on line 3
		if in.Go != "" {
			body = append(body, "\t"+in.Go)
			goLine[len(body)+2] = in
		}
	}
	got := assemble(t, body)
	nGo := 0
	for line, in := range goLine {
		g, ok := got[line]
		if !ok {
			t.Errorf("%s: no object code for line %d", in.Go, line)
			continue
		}
		if g[0] != hex(in.Enc) {
			t.Errorf("%s: Go assembles %s, the encoder gives %s (%s)", in.Go, g[0], hex(in.Enc), in.GNU)
		}
		nGo++
	}
	for line, in := range word {
		g, ok := got[line]
		if !ok {
			t.Errorf("%s: no object code for line %d", in.GNU, line)
			continue
		}
		if norm(g[1]) != norm(in.GNU) {
			t.Errorf("WORD $0x%08x disassembles to %q, want %q", in.Enc, g[1], in.GNU)
		}
	}
	if nGo == 0 || len(word) != len(cases) {
		t.Fatalf("checked %d Go forms, %d words of %d cases", nGo, len(word), len(cases))
	}
	t.Logf("%d encodings disassembled, %d assembled by Go", len(word), nGo)
}

// TestGenerateReproducible: two runs give the same bytes, and the
// generated files (the kernels and their table) are what runtime/cpu
// holds.
func TestGenerateReproducible(t *testing.T) {
	a, b := Generate("cpu"), Generate("cpu")
	if string(a.Asm()) != string(b.Asm()) || string(a.Stubs()) != string(b.Stubs()) || string(Table("cpu")) != string(Table("cpu")) {
		t.Fatal("two runs differ")
	}
	for name, want := range map[string][]byte{AsmFile: a.Asm(), StubsFile: a.Stubs(), TableFile: Table("cpu")} {
		have, err := os.ReadFile(filepath.Join("..", "..", "runtime", "cpu", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(have) != string(want) {
			t.Errorf("runtime/cpu/%s is not what Generate writes; run go generate ./runtime/cpu", name)
		}
	}
}

// TestKernelWords: every WORD line of the generated assembly disassembles
// to the text of its comment, so the kernels carry no encoding the tests
// of single encoders missed.
func TestKernelWords(t *testing.T) {
	asm := string(Generate("cpu").Asm())
	seen := map[string]string{}
	var body []string
	lineOf := map[int]string{}
	for _, l := range strings.Split(asm, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "WORD $") {
			continue
		}
		w, gnu, ok := strings.Cut(strings.TrimPrefix(l, "WORD "), " // ")
		if !ok {
			t.Fatalf("WORD without its text: %s", l)
		}
		if _, dup := seen[w]; dup {
			continue
		}
		seen[w] = gnu
		body = append(body, "\tWORD "+w)
		lineOf[len(body)+2] = gnu
	}
	if len(body) == 0 {
		t.Fatal("no WORD in the generated assembly")
	}
	got := assemble(t, body)
	for line, gnu := range lineOf {
		if g := got[line]; norm(g[1]) != norm(gnu) {
			t.Errorf("line %d: %s disassembles to %q, its comment says %q", line, body[line-3], g[1], gnu)
		}
	}
	t.Logf("%d distinct WORDs checked", len(body))
}
