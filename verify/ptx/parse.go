package ptx

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Module is a parsed PTX module: its header and kernels, each decoded once
// into an executable form.
type Module struct {
	File        string // name used in error messages
	Version     string // .version
	Target      string // .target (sm_80 or later)
	AddressSize int    // .address_size (64)

	kernels []*Kernel
	byName  map[string]*Kernel
	shared  []*sharedVar // module-scope .shared variables
}

// Kernel is one .entry of a module.
type Kernel struct {
	Name   string
	Params []Param
	// ReqNTID is the .reqntid directive (zero when absent); MaxNTID likewise.
	ReqNTID, MaxNTID [3]int

	mod       *Module
	regs      map[string]*regInfo
	nData     int // data register slots (special registers included)
	nPred     int // predicate register slots
	special   [numSpecial]int32
	regNames  []string // data slot -> name
	predNames []string // pred slot -> name
	shared    []*sharedVar
	static    int // bytes of static shared memory
	dynAlign  int // alignment of the dynamic shared region (0: none declared)
	code      []inst
	labels    map[string]int
}

// Param is a kernel parameter.
type Param struct {
	Name   string
	Type   string // ".u64", ".u32", ".s32", ".f32", ...
	Offset int    // byte offset in the parameter buffer
	typ    dtype
}

type regInfo struct {
	slot int32
	typ  dtype
}

type sharedVar struct {
	name   string
	align  int
	size   int // bytes; -1 for .extern (dynamic)
	offset int // assigned per kernel
	line   int
}

const (
	spTidX = iota
	spTidY
	spTidZ
	spNtidX
	spNtidY
	spNtidZ
	spCtaidX
	spCtaidY
	spCtaidZ
	spNctaidX
	spNctaidY
	spNctaidZ
	spLaneid
	spWarpid
	spNwarpid
	numSpecial
)

var specialNames = map[string]int{
	"%tid.x": spTidX, "%tid.y": spTidY, "%tid.z": spTidZ,
	"%ntid.x": spNtidX, "%ntid.y": spNtidY, "%ntid.z": spNtidZ,
	"%ctaid.x": spCtaidX, "%ctaid.y": spCtaidY, "%ctaid.z": spCtaidZ,
	"%nctaid.x": spNctaidX, "%nctaid.y": spNctaidY, "%nctaid.z": spNctaidZ,
	"%laneid": spLaneid, "%warpid": spWarpid, "%nwarpid": spNwarpid,
}

// Kernels lists the module's kernels in source order.
func (m *Module) Kernels() []*Kernel { return m.kernels }

// Kernel returns the kernel with the given name, or nil.
func (m *Module) Kernel(name string) *Kernel { return m.byName[name] }

// StaticShared is the kernel's static shared memory in bytes.
func (k *Kernel) StaticShared() int { return k.static }

// Instructions is the number of decoded instructions.
func (k *Kernel) Instructions() int { return len(k.code) }

type parser struct {
	file string
	toks []token
	pos  int
	src  string
	errs ErrorList
	mod  *Module
}

type bailout struct{}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tkEOF {
		p.pos++
	}
	return t
}

func (p *parser) errAt(t token, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...)})
}

// fail records an error and abandons the current statement.
func (p *parser) fail(t token, format string, args ...any) {
	p.errAt(t, format, args...)
	panic(bailout{})
}

func (p *parser) expect(s string) token {
	t := p.next()
	if t.s != s || t.kind == tkNum {
		p.fail(t, "expected %q, found %q", s, t.s)
	}
	return t
}

func (p *parser) is(s string) bool {
	t := p.peek()
	return t.kind != tkNum && t.kind != tkEOF && t.s == s
}

// skipStatement moves past the next ';' (or stops before a '}' or EOF).
func (p *parser) skipStatement() {
	for {
		t := p.peek()
		if t.kind == tkEOF || t.s == "}" && t.kind == tkPunct {
			return
		}
		p.next()
		if t.s == ";" && t.kind == tkPunct {
			return
		}
	}
}

// stmt runs f, recovering from a bailout by skipping to the end of the
// statement.
func (p *parser) stmt(f func()) { p.recoverWith(f, p.skipStatement) }

