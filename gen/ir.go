package gen

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/attngen/attngen/runtime/mask"
)

// IROp is an operation of the plan's integer IR. Values are 64-bit
// integers; comparisons and logic produce 0 or 1; word ops produce 64-bit
// keep words (bit c: lane c).
type IROp uint8

const (
	IRArg     IROp = iota // argument number Imm of the program
	IRConst               // Imm
	IRAdd                 // A + B
	IRSub                 // A - B
	IRMulC                // A * Imm
	IRDivC                // floor(A / Imm), Imm >= 1
	IRModC                // A mod Imm in [0, Imm), Imm >= 1
	IRDiv                 // floor(A / B), B >= 1 at run time
	IRMin                 // min(A, B)
	IRMax                 // max(A, B)
	IRLt                  // A < B
	IRLe                  // A <= B
	IREq                  // A == B
	IRAnd                 // A && B
	IROr                  // A || B
	IRNot                 // !A
	IRSelect              // A != 0 ? B : C
	IRLoad                // field Imm (a Field) of the run-time inputs, at position A when the field is Indexed (inputs.go)
	IRTreeAnc             // 1 if B is A or an ancestor of A in the run-time parent array, else 0
	IRWRange              // keep word with lanes A..B set (clipped to [0, 63]); A = -1: from lane 0 (Imm&1), B = -1: to lane 63 (Imm&2)
	IRWStep               // keep word with lanes A, A +- Imm, A +- 2*Imm, ... set (every lane congruent to A mod Imm)
	IRWAnd                // A & B (words)
	IRWOr                 // A | B (words)
	IRWIf                 // A != 0 ? B : 0 (a word kept or dropped by a scalar condition)
	IRWNot                // ^A (the complement of a word: lanes past the keys are cut by the caller)
	IRWPeriod             // keep word with the lanes c whose m = (c + A) mod Imm has m <= B and m mod C == 0 (Imm >= 1; C >= 1 at run time)
	IRWTree               // keep word with the lanes c whose key B + c is A or an ancestor of A (run-time parent array)
	numIROps
)

// NumIROps is the number of IR ops; every renderer is tested on each op
// below it.
const NumIROps = numIROps

var irNames = [numIROps]string{"arg", "const", "add", "sub", "mulc", "divc", "modc", "div", "min", "max", "lt", "le", "eq", "and", "or", "not", "select",
	"load", "treeanc", "wrange", "wstep", "wand", "wor", "wif", "wnot", "wperiod", "wtree"}

func (o IROp) String() string {
	if o < numIROps {
		return irNames[o]
	}
	return fmt.Sprintf("IROp(%d)", int(o))
}

// Arity is the number of value operands the op reads (a load's: 1, or 0
// for a field that is not Indexed; Inst.Arity knows which).
func (o IROp) Arity() int {
	switch o {
	case IRArg, IRConst:
		return 0
	case IRMulC, IRDivC, IRModC, IRNot, IRLoad, IRWStep, IRWNot:
		return 1
	case IRSelect, IRWPeriod:
		return 3
	}
	return 2
}

// HasImm reports whether the op carries an immediate.
func (o IROp) HasImm() bool {
	switch o {
	case IRArg, IRConst, IRMulC, IRDivC, IRModC, IRWStep, IRWRange, IRWPeriod, IRLoad:
		return true
	}
	return false
}

// Word reports whether the op makes a keep word. Word ops exist only in
// the CPU keep-word program (Plan.Word); GPU kernels evaluate the predicate
// per element and never see them.
func (o IROp) Word() bool { return o >= IRWRange && o <= IRWTree }

// Tree reports whether the op is one of the parent array's own (more
// than a load of one of its fields).
func (o IROp) Tree() bool { return o == IRTreeAnc || o == IRWTree }

// Arity is the number of value operands in reads: its op's, but 0 for a
// load of a field that is not Indexed.
func (in Inst) Arity() int {
	if f, ok := in.Field(); ok && !f.Indexed() {
		return 0
	}
	return in.Op.Arity()
}

// Docs reports whether in reads the document ids or the parent array.
func (in Inst) Docs() bool {
	if f, ok := in.Field(); ok {
		return f.Input() != InputHeadParams
	}
	return in.Op.Tree()
}

// TreeData reports whether in reads the parent array.
func (in Inst) TreeData() bool {
	if f, ok := in.Field(); ok {
		return f.Input() == InputTree
	}
	return in.Op.Tree()
}

