package gen

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/attngen/attngen/spec"
)

// IROp is an operation of the partial-tile predicate. Values are 64-bit
// integers; comparisons and logic produce 0 or 1.
type IROp uint8

const (
	IRRow      IROp = iota // the query position i (in the plan's layout)
	IRCol                  // the key position j
	IRConst                // Imm
	IRAdd                  // A + B
	IRSub                  // A - B
	IRDivC                 // floor(A / Imm), Imm >= 1
	IRModC                 // A mod Imm in [0, Imm), Imm >= 1
	IRLt                   // A < B
	IRLe                   // A <= B
	IREq                   // A == B
	IRAnd                  // A && B
	IROr                   // A || B
	IRDocID                // document id of position A (run-time ids)
	IRDocStart             // first position of A's document
	numIROps
)

var irNames = [...]string{"row", "col", "const", "add", "sub", "divc", "modc", "lt", "le", "eq", "and", "or", "docid", "docstart"}

func (o IROp) String() string {
	if o < numIROps {
		return irNames[o]
	}
	return fmt.Sprintf("IROp(%d)", int(o))
}

// Arity is the number of value operands the op reads.
func (o IROp) Arity() int {
	switch o {
	case IRRow, IRCol, IRConst:
		return 0
	case IRDivC, IRModC, IRDocID, IRDocStart:
		return 1
	}
	return 2
}

// HasImm reports whether the op carries an immediate.
func (o IROp) HasImm() bool { return o == IRConst || o == IRDivC || o == IRModC }

// Inst is one SSA instruction; it defines value number = its index. A and B
// name earlier values.
type Inst struct {
	Op   IROp
	A, B int
	Imm  int64
}

// Pred is the partial-tile predicate: a straight-line SSA program whose last
// instruction is the result (1 = the pair is kept).
type Pred struct {
	Insts []Inst
}

// String prints one instruction per line: "v3 = sub v0 v1", "v4 = modc v3 8".
func (p *Pred) String() string {
	var b strings.Builder
	for k, in := range p.Insts {
		fmt.Fprintf(&b, "v%d = %s", k, in.Op)
		if in.Op.Arity() >= 1 {
			fmt.Fprintf(&b, " v%d", in.A)
		}
		if in.Op.Arity() == 2 {
			fmt.Fprintf(&b, " v%d", in.B)
		}
		if in.Op.HasImm() {
			fmt.Fprintf(&b, " %d", in.Imm)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ParsePred reads the text String prints and checks it.
func ParsePred(text string) (*Pred, error) {
	p := &Pred{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 || f[1] != "=" || f[0] != fmt.Sprintf("v%d", len(p.Insts)) {
			return nil, fmt.Errorf("predicate line %d: want \"v%d = op ...\", got %q", line, len(p.Insts), sc.Text())
		}
		op := IROp(0)
		for ; op < numIROps && op.String() != f[2]; op++ {
		}
		if op == numIROps {
			return nil, fmt.Errorf("predicate line %d: unknown op %q", line, f[2])
		}
		args := f[3:]
		want := op.Arity()
		if op.HasImm() {
			want++
		}
		if len(args) != want {
			return nil, fmt.Errorf("predicate line %d: %s takes %d operands, got %d", line, op, want, len(args))
		}
		in := Inst{Op: op}
		for k := 0; k < op.Arity(); k++ {
			v, err := strconv.Atoi(strings.TrimPrefix(args[k], "v"))
			if err != nil || !strings.HasPrefix(args[k], "v") {
				return nil, fmt.Errorf("predicate line %d: bad operand %q", line, args[k])
			}
			if k == 0 {
				in.A = v
			} else {
				in.B = v
			}
		}
		if op.HasImm() {
			v, err := strconv.ParseInt(args[len(args)-1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("predicate line %d: bad immediate %q", line, args[len(args)-1])
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
// divc and modc are positive, and there is a result.
func (p *Pred) Check() error {
	if len(p.Insts) == 0 {
		return fmt.Errorf("predicate: empty")
	}
	for k, in := range p.Insts {
		if in.Op >= numIROps {
			return fmt.Errorf("predicate v%d: unknown op %d", k, in.Op)
		}
		if (in.Op.Arity() >= 1 && (in.A < 0 || in.A >= k)) || (in.Op.Arity() == 2 && (in.B < 0 || in.B >= k)) {
			return fmt.Errorf("predicate v%d: operand not defined before use", k)
		}
		if (in.Op == IRDivC || in.Op == IRModC) && in.Imm < 1 {
			return fmt.Errorf("predicate v%d: %s by %d", k, in.Op, in.Imm)
		}
	}
	return nil
}

// UsesDocs reports whether the predicate reads document ids.
func (p *Pred) UsesDocs() bool {
	for _, in := range p.Insts {
		if in.Op == IRDocID || in.Op == IRDocStart {
			return true
		}
	}
	return false
}

// Eval runs the predicate for one pair. docs may be nil when UsesDocs is
// false. Emitters' kernels are checked against it, and it against the mask.
func (p *Pred) Eval(i, j int, docs *spec.Docs) bool {
	var stack [64]int64
	v := stack[:0]
	if len(p.Insts) > len(stack) {
		v = make([]int64, 0, len(p.Insts))
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	for _, in := range p.Insts {
		var x int64
		switch in.Op {
		case IRRow:
			x = int64(i)
		case IRCol:
			x = int64(j)
		case IRConst:
			x = in.Imm
		case IRAdd:
			x = v[in.A] + v[in.B]
		case IRSub:
			x = v[in.A] - v[in.B]
		case IRDivC:
			x = v[in.A] / in.Imm
			if v[in.A]%in.Imm != 0 && v[in.A] < 0 {
				x--
			}
		case IRModC:
			x = v[in.A] % in.Imm
			if x < 0 {
				x += in.Imm
			}
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
		case IRDocID:
			x = int64(docs.ID(int(v[in.A])))
		case IRDocStart:
			x = int64(docs.Start(int(v[in.A])))
		default:
			panic("BUG: unknown IR op " + in.Op.String())
		}
		v = append(v, x)
	}
	return v[len(v)-1] != 0
}