// top runs f for a module-level statement, recovering from a bailout by
// skipping to the next module-level directive.
func (p *parser) top(f func()) {
	p.recoverWith(f, func() {
		start := p.pos
		for p.peek().kind != tkEOF {
			t := p.peek()
			if p.pos > start && t.kind == tkIdent && moduleStarters[t.s] {
				return
			}
			p.next()
		}
	})
}

var moduleStarters = map[string]bool{".version": true, ".target": true, ".address_size": true,
	".visible": true, ".weak": true, ".entry": true, ".shared": true, ".extern": true}

func (p *parser) recoverWith(f, recovery func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			recovery()
		}
	}()
	f()
}

// Parse parses and decodes a PTX module. file names the source in error
// messages. All errors found are returned as an ErrorList.
func Parse(file, src string) (*Module, error) {
	toks, lerr := lex(src)
	if lerr != nil {
		lerr.File = file
		return nil, ErrorList{lerr}
	}
	p := &parser{file: file, toks: toks, src: src, mod: &Module{File: file, byName: map[string]*Kernel{}, AddressSize: 64}}
	p.module()
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.mod, nil
}

func (p *parser) module() {
	sawTarget := false
	for p.peek().kind != tkEOF {
		t := p.peek()
		switch {
		case t.s == ".version":
			p.top(func() {
				p.next()
				v := p.next()
				if v.kind != tkNum {
					p.fail(v, ".version needs a number")
				}
				p.mod.Version = v.s
			})
		case t.s == ".target":
			p.top(func() {
				p.next()
				v := p.next()
				p.mod.Target = v.s
				sawTarget = true
				if !strings.HasPrefix(v.s, "sm_") {
					p.fail(v, "unsupported target %q", v.s)
				}
				n, err := strconv.Atoi(strings.TrimSuffix(v.s[3:], "a"))
				if err != nil || n < 80 {
					p.fail(v, "target %s: the interpreter's subset (cp.async, ldmatrix, bf16 mma) needs sm_80 or later", v.s)
				}
				for p.is(",") { // .target sm_80, texmode_independent ...
					p.next()
					p.next()
				}
			})
		case t.s == ".address_size":
			p.top(func() {
				p.next()
				v := p.next()
				if v.s != "64" {
					p.fail(v, "only .address_size 64 is supported")
				}
				p.mod.AddressSize = 64
			})
		case t.s == ".visible" || t.s == ".entry" || t.s == ".weak":
			p.entry()
			continue
		case t.s == ".shared" || t.s == ".extern":
			p.top(func() {
				v := p.sharedDecl()
				for _, o := range p.mod.shared {
					if o.name == v.name {
						p.fail(t, "shared variable %s declared twice", v.name)
					}
				}
				p.mod.shared = append(p.mod.shared, v)
			})
		case t.s == ";":
			p.next()
			continue
		default:
			p.top(func() {
				if t.s == "extern" {
					p.fail(t, "write .extern, not extern")
				}
				p.fail(t, "unsupported module-level statement %q", t.s)
			})
		}
		if p.is(";") {
			p.next()
		}
	}
	if !sawTarget && len(p.errs) == 0 {
		p.errAt(p.peek(), "module has no .target directive")
	}
}

// sharedDecl parses `[.extern] .shared [.align N] .type name[count];` and
// consumes the ';'.
func (p *parser) sharedDecl() *sharedVar {
	start := p.peek()
	ext := false
	if p.is(".extern") {
		p.next()
		ext = true
	}
	p.expect(".shared")
	v := &sharedVar{line: start.line}
	if p.is(".align") {
		p.next()
		n := p.next()
		a, err := strconv.Atoi(n.s)
		if err != nil || a <= 0 || a&(a-1) != 0 {
			p.fail(n, "bad alignment %q", n.s)
		}
		v.align = a
	}
	tt := p.next()
	typ, ok := dtypeNames[strings.TrimPrefix(tt.s, ".")]
	if !ok || !strings.HasPrefix(tt.s, ".") || typ == tPred {
		p.fail(tt, "expected a type for the shared variable, found %q", tt.s)
	}
	if v.align == 0 {
		v.align = typ.size()
	}
	name := p.next()
	if name.kind != tkIdent || strings.HasPrefix(name.s, "%") || strings.HasPrefix(name.s, ".") {
		p.fail(name, "expected a shared variable name, found %q", name.s)
	}
	v.name = name.s
	count := 1
	if p.is("[") {
		p.next()
		if p.is("]") {
			if !ext {
				p.fail(name, "shared array %s[] without a size must be .extern", v.name)
			}
			count = -1
		} else {
			n := p.next()
			c, err := strconv.Atoi(n.s)
			if err != nil || c <= 0 {
				p.fail(n, "bad array size %q", n.s)
			}
			count = c
		}
		p.expect("]")
	}
	if ext && count != -1 {
		p.fail(name, ".extern .shared %s must be declared with [] (dynamic shared memory)", v.name)
	}
	if count == -1 {
		v.size = -1
	} else {
		v.size = count * typ.size()
	}
	p.expect(";")
	return v
}

