package gen

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// Run-time inputs. The data a call gives at run time (document ids, a
// tree's parent array, the head parameters) reaches the plan's programs
// through one op, IRLoad, whose immediate is a Field: one value of one of
// the plan's inputs (Input), read at a position (its operand A) or, for a
// value per call or per query head, at none. An input's fields are the
// array the call gives or arrays the runtime derives from it once per call
// (a document's first and last positions, the parent array's summaries);
// every target reads a field from one place (runtime/mask.Docs on the CPU,
// a kernel parameter on the PTX targets), so a renderer handles IRLoad
// once, and a new input adds fields here, its validation in the runtimes
// and the ops that lower its primitive. Tree ancestry (IRTreeAnc, IRWTree)
// is more than a load and keeps ops of its own. See docs/architecture.md.

// Field names what an IRLoad reads (its Imm).
type Field int64

const (
	FieldDocID    Field = iota // docs: the document id of position A
	FieldDocStart              // docs, derived: the first position of A's document
	FieldDocEnd                // docs, derived: the last position of A's document
	// FieldTreeInfo+k, k = 0..2 (tree, derived, per call) is
	// mask.Docs.TreeInfo(k): the leading chain's length, the least TreeLo
	// past it, the largest chain ancestor past it.
	FieldTreeInfo
	// FieldParam+k (head_params, per query head) is head parameter k at
	// the head being computed (mask.Docs.Param; Plan.HeadParams gives its
	// range).
	FieldParam = FieldTreeInfo + 3
	// NumFields bounds the fields: FieldParam+k for k < mask.MaxHeadParams.
	NumFields = FieldParam + mask.MaxHeadParams
)

// InputKind is a run-time input a plan may read.
type InputKind uint8

const (
	InputDocs       InputKind = iota // document ids, one per position (Args.Docs)
	InputTree                        // a parent array, one entry per position (Args.Tree)
	InputHeadParams                  // integers per query head (Args.HeadParams)
	numInputs
)

var inputNames = [numInputs]string{"docs", "tree", "head_params"}

func (k InputKind) String() string {
	if k < numInputs {
		return inputNames[k]
	}
	return fmt.Sprintf("InputKind(%d)", int(k))
}

// Valid reports whether f is a field.
func (f Field) Valid() bool { return f >= 0 && f < NumFields }

// Input is the input f reads.
func (f Field) Input() InputKind {
	switch {
	case f < FieldTreeInfo:
		return InputDocs
	case f < FieldParam:
		return InputTree
	}
	return InputHeadParams
}

// Indexed reports whether f is read at a position (IRLoad's operand A);
// the others are one value per call or per query head.
func (f Field) Indexed() bool { return f < FieldTreeInfo }

// mnemonic is how a load of f prints in program text (Prog.String): the
// op name of the field's group and, for per-call and per-head values, the
// number within it ("docid v3", "treeinfo 1", "param 0").
func (f Field) mnemonic() (name string, sub int64, hasSub bool) {
	switch {
	case f == FieldDocID:
		return "docid", 0, false
	case f == FieldDocStart:
		return "docstart", 0, false
	case f == FieldDocEnd:
		return "docend", 0, false
	case f < FieldParam:
		return "treeinfo", int64(f - FieldTreeInfo), true
	}
	return "param", int64(f - FieldParam), true
}

// loadMnemonics are the field groups ParseProg reads: the first field of
// each and the number of fields it holds.
var loadMnemonics = map[string]struct {
	first Field
	n     int64
}{
	"docid": {FieldDocID, 1}, "docstart": {FieldDocStart, 1}, "docend": {FieldDocEnd, 1},
	"treeinfo": {FieldTreeInfo, 3}, "param": {FieldParam, mask.MaxHeadParams},
}

func (f Field) String() string {
	name, sub, ok := f.mnemonic()
	if ok {
		return fmt.Sprintf("%s %d", name, sub)
	}
	return name
}

// Load returns field f of the run-time data d at position a (ignored
// for fields that are not Indexed): what IRLoad evaluates to.
func (f Field) Load(d *mask.Docs, a int) int {
	switch {
	case f == FieldDocID:
		return int(d.ID(a))
	case f == FieldDocStart:
		return d.Start(a)
	case f == FieldDocEnd:
		return d.End(a)
	case f < FieldParam:
		return d.TreeInfo(int(f - FieldTreeInfo))
	}
	return d.Param(int(f - FieldParam))
}

// load emits an IRLoad of f at position a (a is ignored, and should be
// 0, for fields that are not Indexed).
func (b *builder) load(f Field, a int) int {
	if !f.Indexed() {
		a = 0
	}
	return b.emit(Inst{Op: IRLoad, Imm: int64(f), A: a})
}

// Field is the field an IRLoad reads, and whether in is one.
func (in Inst) Field() (Field, bool) { return Field(in.Imm), in.Op == IRLoad }

// loads reports whether in loads field f.
func (in Inst) loads(f Field) bool { g, ok := in.Field(); return ok && g == f }

// Inputs returns the run-time inputs the program reads, each once, in
// InputKind order.
func (p *Prog) Inputs() []InputKind {
	var seen [numInputs]bool
	for _, in := range p.Insts {
		switch {
		case in.Op == IRLoad:
			seen[Field(in.Imm).Input()] = true
		case in.Op.Tree():
			seen[InputTree] = true
		}
	}
	var out []InputKind
	for k, ok := range seen {
		if ok {
			out = append(out, InputKind(k))
		}
	}
	return out
}