// Inst is one SSA instruction; it defines value number = its index. A, B
// and C name earlier values.
type Inst struct {
	Op      IROp
	A, B, C int
	Imm     int64
}

// operands returns the value operands of in (-1 entries of wrange are
// absent bounds).
func (in Inst) operands() []int {
	switch in.Arity() {
	case 1:
		return []int{in.A}
	case 2:
		if in.Op == IRWRange {
			var o []int
			if in.A >= 0 {
				o = append(o, in.A)
			}
			if in.B >= 0 {
				o = append(o, in.B)
			}
			return o
		}
		return []int{in.A, in.B}
	case 3:
		return []int{in.A, in.B, in.C}
	}
	return nil
}

// Prog is a straight-line SSA program of the plan: the partial-tile
// predicate, the key hull, the tile class, the CPU keep word, the residue
// segment arithmetic. Args names its arguments, Results the values it
// returns.
type Prog struct {
	Name    string
	Args    []string
	Insts   []Inst
	Results []int
}

// Inf stands for an unbounded key position. Programs compare against it
// but never do arithmetic on it; renderers with narrower integers (PTX s32)
// may clamp it to any value above every position they handle.
const Inf = mask.Inf

// String prints the program: a header naming it, its arguments and
// results, then one instruction per line ("v3 = sub v0 v1", "v4 = modc v3 8").
func (p *Prog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s) ->", p.Name, strings.Join(p.Args, ", "))
	for _, r := range p.Results {
		fmt.Fprintf(&b, " v%d", r)
	}
	b.WriteByte('\n')
	for k, in := range p.Insts {
		if f, ok := in.Field(); ok {
			name, sub, hasSub := f.mnemonic()
			fmt.Fprintf(&b, "v%d = %s", k, name)
			if f.Indexed() {
				fmt.Fprintf(&b, " v%d", in.A)
			}
			if hasSub {
				fmt.Fprintf(&b, " %d", sub)
			}
			b.WriteByte('\n')
			continue
		}
		fmt.Fprintf(&b, "v%d = %s", k, in.Op)
		if in.Op == IRWRange {
			for _, x := range []int{in.A, in.B} {
				if x < 0 {
					b.WriteString(" _")
				} else {
					fmt.Fprintf(&b, " v%d", x)
				}
			}
		} else {
			for _, x := range in.operands() {
				fmt.Fprintf(&b, " v%d", x)
			}
		}
		if in.Op.HasImm() && in.Op != IRWRange {
			fmt.Fprintf(&b, " %d", in.Imm)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseProg reads the text String prints and checks it.
func ParseProg(text string) (*Prog, error) {
	p := &Prog{}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) != "" {
			break
		}
	}
	head := strings.TrimSpace(sc.Text())
	name, rest, ok := strings.Cut(head, "(")
	args, res, ok2 := strings.Cut(rest, ") ->")
	if !ok || !ok2 || name == "" {
		return nil, fmt.Errorf("program line %d: want \"NAME(ARGS) -> RESULTS\", got %q", line, head)
	}
	p.Name = name
	for _, a := range strings.Split(args, ",") {
		if a = strings.TrimSpace(a); a != "" {
			p.Args = append(p.Args, a)
		}
	}
	for _, r := range strings.Fields(res) {
		v, err := strconv.Atoi(strings.TrimPrefix(r, "v"))
		if err != nil || !strings.HasPrefix(r, "v") {
			return nil, fmt.Errorf("program line %d: bad result %q", line, r)
		}
		p.Results = append(p.Results, v)
	}
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 || f[1] != "=" || f[0] != fmt.Sprintf("v%d", len(p.Insts)) {
			return nil, fmt.Errorf("program line %d: want \"v%d = op ...\", got %q", line, len(p.Insts), sc.Text())
		}
		ops := f[3:]
		if g, ok := loadMnemonics[f[2]]; ok {
			in, err := parseLoad(g.first, g.n, ops)
			if err != nil {
				return nil, fmt.Errorf("program line %d: %s: %w", line, f[2], err)
			}
			p.Insts = append(p.Insts, in)
			continue
		}
		op := IROp(0)
		for ; op < numIROps && (op == IRLoad || op.String() != f[2]); op++ {
		}
		if op == numIROps {
			return nil, fmt.Errorf("program line %d: unknown op %q", line, f[2])
		}
		in := Inst{Op: op}
		want := op.Arity()
		if op.HasImm() && op != IRWRange {
			want++
		}
		if len(ops) != want {
			return nil, fmt.Errorf("program line %d: %s takes %d operands, got %d", line, op, want, len(ops))
		}
		vals := []*int{&in.A, &in.B, &in.C}
		for k := 0; k < op.Arity(); k++ {
			if op == IRWRange && ops[k] == "_" {
				*vals[k] = -1
				in.Imm |= 1 << k
				continue
			}
			v, err := strconv.Atoi(strings.TrimPrefix(ops[k], "v"))
			if err != nil || !strings.HasPrefix(ops[k], "v") {
				return nil, fmt.Errorf("program line %d: bad operand %q", line, ops[k])
			}
			*vals[k] = v
		}
		if op.HasImm() && op != IRWRange {
			v, err := strconv.ParseInt(ops[len(ops)-1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("program line %d: bad immediate %q", line, ops[len(ops)-1])
			}
			in.Imm = v
		}
		p.Insts = append(p.Insts, in)
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// Check verifies SSA form: operands refer to earlier values, immediates of
// divc, modc and wstep are positive, arguments exist, and results name values.
func (p *Prog) Check() error {
	if len(p.Insts) == 0 || len(p.Results) == 0 {
		return fmt.Errorf("program %s: empty", p.Name)
	}
	for k, in := range p.Insts {
		if in.Op >= numIROps {
			return fmt.Errorf("program %s v%d: unknown op %d", p.Name, k, in.Op)
		}
		for _, x := range in.operands() {
			if x < 0 || x >= k {
				return fmt.Errorf("program %s v%d: operand not defined before use", p.Name, k)
			}
		}
		switch in.Op {
		case IRDivC, IRModC, IRWStep, IRWPeriod:
			if in.Imm < 1 {
				return fmt.Errorf("program %s v%d: %s by %d", p.Name, k, in.Op, in.Imm)
			}
		case IRArg:
			if in.Imm < 0 || in.Imm >= int64(len(p.Args)) {
				return fmt.Errorf("program %s v%d: argument %d of %d", p.Name, k, in.Imm, len(p.Args))
			}
		case IRLoad:
			if !Field(in.Imm).Valid() {
				return fmt.Errorf("program %s v%d: load of field %d (want 0 to %d)", p.Name, k, in.Imm, NumFields-1)
			}
		case IRWRange:
			if (in.A < 0) != (in.Imm&1 != 0) || (in.B < 0) != (in.Imm&2 != 0) {
				return fmt.Errorf("program %s v%d: wrange bounds and flags disagree", p.Name, k)
			}
		}
	}
	for _, r := range p.Results {
		if r < 0 || r >= len(p.Insts) {
			return fmt.Errorf("program %s: result v%d not defined", p.Name, r)
		}
	}
	return nil
}

// UsesTree reports whether the program reads a parent array.
func (p *Prog) UsesTree() bool {
	for _, in := range p.Insts {
		if in.TreeData() {
			return true
		}
	}
	return false
}

// UsesDocs reports whether the program reads run-time data: document ids
// or a parent array (UsesTree).
func (p *Prog) UsesDocs() bool {
	for _, in := range p.Insts {
		if in.Docs() {
			return true
		}
	}
	return false
}

// Params is the number of head parameters the program reads: 1 + the
// largest index of its param ops, 0 when it reads none.
func (p *Prog) Params() int {
	n := 0
	for _, in := range p.Insts {
		if f, ok := in.Field(); ok && f.Input() == InputHeadParams {
			n = max(n, int(f-FieldParam)+1)
		}
	}
	return n
}

// Live reports, per value, whether some result depends on it. Renderers
// skip dead values.
func (p *Prog) Live() []bool {
	live := make([]bool, len(p.Insts))
	for _, r := range p.Results {
		live[r] = true
	}
	for k := len(p.Insts) - 1; k >= 0; k-- {
		if live[k] {
			for _, x := range p.Insts[k].operands() {
				live[x] = true
			}
		}
	}
	return live
}

// Eval runs the program on args and writes its results to res; scratch
// holds the values (allocated when shorter than the program). docs may be
// nil when UsesDocs is false. It is the reference every renderer is tested
// against, and the CPU runtime's mask when attngen runs a plan itself.
func (p *Prog) Eval(args []int64, docs *mask.Docs, scratch, res []int64) {
	if len(scratch) < len(p.Insts) {
		scratch = make([]int64, len(p.Insts))
	}
	v := scratch[:len(p.Insts)]
	for k, in := range p.Insts {
		var x int64
		switch in.Op {
		case IRArg:
			x = args[in.Imm]
		case IRConst:
			x = in.Imm
		case IRAdd:
			x = v[in.A] + v[in.B]
		case IRSub:
			x = v[in.A] - v[in.B]
		case IRMulC:
			x = v[in.A] * in.Imm
		case IRDivC:
			x = int64(mask.FloorDiv(int(v[in.A]), int(in.Imm)))
		case IRModC:
			x = int64(mask.FloorMod(int(v[in.A]), int(in.Imm)))
		case IRDiv:
			x = int64(mask.FloorDiv(int(v[in.A]), int(v[in.B])))
		case IRMin:
			x = min(v[in.A], v[in.B])
		case IRMax:
			x = max(v[in.A], v[in.B])
		case IRLt:
			x = b2i(v[in.A] < v[in.B])
		case IRLe:
			x = b2i(v[in.A] <= v[in.B])
		case IREq:
			x = b2i(v[in.A] == v[in.B])
		case IRAnd:
			x = b2i(v[in.A] != 0 && v[in.B] != 0)
		case IROr:
			x = b2i(v[in.A] != 0 || v[in.B] != 0)
		case IRNot:
			x = b2i(v[in.A] == 0)
		case IRSelect:
			x = v[in.C]
			if v[in.A] != 0 {
				x = v[in.B]
			}
		case IRLoad:
			f := Field(in.Imm)
			a := 0
			if f.Indexed() {
				a = int(v[in.A])
			}
			x = int64(f.Load(docs, a))
		case IRTreeAnc:
			x = b2i(docs.TreeAnc(int(v[in.A]), int(v[in.B])))
		case IRWTree:
			x = int64(docs.TreeWord(int(v[in.A]), int(v[in.B])))
		case IRWRange:
			lo, hi := int64(0), int64(63)
			if in.A >= 0 {
				lo = v[in.A]
			}
			if in.B >= 0 {
				hi = v[in.B]
			}
			x = int64(mask.Lanes(int(lo), int(hi)))
		case IRWStep:
			x = int64(mask.Every(int(v[in.A]), int(in.Imm)))
		case IRWAnd:
			x = v[in.A] & v[in.B]
		case IRWOr:
			x = v[in.A] | v[in.B]
		case IRWIf:
			if v[in.A] != 0 {
				x = v[in.B]
			}
		case IRWNot:
			x = ^v[in.A]
		case IRWPeriod:
			x = int64(periodWord(v[in.A], v[in.B], v[in.C], in.Imm))
		default:
			panic("BUG: unknown IR op " + in.Op.String())
		}
		v[k] = x
	}
	for n, r := range p.Results {
		res[n] = v[r]
	}
}

// periodWord is wperiod's word: the lanes c in [0, 63] whose m = (c + a)
// mod p satisfies m <= b and m mod step == 0 (step below 1 is 1). Runs of
// b+1 lanes start every p lanes, from the lane where m is 0; each keeps
// the lanes of the step's class.
func periodWord(a, b, step, p int64) uint64 {
	step = max(step, 1)
	var w uint64
	for s := -int64(mask.FloorMod(int(a), int(p))); s < 64; s += p {
		w |= mask.Lanes(int(s), int(min(s+b, 63))) & mask.Every(int(s), int(step))
	}
	return w
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// parseLoad reads the operands of a load of the field group starting at
// first and holding n fields: a position operand for an Indexed field,
// the number within the group when it has more than one.
func parseLoad(first Field, n int64, ops []string) (Inst, error) {
	in := Inst{Op: IRLoad, Imm: int64(first)}
	want := 0
	if first.Indexed() {
		want++
	}
	if n > 1 {
		want++
	}
	if len(ops) != want {
		return in, fmt.Errorf("takes %d operands, got %d", want, len(ops))
	}
	if first.Indexed() {
		v, err := strconv.Atoi(strings.TrimPrefix(ops[0], "v"))
		if err != nil || !strings.HasPrefix(ops[0], "v") {
			return in, fmt.Errorf("bad operand %q", ops[0])
		}
		in.A = v
	}
	if n > 1 {
		k, err := strconv.ParseInt(ops[len(ops)-1], 10, 64)
		if err != nil || k < 0 || k >= n {
			return in, fmt.Errorf("bad number %q (want 0 to %d)", ops[len(ops)-1], n-1)
		}
		in.Imm += k
	}
	return in, nil
}