func (p *parser) entry() {
	k := &Kernel{mod: p.mod, regs: map[string]*regInfo{}, labels: map[string]int{}}
	for i := range k.special {
		k.special[i] = -1
	}
	var nameTok token
	ok := true
	p.recoverWith(func() {
		if p.is(".visible") || p.is(".weak") {
			p.next()
		}
		p.expect(".entry")
		nameTok = p.next()
		if nameTok.kind != tkIdent {
			p.fail(nameTok, "expected a kernel name")
		}
		k.Name = nameTok.s
		p.expect("(")
		off := 0
		for !p.is(")") {
			p.expect(".param")
			tt := p.next()
			typ, tok := dtypeNames[strings.TrimPrefix(tt.s, ".")]
			if !tok || !strings.HasPrefix(tt.s, ".") {
				p.fail(tt, "bad parameter type %q", tt.s)
			}
			switch typ {
			case tU32, tS32, tB32, tU64, tS64, tB64, tF32:
			default:
				p.fail(tt, "unsupported parameter type %s (use .u32, .s32, .b32, .u64, .s64, .b64 or .f32)", tt.s)
			}
			// optional .ptr [.space] [.align N]
			if p.is(".ptr") {
				p.next()
				if p.is(".global") || p.is(".shared") || p.is(".const") || p.is(".local") {
					p.next()
				}
				if p.is(".align") {
					p.next()
					p.next()
				}
			}
			nt := p.next()
			if nt.kind != tkIdent || strings.HasPrefix(nt.s, "%") || strings.HasPrefix(nt.s, ".") {
				p.fail(nt, "expected a parameter name, found %q", nt.s)
			}
			sz := typ.size()
			off = (off + sz - 1) / sz * sz
			for _, q := range k.Params {
				if q.Name == nt.s {
					p.fail(nt, "parameter %s declared twice", nt.s)
				}
			}
			k.Params = append(k.Params, Param{Name: nt.s, Type: typ.String(), Offset: off, typ: typ})
			off += sz
			if p.is(",") {
				p.next()
			} else if !p.is(")") {
				p.fail(p.peek(), "expected ',' or ')' in the parameter list")
			}
		}
		p.expect(")")
		for {
			switch {
			case p.is(".maxntid"), p.is(".reqntid"):
				d := p.next()
				var dims [3]int
				for i := 0; i < 3; i++ {
					n := p.next()
					v, err := strconv.Atoi(n.s)
					if err != nil || v <= 0 {
						p.fail(n, "bad %s value %q", d.s, n.s)
					}
					dims[i] = v
					if !p.is(",") {
						for j := i + 1; j < 3; j++ {
							dims[j] = 1
						}
						break
					}
					p.next()
				}
				if d.s == ".reqntid" {
					k.ReqNTID = dims
				} else {
					k.MaxNTID = dims
				}
				continue
			case p.is(".minnctapersm"), p.is(".maxnreg"), p.is(".maxnctapersm"):
				p.next()
				p.next()
				continue
			}
			break
		}
		if !p.is("{") {
			p.fail(p.peek(), "expected '{' to open the body of %s", k.Name)
		}
	}, func() {
		ok = false
		for p.peek().kind != tkEOF && !p.is("{") {
			p.next()
		}
	})
	if !p.is("{") {
		return
	}
	p.next()
	body := p.body(k)
	if !ok {
		return
	}
	if p.mod.byName[k.Name] != nil {
		p.errAt(nameTok, "kernel %s defined twice", k.Name)
		return
	}
	p.layoutShared(k, nameTok)
	p.decodeBody(k, body)
	p.mod.kernels = append(p.mod.kernels, k)
	p.mod.byName[k.Name] = k
}

// rawStmt is one instruction as written: guard, opcode and operands.
type rawStmt struct {
	tok      token // the opcode token
	guard    string
	guardNeg bool
	guardTok token
	opcode   string
	ops      []rawOp
	text     string
	label    string // for label statements (opcode == "")
}

type rawKind uint8

const (
	rReg   rawKind = iota // %name (special registers too)
	rIdent                // a label, shared variable or parameter name
	rInt                  // integer literal
	rFloat                // floating literal
	rVec                  // {a, b, ...}
	rAddr                 // [base+off]
	rPair                 // %p|%q
)

type rawOp struct {
	kind rawKind
	tok  token
	name string // rReg, rIdent, rAddr base ("" for an absolute address)
	neg  bool   // !%p
	ival uint64 // rInt (two's complement), rAddr offset
	fval uint64 // rFloat: the bits as f32 when f32bits, else f64 bits
	f64  bool   // rFloat written as 0d... or decimal
	sub  []rawOp
	off  int64
}

// body parses declarations, labels and instructions up to the closing brace.
func (p *parser) body(k *Kernel) []rawStmt {
	var out []rawStmt
	depth := 1
	for {
		t := p.peek()
		if t.kind == tkEOF {
			p.errAt(t, "unexpected end of file in the body of %s", k.Name)
			return out
		}
		if t.kind == tkPunct && t.s == "}" {
			p.next()
			depth--
			if depth == 0 {
				return out
			}
			continue
		}
		if t.kind == tkPunct && t.s == "{" {
			p.next()
			depth++
			continue
		}
		if t.kind == tkPunct && t.s == ";" {
			p.next()
			continue
		}
		p.stmt(func() {
			switch {
			case t.s == ".reg":
				p.regDecl(k)
			case t.s == ".shared" || t.s == ".extern":
				v := p.sharedDecl()
				for _, o := range k.shared {
					if o.name == v.name {
						p.fail(t, "shared variable %s declared twice", v.name)
					}
				}
				k.shared = append(k.shared, v)
			case t.s == ".local" || t.s == ".const" || t.s == ".global" || t.s == ".param":
				p.fail(t, "%s variables are not supported by the interpreter", t.s)
			case t.kind == tkIdent && p.toks[p.pos+1].s == ":" && p.toks[p.pos+1].kind == tkPunct:
				p.next()
				p.next()
				if strings.HasPrefix(t.s, "%") || strings.HasPrefix(t.s, ".") {
					p.fail(t, "bad label name %q", t.s)
				}
				out = append(out, rawStmt{tok: t, label: t.s})
			default:
				out = append(out, p.instruction())
			}
		})
	}
}

func (p *parser) regDecl(k *Kernel) {
	p.expect(".reg")
	tt := p.next()
	typ, ok := dtypeNames[strings.TrimPrefix(tt.s, ".")]
	if !ok || !strings.HasPrefix(tt.s, ".") {
		p.fail(tt, "expected a register type, found %q", tt.s)
	}
	for {
		nt := p.next()
		if nt.kind != tkIdent || !strings.HasPrefix(nt.s, "%") || strings.Contains(nt.s, ".") {
			p.fail(nt, "expected a register name, found %q", nt.s)
		}
		if p.is("<") {
			p.next()
			n := p.next()
			cnt, err := strconv.Atoi(n.s)
			if err != nil || cnt <= 0 || cnt > 1<<16 {
				p.fail(n, "bad register count %q", n.s)
			}
			p.expect(">")
			for i := 0; i < cnt; i++ {
				p.declare(k, nt, nt.s+strconv.Itoa(i), typ)
			}
		} else {
			p.declare(k, nt, nt.s, typ)
		}
		if p.is(",") {
			p.next()
			continue
		}
		break
	}
	p.expect(";")
}

func (p *parser) declare(k *Kernel, at token, name string, typ dtype) {
	if _, dup := k.regs[name]; dup {
		p.fail(at, "register %s declared twice", name)
	}
	if _, sp := specialNames[name]; sp {
		p.fail(at, "%s is a special register", name)
	}
	r := &regInfo{typ: typ}
	if typ == tPred {
		r.slot = int32(k.nPred)
		k.nPred++
		k.predNames = append(k.predNames, name)
	} else {
		r.slot = int32(k.nData)
		k.nData++
		k.regNames = append(k.regNames, name)
	}
	k.regs[name] = r
}

// instruction parses `[@[!]%p] opcode operand, ...;`.
func (p *parser) instruction() rawStmt {
	var st rawStmt
	first := p.peek()
	if p.is("@") {
		p.next()
		st.guardTok = p.peek()
		if p.is("!") {
			p.next()
			st.guardNeg = true
		}
		g := p.next()
		if g.kind != tkIdent || !strings.HasPrefix(g.s, "%") {
			p.fail(g, "expected a predicate register after @")
		}
		st.guard = g.s
	}
	op := p.next()
	if op.kind != tkIdent || strings.HasPrefix(op.s, "%") || strings.HasPrefix(op.s, ".") {
		if op.kind == tkIdent && strings.HasPrefix(op.s, ".") {
			p.fail(op, "unsupported directive %s", op.s)
		}
		p.fail(op, "expected an instruction, found %q", op.s)
	}
	st.tok = op
	st.opcode = op.s
	for !p.is(";") {
		if p.peek().kind == tkEOF || p.is("}") {
			p.fail(p.peek(), "missing ';' after %s", op.s)
		}
		st.ops = append(st.ops, p.operand())
		if p.is(",") {
			p.next()
			if p.is(";") {
				p.fail(p.peek(), "operand expected after ','")
			}
		} else if !p.is(";") {
			p.fail(p.peek(), "expected ',' or ';', found %q", p.peek().s)
		}
	}
	end := p.next()
	st.text = strings.Join(strings.Fields(p.src[first.off:end.off]), " ")
	return st
}

func (p *parser) operand() rawOp {
	t := p.peek()
	switch {
	case t.kind == tkPunct && t.s == "{":
		p.next()
		o := rawOp{kind: rVec, tok: t}
		for {
			e := p.operand()
			if e.kind != rReg && e.kind != rIdent {
				p.fail(e.tok, "vector operands must be registers")
			}
			o.sub = append(o.sub, e)
			if p.is(",") {
				p.next()
				continue
			}
			p.expect("}")
			return o
		}
	case t.kind == tkPunct && t.s == "[":
		p.next()
		o := rawOp{kind: rAddr, tok: t}
		b := p.peek()
		switch {
		case b.kind == tkIdent:
			p.next()
			o.name = b.s
		case b.kind == tkNum || b.s == "-":
			v := p.intLit()
			o.off = int64(v)
			p.expect("]")
			return o
		default:
			p.fail(b, "bad address %q", b.s)
		}
		if p.is("+") || p.is("-") {
			sign := int64(1)
			if p.next().s == "-" {
				sign = -1
			}
			if p.is("-") {
				p.next()
				sign = -sign
			}
			n := p.next()
			v, err := parseIntLit(n.s)
			if err != nil || v > math.MaxInt32 {
				p.fail(n, "bad address offset %q", n.s)
			}
			o.off = sign * int64(v)
		}
		if p.is(",") { // [tensorMap, {c0, c1, ...}] of cp.async.bulk.tensor
			p.next()
			c := p.operand()
			if c.kind != rVec {
				p.fail(c.tok, "expected a vector of coordinates after ',' in an address")
			}
			o.sub = c.sub
		}
		p.expect("]")
		return o
	case t.kind == tkPunct && t.s == "!":
		p.next()
		r := p.next()
		if r.kind != tkIdent || !strings.HasPrefix(r.s, "%") {
			p.fail(r, "expected a predicate register after !")
		}
		return rawOp{kind: rReg, tok: t, name: r.s, neg: true}
	case t.kind == tkNum || t.kind == tkPunct && t.s == "-":
		neg := false
		if t.s == "-" {
			p.next()
			neg = true
		}
		n := p.next()
		if n.kind != tkNum {
			p.fail(n, "expected a number, found %q", n.s)
		}
		return p.numLit(n, neg, t)
	case t.kind == tkIdent && strings.HasPrefix(t.s, "%"):
		p.next()
		o := rawOp{kind: rReg, tok: t, name: t.s}
		if p.is("|") {
			p.next()
			q := p.next()
			if q.kind != tkIdent || !strings.HasPrefix(q.s, "%") {
				p.fail(q, "expected a predicate register after |")
			}
			return rawOp{kind: rPair, tok: t, sub: []rawOp{o, {kind: rReg, tok: q, name: q.s}}}
		}
		return o
	case t.kind == tkIdent && !strings.HasPrefix(t.s, "."):
		p.next()
		return rawOp{kind: rIdent, tok: t, name: t.s}
	}
	p.fail(t, "bad operand %q", t.s)
	return rawOp{}
}

func (p *parser) intLit() uint64 {
	neg := false
	if p.is("-") {
		p.next()
		neg = true
	}
	n := p.next()
	v, err := parseIntLit(n.s)
	if err != nil {
		p.fail(n, "bad integer %q", n.s)
	}
	if neg {
		v = -v
	}
	return v
}

func parseIntLit(s string) (uint64, error) {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "U"), "u")
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		return strconv.ParseUint(s[2:], 16, 64)
	case len(s) > 2 && (s[:2] == "0b" || s[:2] == "0B"):
		return strconv.ParseUint(s[2:], 2, 64)
	case len(s) > 1 && s[0] == '0':
		return strconv.ParseUint(s[1:], 8, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}

func (p *parser) numLit(n token, neg bool, at token) rawOp {
	s := n.s
	if len(s) == 10 && (s[:2] == "0f" || s[:2] == "0F") {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			p.fail(n, "bad f32 literal %q", s)
		}
		if neg {
			v ^= 1 << 31
		}
		return rawOp{kind: rFloat, tok: at, fval: v}
	}
	if len(s) == 18 && (s[:2] == "0d" || s[:2] == "0D") {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			p.fail(n, "bad f64 literal %q", s)
		}
		if neg {
			v ^= 1 << 63
		}
		return rawOp{kind: rFloat, tok: at, fval: v, f64: true}
	}
	if strings.ContainsAny(s, ".eE") && !isHexish(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			p.fail(n, "bad floating literal %q", s)
		}
		if neg {
			f = -f
		}
		return rawOp{kind: rFloat, tok: at, fval: math.Float64bits(f), f64: true}
	}
	v, err := parseIntLit(s)
	if err != nil {
		p.fail(n, "bad integer literal %q", s)
	}
	if neg {
		v = -v
	}
	return rawOp{kind: rInt, tok: at, ival: v}
}

// layoutShared assigns offsets: module-scope variables, then the kernel's,
// in declaration order, each at its alignment; every .extern variable names
// the dynamic region that starts after them. The kernel gets its own copies.
func (p *parser) layoutShared(k *Kernel, at token) {
	var all []*sharedVar
	seen := map[string]bool{}
	for _, v := range append(append([]*sharedVar{}, p.mod.shared...), k.shared...) {
		if seen[v.name] {
			p.errAt(at, "shared variable %s of kernel %s is also declared at module scope", v.name, k.Name)
		}
		seen[v.name] = true
		c := *v
		all = append(all, &c)
	}
	off := 0
	for _, v := range all {
		if v.size < 0 {
			k.dynAlign = max(k.dynAlign, v.align)
			continue
		}
		off = (off + v.align - 1) / v.align * v.align
		v.offset = off
		off += v.size
	}
	k.static = off
	if k.dynAlign > 0 {
		dyn := (off + k.dynAlign - 1) / k.dynAlign * k.dynAlign
		for _, v := range all {
			if v.size < 0 {
				v.offset = dyn
			}
		}
	}
	if k.static > 48*1024 {
		p.errAt(at, "kernel %s declares %d bytes of static shared memory; the limit is 49152 (use .extern .shared for more)", k.Name, k.static)
	}
	k.shared = all
}
