package spec

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Spec is a parsed, validated spec file. Its masks are normalized: no
// shorthand survives parsing.
type Spec struct {
	File   string
	Name   string // Go package name of the generated code
	Mask   *Mask
	Causal bool
	// HeadDim is the head dimension of q and k (head_dim, or its qk);
	// HeadDimV that of v and the output (head_dim's v; equal to HeadDim
	// when head_dim is one number).
	HeadDim  int
	HeadDimV int
	// HeadDimPos is where head_dim was written (zero when defaulted):
	// which head dimensions run is the targets' business, and their errors
	// point here.
	HeadDimPos Pos
	// PageSize is the key positions a page of a paged KV cache holds (0:
	// no paged API). Generated packages then offer ForwardPaged.
	PageSize int
	// HeadParams are the run-time integers (one per query head) that mask
	// fields name instead of constants, in the order written.
	HeadParams []HeadParam
	Schedule   []ScheduleEntry // empty: the mask alone
	Masks      map[string]*Mask
	// Score is the score section (the zero value: scores as computed).
	Score Score
}

// ScheduleEntry is one layer of the analysis schedule: "mask", "full" or the
// name of an extra mask.
type ScheduleEntry struct {
	Name string
	Pos  Pos
}

// Pattern is the spec's own mask with its causal flag.
func (s *Spec) Pattern() Pattern {
	p := s.pattern(s.Mask)
	p.Score = s.Score
	return p
}

// pattern is m with the spec's causal flag and, when m takes head
// parameters, the spec's declarations of them.
func (s *Spec) pattern(m *Mask) Pattern {
	p := Pattern{Mask: m, Causal: s.Causal}
	if m != nil && m.HasRefs() {
		p.Params = s.HeadParams
	}
	return p
}

// Layers resolves the schedule, input side first. Without a schedule it is
// the spec's mask alone. Layers are masks for the reachability model: they
// carry no score section.
func (s *Spec) Layers() []Pattern {
	if len(s.Schedule) == 0 {
		return []Pattern{s.pattern(s.Mask)}
	}
	out := make([]Pattern, len(s.Schedule))
	for k, e := range s.Schedule {
		switch e.Name {
		case "mask":
			out[k] = s.pattern(s.Mask)
		case "full":
			out[k] = Pattern{Mask: Full(), Causal: s.Causal}
		default:
			out[k] = s.pattern(s.Masks[e.Name])
		}
	}
	return out
}

// LayerAt is the pattern of layer k (1-based) of a stack built from the
// schedule: entry (k-1) mod len(schedule).
func (s *Spec) LayerAt(k int) Pattern {
	l := s.Layers()
	return l[(k-1)%len(l)]
}

// MaskNames returns the extra mask names, sorted.
func (s *Spec) MaskNames() []string {
	names := make([]string, 0, len(s.Masks))
	for n := range s.Masks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Limits on what a spec may say. Integers are bounded so that positions fit
// the 32-bit indices kernels use; nesting is bounded so that no input can
// exhaust the stack. A mask holds at most MaxPrimitives primitives once its
// shorthands are expanded: every primitive is a few instructions of every
// program of the plan, and the kernels evaluate the partial-tile predicate
// once per element (the PTX inlines it once per element a thread holds),
// so the generated code and the time to generate, plan and verify grow
// with the count (a 2,500-primitive union wrote 140 MB of PTX).
const (
	MaxInt        = math.MaxInt32
	MaxDepth      = 64
	MaxPrimitives = 1024
)

// Limits on a spec file as a whole. A spec is a few lines; the size cap
// keeps a stray device or a huge file from being read into memory and
// parsed, and the error cap keeps a file full of mistakes from printing
// tens of thousands of lines.
const (
	MaxFileSize = 1 << 20 // bytes
	MaxErrors   = 20      // errors listed; the rest are counted
)

// ParseFile reads and parses a spec file, reading at most MaxFileSize+1
// bytes: a larger file (or an endless one such as /dev/zero) is refused
// without reading the rest.
func ParseFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, ErrorList{{Pos{path, 1, 1}, fmt.Sprintf("spec file is larger than 1 MiB (%d bytes): a spec is a few lines, so this is not one", MaxFileSize)}}
	}
	return Parse(path, data)
}

// Parse parses and validates a spec. On failure the error is an ErrorList
// holding the problems found in file order, each with its file:line:col:
// the first MaxErrors of them, then, if there are more, one entry at the
// next one's position counting those not listed. Parse takes data of any
// size (its caller already holds it); ParseFile caps what it reads.
func Parse(file string, data []byte) (s *Spec, err error) {
	p := &parser{file: file}
	defer func() {
		// The YAML library is outside this package; never let a fault in it
		// escape as a panic.
		if r := recover(); r != nil {
			s, err = nil, ErrorList{{Pos{file, 1, 1}, fmt.Sprintf("cannot parse YAML: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, ErrorList{p.yamlError(data, err)}
	}
	// A second document would be silently ignored: reject it, and report a
	// syntax error after the first document too.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "spec: a second YAML document starts here; a spec file holds one document")
	} else if err != io.EOF {
		p.errs = append(p.errs, p.yamlError(data, err))
	}
	s = p.spec(&doc)
	if len(p.errs) > 0 {
		return nil, capErrors(p.errs.sorted())
	}
	return s, nil
}

// capErrors keeps the first MaxErrors of a sorted list and replaces the
// rest by one entry, at the first left-out error's position, saying how
// many there are.
func capErrors(l ErrorList) ErrorList {
	if len(l) <= MaxErrors {
		return l
	}
	more := &Error{l[MaxErrors].Pos, fmt.Sprintf("and %d more errors from here on, not listed (fix the ones above first)", len(l)-MaxErrors)}
	return append(l[:MaxErrors:MaxErrors], more)
}

type parser struct {
	file string
	errs ErrorList
	// nonCausal lists the masks that need causal: false (prefix_lm), by
	// position and field, checked once the causal flag is read.
	nonCausal []*Error
	// defaultCausal lists the masks that need causal written out
	// (neighborhood not causal along both axes): refused when causal is
	// left to its default.
	defaultCausal []*Error
	// heads are the declared head parameters; used marks those a mask
	// field names.
	heads    []HeadParam
	used     []bool
	badHeads map[string]bool // declared with errors
}

func (p *parser) pos(n *yaml.Node) Pos { return Pos{p.file, max(n.Line, 1), max(n.Column, 1)} }

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	p.errs = append(p.errs, &Error{p.pos(n), fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlError positions a syntax error. The YAML library reports only a line,
// and for parser (as opposed to scanner) errors that line is the 0-based line
// of the enclosing construct; so the line is found again as the one after the
// longest prefix of whole lines that is valid YAML, and the column is that
// line's first non-blank character. Past a parsing budget (large files) the
// library's line is kept.
func (p *parser) yamlError(data []byte, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 {
			line = n
		}
	}
	col := 1
	if l, ok := syntaxErrorLine(data); ok {
		line = l
		col = firstNonBlank(data, l)
	}
	return &Error{Pos{p.file, line, col}, "invalid YAML: " + msg}
}

// syntaxErrorBudget bounds the bytes syntaxErrorLine parses in all.
const syntaxErrorBudget = 256 << 10

// syntaxErrorLine returns 1 + the largest number of leading whole lines of
// data that parse as YAML, given that data as a whole does not.
func syntaxErrorLine(data []byte) (int, bool) {
	var starts []int // starts[k] is the offset of line k+2 (1-based)
	for k, c := range data {
		if c == '\n' && k+1 < len(data) {
			starts = append(starts, k+1)
		}
	}
	budget := syntaxErrorBudget
	for k := len(starts) - 1; k >= 0; k-- {
		budget -= starts[k]
		if budget < 0 {
			return 0, false
		}
		if validYAML(data[:starts[k]]) {
			return k + 2, true
		}
	}
	return 1, true
}

// validYAML reports whether every document in b parses.
func validYAML(b []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		switch err := dec.Decode(&n); err {
		case nil:
		case io.EOF:
			return true
		default:
			return false
		}
	}
}

// firstNonBlank is the column of the first character of line (1-based) that
// is not a space, or 1.
func firstNonBlank(data []byte, line int) int {
	off := 0
	for l := 1; l < line; l++ {
		k := bytes.IndexByte(data[off:], '\n')
		if k < 0 {
			return 1
		}
		off += k + 1
	}
	col := 1
	for off < len(data) && data[off] == ' ' {
		off++
		col++
	}
	if off >= len(data) || data[off] == '\n' || data[off] == '\r' {
		return 1
	}
	return col
}

// MaxHeadDim bounds head_dim in a spec; the targets a package is
// generated for decide which sizes actually run.
const MaxHeadDim = 1024

var topKeys = []string{"name", "mask", "causal", "head_dim", "page_size", "schedule", "masks", "head_params", "score"}

// MaxPageSize bounds page_size.
const MaxPageSize = 1 << 20

func (p *parser) spec(doc *yaml.Node) *Spec {
	s := &Spec{File: p.file, Causal: true, HeadDim: 128, HeadDimV: 128, Masks: map[string]*Mask{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errs = append(p.errs, &Error{Pos{p.file, 1, 1}, "empty spec: want a mapping with at least name and mask"})
		return nil
	}
	root := doc.Content[0]
	if !p.noAlias(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "spec: want a mapping with name, mask, ..., got %s", describe(root))
		return nil
	}
	fields := p.mapping(root, "spec", topKeys)
	if n := fields["name"]; n == nil {
		p.errorf(root, "spec: missing field name")
	} else if v, ok := p.str(n, "name"); ok {
		if err := checkPackageName(v); err != nil {
			p.errorf(n, "name: %v", err)
		}
		s.Name = v
	}
	if n := fields["head_params"]; n != nil {
		p.heads = p.headParams(n)
		p.used = make([]bool, len(p.heads))
		s.HeadParams = p.heads
	}
	var schedNode *yaml.Node
	defined := map[string]bool{} // names in masks, valid or not
	if n := fields["masks"]; n != nil {
		if n.Kind != yaml.MappingNode {
			p.errorf(n, "masks: want a mapping from name to mask, got %s", describe(n))
		} else {
			for k := 0; k+1 < len(n.Content); k += 2 {
				kn, vn := n.Content[k], n.Content[k+1]
				name, ok := p.str(kn, "masks key")
				if !ok {
					p.mask(vn, "masks entry", 0)
					continue
				}
				defined[name] = true
				switch {
				case name == "mask" || name == "full":
					p.errorf(kn, "masks: name %q is reserved for the schedule", clip(name))
				case !token.IsIdentifier(name):
					p.errorf(kn, "masks: name %q is not an identifier", clip(name))
				case s.Masks[name] != nil:
					p.errorf(kn, "masks: duplicate name %q", clip(name))
				}
				if m := p.mask(vn, "masks."+clip(name), 0); m != nil {
					p.checkSize(m, vn, "masks."+clip(name))
					p.checkDocument(m, "masks."+clip(name))
					if _, dup := s.Masks[name]; !dup {
						s.Masks[name] = m
					}
				}
			}
		}
	}
	if n := fields["mask"]; n == nil {
		p.errorf(root, "spec: missing field mask")
	} else if m := p.mask(n, "mask", 0); m != nil {
		p.checkSize(m, n, "mask")
		p.checkDocument(m, "mask")
		s.Mask = m
	}
	if n := fields["causal"]; n != nil {
		if v, ok := p.boolean(n, "causal"); ok {
			s.Causal = v
		}
	}
	if n := fields["score"]; n != nil {
		s.Score = p.score(n, s.Causal)
	}
	if n := fields["page_size"]; n != nil {
		if v, ok := p.integer(n, "page_size"); ok {
			if v < 1 || v > MaxPageSize {
				p.errorf(n, "page_size: %d is out of range (want 1 to %d key positions a page)", v, MaxPageSize)
			}
			s.PageSize = v
		}
	}
	if n := fields["head_dim"]; n != nil {
		s.HeadDim, s.HeadDimV = p.headDim(n)
		s.HeadDimPos = p.pos(n)
	}
	for k, hp := range p.heads {
		if !p.used[k] {
			p.errs = append(p.errs, &Error{hp.Pos, fmt.Sprintf("head_params.%s: declared but no mask field takes it", hp.Name)})
		}
	}
	if s.Causal {
		for _, e := range p.nonCausal {
			p.errs = append(p.errs, e)
		}
	}
	if fields["causal"] == nil {
		p.errs = append(p.errs, p.defaultCausal...)
	}
	if schedNode = fields["schedule"]; schedNode != nil {
		if schedNode.Kind != yaml.SequenceNode {
			p.errorf(schedNode, "schedule: want a list of layer entries, got %s", describe(schedNode))
		} else if len(schedNode.Content) == 0 {
			p.errorf(schedNode, "schedule: empty; omit it to analyse the mask alone")
		} else {
			for _, e := range schedNode.Content {
				v, ok := p.str(e, "schedule entry")
				if !ok {
					continue
				}
				if v != "mask" && v != "full" && !defined[v] {
					p.errorf(e, "schedule: unknown entry %q (want mask, full, or a name from masks)", clip(v))
					continue
				}
				s.Schedule = append(s.Schedule, ScheduleEntry{v, p.pos(e)})
			}
		}
	}
	return s
}

// maxNodeDepth bounds the YAML nesting walked before masks are parsed; a mask
// nested MaxDepth deep is about 2*MaxDepth levels of YAML.
const maxNodeDepth = 4*MaxDepth + 16

// noAlias rejects anchors' aliases anywhere in the tree (every one is
// reported): they would let a small file name an exponentially large mask.
// It also rejects YAML nested far deeper than any valid spec, once.
func (p *parser) noAlias(n *yaml.Node) bool {
	ok, depthErr := true, false
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n.Kind == yaml.AliasNode {
			p.errorf(n, "aliases (*%s) are not supported in specs; write the mask out", bare(n.Value))
			ok = false
			return
		}
		if depth > maxNodeDepth {
			p.errorf(n, "spec nested too deeply (more than %d levels of YAML)", maxNodeDepth)
			ok = false
			depthErr = true
			return
		}
		for _, c := range n.Content {
			if depthErr {
				return
			}
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return ok
}

// mapping checks a mapping's keys against the allowed ones and returns the
// value node of each key present. Unknown and duplicate keys are errors.
func (p *parser) mapping(n *yaml.Node, what string, allowed []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for k := 0; k+1 < len(n.Content); k += 2 {
		kn, vn := n.Content[k], n.Content[k+1]
		key, ok := p.str(kn, what+" key")
		if !ok {
			continue
		}
		if !contains(allowed, key) {
			if h := unknownHints[what+"."+key]; h != "" {
				p.errorf(kn, "%s: unknown key %q (%s)", what, clip(key), h)
				continue
			}
			p.errorf(kn, "%s: unknown key %q (want %s)", what, clip(key), strings.Join(allowed, ", "))
			continue
		}
		if out[key] != nil {
			p.errorf(kn, "%s: duplicate key %q", what, clip(key))
			continue
		}
		out[key] = vn
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, "%s: want a string, got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// integer reads a plain decimal integer with magnitude at most MaxInt (the
// caller checks the sign). Quoted numbers, floats, and the forms YAML
// libraries disagree on (0100 is 64 to YAML 1.1 and 100 to YAML 1.2; 0x10,
// 0o17, 1_000) are errors.
func (p *parser) integer(n *yaml.Node, what string) (int, bool) {
	// Digits too many even for a float resolve to a string; they are still
	// an integer that overflows.
	overflow := n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Style == 0 && decimalInt.MatchString(n.Value)
	if !overflow && (n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0) {
		p.errorf(n, "%s: want an integer, got %s", what, describe(n))
		return 0, false
	}
	if !decimalInt.MatchString(n.Value) {
		if n.Tag == "!!float" {
			p.errorf(n, "%s: want an integer, got %s", what, describe(n))
		} else {
			p.errorf(n, "%s: want a decimal integer without leading zeros or underscores, got %s", what, describe(n))
		}
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || v > MaxInt || v < -MaxInt {
		p.errorf(n, "%s: integer %s out of range (at most %d)", what, bare(n.Value), MaxInt)
		return 0, false
	}
	return int(v), true
}

// headDim reads head_dim: one size for q, k and v, or {qk: D1, v: D2}.
func (p *parser) headDim(n *yaml.Node) (qk, v int) {
	one := func(x *yaml.Node, what string) int {
		d, ok := p.integer(x, what)
		if !ok {
			return 128
		}
		if d < 1 || d > MaxHeadDim {
			p.errorf(x, "%s: %d is not supported (want 1 to %d; each target lists the sizes it runs)", what, d, MaxHeadDim)
			return 128
		}
		return d
	}
	if n.Kind != yaml.MappingNode {
		d := one(n, "head_dim")
		return d, d
	}
	f := p.mapping(n, "head_dim", []string{"qk", "v"})
	if f["qk"] == nil || f["v"] == nil {
		p.errorf(n, "head_dim: a mapping needs both qk (the size of q and k) and v (the size of v and the output)")
		return 128, 128
	}
	return one(f["qk"], "head_dim.qk"), one(f["v"], "head_dim.v")
}

var decimalInt = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		}
		// Plain scalars resolved to these tags are one word; an explicit
		// tag (!!int "a b") may hold anything.
		v := bare(n.Value)
		switch n.Tag {
		case "!!int":
			return "the integer " + v
		case "!!float":
			return "the number " + v
		case "!!bool":
			return "the boolean " + v
		}
		return fmt.Sprintf("%q tagged %q", clip(n.Value), clip(n.Tag))
	}
	return "an empty document"
}

// clip shortens a value quoted in a message.
func clip(v string) string {
	if len(v) > 40 {
		return v[:40] + "..."
	}
	return v
}

// bare is clip for a value written without quotes: quoted after all when it
// holds spaces or unprintable characters, so that a message stays one line.
func bare(v string) string {
	v = clip(v)
	if strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// checkPackageName accepts names usable as an importable Go package:
// lower-case letters, digits and underscores, starting with a letter, not a
// keyword, not main.
func checkPackageName(v string) error {
	if v == "" {
		return errors.New("empty; want a Go package name such as bridge")
	}
	for k, r := range v {
		ok := (r >= 'a' && r <= 'z') || (k > 0 && ((r >= '0' && r <= '9') || r == '_'))
		if !ok {
			return fmt.Errorf("%q is not a valid Go package name (lower-case letters, digits and _, starting with a letter)", clip(v))
		}
	}
	if token.IsKeyword(v) || v == "main" {
		return fmt.Errorf("%q cannot be a package name", clip(v))
	}
	return nil
}

// Mask kinds a spec may write, with their parameters.
var (
	primitives = []string{"full", "window", "block", "bridge", "dilated", "global", "document", "queries", "keys", "neighborhood", "tree"}
	combiners  = []string{"union", "intersect", "not"}
	shorthands = []string{"pbb", "se_bridge", "streaming", "strided", "prefix_lm", "chunked", "longformer", "bigbird"}
	allKinds   = append(append(append([]string{}, primitives...), combiners...), shorthands...)
)

// mask parses one mask node; nil after reporting errors.
func (p *parser) mask(n *yaml.Node, what string, depth int) *Mask {
	if depth >= MaxDepth {
		p.errorf(n, "%s: masks nested more than %d deep", what, MaxDepth)
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: want a mapping with one of %s, got %s", what, strings.Join(allKinds, ", "), describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		p.errorf(n, "%s: empty mapping; want one of %s", what, strings.Join(allKinds, ", "))
		return nil
	}
	if len(n.Content) > 2 {
		k1, ok1 := p.kindName(n.Content[0])
		k2, ok2 := p.kindName(n.Content[2])
		switch {
		case !ok1 || !ok2:
		case k1 == k2:
			p.errorf(n.Content[2], "%s: duplicate key %q", what, clip(k2))
		default:
			p.errorf(n.Content[2], "%s: two primitives in one map (%s and %s); combine them with union or intersect", what, clip(k1), clip(k2))
		}
		return nil
	}
	kind, ok := p.kindName(n.Content[0])
	if !ok {
		return nil
	}
	if !contains(allKinds, kind) {
		p.errorf(n.Content[0], "%s: unknown mask kind %q (want one of %s)", what, clip(kind), strings.Join(allKinds, ", "))
		return nil
	}
	v := n.Content[1]
	what = what + "." + kind
	pos := p.pos(n.Content[0])
	if kind == "not" {
		if v.Kind != yaml.MappingNode {
			p.errorf(v, "%s: want one mask (a mapping), got %s", what, describe(v))
			return nil
		}
		a := p.mask(v, what, depth+1)
		if a == nil {
			return nil
		}
		return &Mask{Op: OpNot, Args: []*Mask{a}, Pos: pos}
	}
	if kind == "union" || kind == "intersect" {
		if v.Kind != yaml.SequenceNode {
			p.errorf(v, "%s: want a list of masks, got %s", what, describe(v))
			return nil
		}
		if len(v.Content) == 0 {
			p.errorf(v, "%s: empty %s", what, kind)
			return nil
		}
		m := &Mask{Op: OpUnion, Pos: pos}
		if kind == "intersect" {
			m.Op = OpIntersect
		}
		bad := false
		for k, c := range v.Content {
			a := p.mask(c, fmt.Sprintf("%s[%d]", what, k), depth+1)
			bad = bad || a == nil
			m.Args = append(m.Args, a)
		}
		if bad {
			return nil
		}
		return m
	}
	pr := params{p: p, what: what}
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		pr.node = v
	case v.Kind != yaml.MappingNode:
		p.errorf(v, "%s: want a mapping of parameters, got %s", what, describe(v))
		return nil
	default:
		pr.node = v
	}
	m := p.primitive(kind, &pr, pos)
	if m == nil || pr.failed {
		return nil
	}
	return m
}

func (p *parser) kindName(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, "mask kind: want a name, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// params reads the parameter mapping of one primitive or shorthand.
type params struct {
	p      *parser
	what   string
	node   *yaml.Node
	fields map[string]*yaml.Node
	failed bool
}

func (pr *params) allow(keys ...string) {
	if len(keys) == 0 && pr.node.Kind == yaml.MappingNode && len(pr.node.Content) > 0 {
		pr.p.errorf(pr.node.Content[0], "%s: takes no parameters; write {}", pr.what)
		pr.failed = true
		pr.fields = map[string]*yaml.Node{}
		return
	}
	if pr.node.Kind == yaml.MappingNode {
		n := len(pr.p.errs)
		pr.fields = pr.p.mapping(pr.node, pr.what, keys)
		pr.failed = pr.failed || len(pr.p.errs) > n
	} else {
		pr.fields = map[string]*yaml.Node{}
	}
}

func (pr *params) has(key string) bool { return pr.fields[key] != nil }

// get reads a required (required=true) or optional integer in [lo, hi].
func (pr *params) get(key string, required bool, lo, hi int, hiWhy string) int {
	n := pr.fields[key]
	if n == nil {
		if required {
			pr.p.errorf(pr.node, "%s: missing parameter %s", pr.what, key)
			pr.failed = true
		}
		return 0
	}
	v, ok := pr.p.integer(n, pr.what+"."+key)
	if !ok {
		pr.failed = true
		return 0
	}
	if v < lo {
		pr.p.errorf(n, "%s.%s: %d is out of range (at least %d)", pr.what, key, v, lo)
		pr.failed = true
	} else if v > hi {
		pr.p.errorf(n, "%s.%s: %d is out of range (at most %s)", pr.what, key, v, hiWhy)
		pr.failed = true
	}
	return v
}

func maxStr() string { return strconv.Itoa(MaxInt) }

func (p *parser) primitive(kind string, pr *params, pos Pos) *Mask {
	m := &Mask{Pos: pos}
	switch kind {
	case "full", "document", "tree":
		pr.allow()
		m.Op = OpFull
		switch kind {
		case "document":
			m.Op = OpDocument
		case "tree":
			m.Op = OpTree
		}
	case "window":
		pr.allow("size", "left", "right")
		m.Op = OpWindow
		switch {
		case pr.has("size") && (pr.has("left") || pr.has("right")):
			p.errorf(pr.node, "%s: give size (causal window) or left and right, not both", pr.what)
			pr.failed = true
		case pr.has("size"):
			var size int
			size, m.LeftRef = pr.getRef("size", true, 1, 1, MaxInt, maxStr())
			m.Left = size - 1
			if m.LeftRef.Set() {
				m.LeftRef.Add = -1
			}
		case pr.has("left") || pr.has("right"):
			// left+1 is the size String writes for right = 0.
			m.Left, m.LeftRef = pr.getRef("left", true, 0, 0, MaxInt-1, strconv.Itoa(MaxInt-1))
			m.Right, m.RightRef = pr.getRef("right", true, 0, 0, MaxInt, maxStr())
		default:
			p.errorf(pr.node, "%s: missing parameter size (or left and right)", pr.what)
			pr.failed = true
		}
	case "block":
		pr.allow("size", "offset")
		m.Op, m.Size = OpBlock, pr.get("size", true, 1, MaxInt, maxStr())
		m.Offset = pr.get("offset", false, 0, MaxInt, maxStr())
	case "bridge":
		pr.allow("block", "targets", "sources", "max_distance")
		m.Op = OpBridge
		m.Block = pr.get("block", true, 1, MaxInt, maxStr())
		lim, why := MaxInt, maxStr()
		if m.Block > 0 {
			lim, why = m.Block, fmt.Sprintf("block = %d", m.Block)
		}
		m.Targets = pr.get("targets", true, 1, lim, why)
		m.Sources = pr.get("sources", true, 1, lim, why)
		m.MaxDistance = pr.get("max_distance", false, 1, MaxInt, maxStr())
	case "dilated":
		pr.allow("stride", "size", "phase")
		m.Op = OpDilated
		m.Stride = pr.get("stride", true, 1, MaxInt, maxStr())
		m.Size = pr.get("size", false, 1, MaxInt, maxStr())
		if pr.has("phase") {
			// the absolute form: keys at positions phase mod stride, for
			// every query; that is a keys set
			if pr.has("size") {
				p.errorf(pr.fields["phase"], "%s: give size (taps counted back from the query) or phase (keys at fixed positions), not both; intersect an absolute phase with a window to bound it", pr.what)
				pr.failed = true
			}
			hi := max(m.Stride-1, 0)
			ph := pr.get("phase", false, 0, hi, fmt.Sprintf("stride - 1 = %d", hi))
			m = &Mask{Op: OpKeys, Stride: max(m.Stride, 1), Phase: ph, Pos: pos, From: "dilated"}
		}
	case "global":
		pr.allow(append(globalKeys, "rows")...)
		if pr.has("tokens") && len(pr.fields) == 1 {
			// the attention sinks of the first form; a head parameter may
			// be 0 (no sinks at that head)
			m.Op = OpGlobal
			m.Tokens, m.TokensRef = pr.getRef("tokens", true, 1, 0, MaxInt, maxStr())
			break
		}
		rows, ok := false, true
		if n := pr.fields["rows"]; n != nil {
			rows, ok = p.boolean(n, pr.what+".rows")
			pr.failed = pr.failed || !ok
		}
		cols := p.globalSet(pr)
		if pr.failed {
			return nil
		}
		if !rows && len(cols) == 1 {
			m = cols[0]
		} else {
			m = Union(cols...)
			if rows {
				m.Args = append(m.Args, rowsOf(cols)...)
			}
		}
		m.Pos, m.From = pos, "global"
		for _, a := range m.Args {
			a.From = "global"
		}
	case "longformer":
		pr.allow(append(globalKeys, "window")...)
		w := pr.get("window", true, 2, MaxInt-1, strconv.Itoa(MaxInt-1))
		if !pr.failed && w%2 != 0 {
			p.errorf(pr.fields["window"], "%s.window: %d is odd; Longformer's attention_window is even (w/2 keys on each side)", pr.what, w)
			pr.failed = true
		}
		var cols []*Mask
		if len(pr.fields) > 1 {
			cols = p.globalSet(pr)
		}
		m = Union(&Mask{Op: OpWindow, Left: w / 2, Right: w / 2, Pos: pos})
		m.Args = append(append(m.Args, cols...), rowsOf(cols)...)
	case "bigbird":
		pr.allow("block", "blocks", "window", "global", "random", "seed")
		bb := BigBird{Window: 3, Global: 1}
		bb.Block = pr.get("block", true, 1, MaxInt, maxStr())
		bb.Blocks = pr.get("blocks", true, 1, MaxInt, maxStr())
		if pr.has("window") {
			bb.Window = pr.get("window", true, 1, MaxInt, maxStr())
			if !pr.failed && bb.Window%2 == 0 {
				p.errorf(pr.fields["window"], "%s.window: %d is even; the window is the query's block and as many on each side (BigBird's is 3)", pr.what, bb.Window)
				pr.failed = true
			}
			if !pr.failed && bb.Window/2+1 > MaxPrimitives {
				// checked before the expansion builds them
				p.errorf(pr.fields["window"], "%s.window: %d expands to window/2 + 1 = %d blocks, more than the %d primitives a mask may hold", pr.what, bb.Window, bb.Window/2+1, MaxPrimitives)
				pr.failed = true
			}
		}
		if pr.has("global") {
			hi := max(bb.Blocks/2, 0)
			bb.Global = pr.get("global", true, 0, hi, fmt.Sprintf("blocks/2 = %d: the first and the last global blocks", hi))
		}
		bb.Random = pr.get("random", true, 0, MaxInt, maxStr())
		seedWhy := "2^31-1"
		if bb.Random > 0 {
			bb.Seed = uint64(pr.get("seed", true, 0, MaxInt, seedWhy))
		} else if pr.has("seed") {
			bb.Seed = uint64(pr.get("seed", false, 0, MaxInt, seedWhy))
		}
		if !pr.failed && bb.Block > MaxInt/bb.Blocks {
			p.errorf(pr.node, "%s: block %d x blocks %d positions exceed %d", pr.what, bb.Block, bb.Blocks, MaxInt)
			pr.failed = true
		}
		if !pr.failed && (bb.Blocks-2*bb.Global)*min(bb.Random, bb.Blocks) > MaxRandomBlocks {
			p.errorf(pr.fields["random"], "%s.random: %d random blocks for each of %d query blocks, more than %d in all (each is a comparison in every kernel)", pr.what, bb.Random, bb.Blocks-2*bb.Global, MaxRandomBlocks)
			pr.failed = true
		}
		if pr.failed {
			return nil
		}
		m = bb.Mask()
	case "queries", "keys":
		pr.allow("from", "below", "stride", "phase")
		m.Op = OpQueries
		if kind == "keys" {
			m.Op = OpKeys
		}
		m.Lo = pr.get("from", false, 0, MaxInt, maxStr())
		m.Below = pr.get("below", false, 1, MaxInt, maxStr())
		m.Stride = max(pr.get("stride", false, 1, MaxInt, maxStr()), 1)
		if pr.has("phase") && !pr.has("stride") {
			p.errorf(pr.fields["phase"], "%s.phase: needs stride (the positions p with p mod stride == phase)", pr.what)
			pr.failed = true
		} else {
			m.Phase = pr.get("phase", false, 0, m.Stride-1, fmt.Sprintf("stride - 1 = %d", m.Stride-1))
		}
		if !pr.failed && m.Below > 0 {
			if first, _ := setRange(m, 0, m.Below-1); first >= m.Below {
				at := pr.fields["below"]
				if m.Lo < m.Below {
					p.errorf(at, "%s.below: no position in [from, below) = [%d, %d) has p mod %d == %d; the mask keeps nothing", pr.what, m.Lo, m.Below, m.Stride, m.Phase)
				} else {
					p.errorf(at, "%s.below: %d must exceed from = %d; the mask keeps nothing", pr.what, m.Below, m.Lo)
				}
				pr.failed = true
			}
		}
	case "neighborhood":
		m = p.neighborhood(pr, pos)
		if m == nil {
			return nil
		}
	case "prefix_lm":
		pr.allow("prefix")
		n := pr.get("prefix", true, 1, MaxInt, maxStr())
		m = Union(&Mask{Op: OpKeys, Below: n, Stride: 1, Pos: pos}, &Mask{Op: OpWindow, Left: MaxInt - 1, Pos: pos})
		p.nonCausal = append(p.nonCausal, &Error{pos, pr.what + ": is bidirectional over the prefix, so it needs causal: false (its causal part after the prefix is built in); under causal: true it is plain causal attention"})
	case "chunked":
		pr.allow("size", "offset")
		c := pr.get("size", true, 1, MaxInt, maxStr())
		o := pr.get("offset", false, 0, MaxInt, maxStr())
		m = Intersect(&Mask{Op: OpBlock, Size: c, Offset: o, Pos: pos}, &Mask{Op: OpWindow, Left: MaxInt - 1, Pos: pos})
	case "pbb", "se_bridge":
		keys := []string{"block", "width"}
		if kind == "se_bridge" {
			keys = append(keys, "sources")
		}
		pr.allow(keys...)
		b := pr.get("block", true, 1, MaxInt, maxStr())
		lim, why := MaxInt, maxStr()
		if b > 0 {
			lim, why = b, fmt.Sprintf("block = %d", b)
		}
		r := pr.get("width", true, 1, lim, why)
		s := r
		if kind == "se_bridge" {
			s = pr.get("sources", true, 1, lim, why)
			if !pr.failed && s <= r {
				p.errorf(pr.fields["sources"], "%s.sources: %d must exceed width %d (use pbb for sources = width)", pr.what, s, r)
				pr.failed = true
			}
		}
		m = Union(&Mask{Op: OpBlock, Size: b, Pos: pos}, &Mask{Op: OpBridge, Block: b, Targets: r, Sources: s, Pos: pos})
	case "streaming":
		pr.allow("sinks", "window")
		g, gr := pr.getRef("sinks", true, 1, 0, MaxInt, maxStr())
		w, wr := pr.getRef("window", true, 1, 1, MaxInt, maxStr())
		if wr.Set() {
			wr.Add = -1
		}
		m = Union(&Mask{Op: OpGlobal, Tokens: g, TokensRef: gr, Pos: pos}, &Mask{Op: OpWindow, Left: w - 1, LeftRef: wr, Pos: pos})
	case "strided":
		pr.allow("stride")
		l := pr.get("stride", true, 1, MaxInt, maxStr())
		m = Union(&Mask{Op: OpWindow, Left: l - 1, Pos: pos}, &Mask{Op: OpDilated, Stride: l, Pos: pos})
	default:
		panic("BUG: kind " + kind + " listed but not parsed")
	}
	if contains(shorthands, kind) {
		m.Pos, m.From = pos, kind
		for _, a := range m.Args {
			a.From = kind
		}
	}
	return m
}

// MaxGrid bounds the cells of a neighborhood's grid (H*W), so that every
// position, and a grid row past the last, stays below 2^31 in kernels.
const MaxGrid = 1 << 30

// neighborhood reads a neighborhood mask: grid [H, W] (required), kernel
// [kh, kw] (required), dilation [dh, dw] (default 1), causal [ch, cw]
// (default false); kernel, dilation and causal may also be one value for
// both axes. Along each axis the kernel is at least 1 and odd unless the
// axis is causal, and kernel*dilation is at most the grid's extent.
func (p *parser) neighborhood(pr *params, pos Pos) *Mask {
	pr.allow("grid", "kernel", "dilation", "causal")
	m := &Mask{Op: OpNeighborhood, Pos: pos, Dilation: [2]int{1, 1}}
	axisName := [2]string{"rows", "columns"}
	// pair reads a field as [rows, columns] (or one value for both
	// axes when one is allowed): read parses one element for axis a, or
	// for both when a is -1.
	pair := func(key string, one bool, read func(n *yaml.Node, what string, a int) bool) bool {
		n := pr.fields[key]
		what := pr.what + "." + key
		switch {
		case n == nil:
			p.errorf(pr.node, "%s: missing parameter %s", pr.what, key)
		case n.Kind == yaml.SequenceNode && len(n.Content) == 2:
			ok0 := read(n.Content[0], what+"[0]", 0)
			ok1 := read(n.Content[1], what+"[1]", 1)
			return ok0 && ok1
		case n.Kind == yaml.ScalarNode && one:
			return read(n, what, -1)
		case one:
			p.errorf(n, "%s: want [rows, columns] or one value for both, got %s", what, describe(n))
		default:
			p.errorf(n, "%s: want [rows, columns], got %s", what, describe(n))
		}
		return false
	}
	ints := func(dst *[2]int) func(n *yaml.Node, what string, a int) bool {
		return func(n *yaml.Node, what string, a int) bool {
			v, ok := p.integer(n, what)
			if ok && (v < 1 || v > MaxGrid) {
				p.errorf(n, "%s: %d is out of range (want 1 to %d)", what, v, MaxGrid)
				ok = false
			}
			if a < 0 {
				dst[0], dst[1] = v, v
			} else {
				dst[a] = v
			}
			return ok
		}
	}
	ok := pair("grid", false, ints(&m.Grid))
	if pr.has("causal") {
		ok = pair("causal", true, func(n *yaml.Node, what string, a int) bool {
			v, good := p.boolean(n, what)
			if a < 0 {
				m.AxisCausal = [2]bool{v, v}
			} else {
				m.AxisCausal[a] = v
			}
			return good
		}) && ok
	}
	okK := pair("kernel", true, ints(&m.Kernel))
	okD := true
	if pr.has("dilation") {
		okD = pair("dilation", true, ints(&m.Dilation))
	}
	ok = ok && okK && okD
	if ok && m.Grid[0]*m.Grid[1] > MaxGrid {
		p.errorf(pr.fields["grid"], "%s.grid: %d x %d = %d cells, at most %d", pr.what, m.Grid[0], m.Grid[1], m.Grid[0]*m.Grid[1], MaxGrid)
		ok = false
	}
	if ok {
		for a := range 2 {
			at := func(key string) *yaml.Node {
				n := pr.fields[key]
				if n.Kind == yaml.SequenceNode {
					return n.Content[a]
				}
				return n
			}
			what := fmt.Sprintf("%s.kernel[%d]", pr.what, a)
			switch {
			case m.Kernel[a]%2 == 0 && !m.AxisCausal[a]:
				p.errorf(at("kernel"), "%s: %d is even; along a non-causal axis (%s) the kernel is centred on the query, so it is odd (NATTEN's kernel_size)", what, m.Kernel[a], axisName[a])
				ok = false
			case m.Kernel[a]*m.Dilation[a] > m.Grid[a]:
				n := at("kernel")
				if pr.has("dilation") {
					n = at("dilation")
				}
				p.errorf(n, "%s: kernel %d x dilation %d = %d exceeds the grid's %d %s (NATTEN needs kernel*dilation <= extent)", what, m.Kernel[a], m.Dilation[a], m.Kernel[a]*m.Dilation[a], m.Grid[a], axisName[a])
				ok = false
			}
		}
	}
	if !ok {
		pr.failed = true
		return nil
	}
	if !m.bothCausal() {
		p.defaultCausal = append(p.defaultCausal, &Error{pos, pr.what + ": is not causal along both axes, so it keeps keys after the query in sequence order, and causal defaults to true: write causal: false for NATTEN's neighbourhood (its causal axes are built in), or causal: true to cut it at the diagonal of the flattened sequence"})
	}
	return m
}

// globalKeys are the parameters of a set of global positions.
var globalKeys = []string{"tokens", "positions", "ranges", "stride", "phase"}

// MaxGlobalRuns bounds the positions and ranges one global (or
// longformer) lists: each run is a comparison in every kernel.
const MaxGlobalRuns = 256

// globalSet reads the global positions of pr (tokens, positions, ranges,
// stride with phase) as key sets: global tokens for a prefix, one keys
// node per run of listed positions and ranges (merged when they touch),
// one strided keys node. At least one parameter is required.
func (p *parser) globalSet(pr *params) []*Mask {
	pos := p.pos(pr.node)
	if pr.node.Kind == yaml.MappingNode && len(pr.node.Content) > 0 {
		pos = p.pos(pr.node.Content[0])
	}
	var out []*Mask
	if pr.has("tokens") {
		out = append(out, &Mask{Op: OpGlobal, Tokens: pr.get("tokens", true, 1, MaxInt, maxStr()), Pos: pos})
	}
	var runs [][2]int // [from, below)
	if n := pr.fields["positions"]; n != nil {
		if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
			p.errorf(n, "%s.positions: want a non-empty list of positions, got %s", pr.what, describe(n))
			pr.failed = true
		} else {
			for k, e := range n.Content {
				what := fmt.Sprintf("%s.positions[%d]", pr.what, k)
				v, ok := p.integer(e, what)
				switch {
				case !ok:
					pr.failed = true
				case v < 0 || v > MaxInt-1:
					p.errorf(e, "%s: %d is out of range (want 0 to %d)", what, v, MaxInt-1)
					pr.failed = true
				default:
					runs = append(runs, [2]int{v, v + 1})
				}
			}
		}
	}
	if n := pr.fields["ranges"]; n != nil {
		if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
			p.errorf(n, "%s.ranges: want a non-empty list of {from, below}, got %s", pr.what, describe(n))
			pr.failed = true
		} else {
			for k, e := range n.Content {
				what := fmt.Sprintf("%s.ranges[%d]", pr.what, k)
				if e.Kind != yaml.MappingNode {
					p.errorf(e, "%s: want a mapping {from, below}, got %s", what, describe(e))
					pr.failed = true
					continue
				}
				r := params{p: p, what: what, node: e}
				r.allow("from", "below")
				from := r.get("from", true, 0, MaxInt-1, strconv.Itoa(MaxInt-1))
				below := r.get("below", true, 1, MaxInt, maxStr())
				if !r.failed && below <= from {
					p.errorf(r.fields["below"], "%s.below: %d must exceed from = %d", what, below, from)
					r.failed = true
				}
				pr.failed = pr.failed || r.failed
				if !r.failed {
					runs = append(runs, [2]int{from, below})
				}
			}
		}
	}
	if len(runs) > MaxGlobalRuns {
		p.errorf(pr.node, "%s: %d positions and ranges, at most %d (write long runs as ranges, regular ones with stride)", pr.what, len(runs), MaxGlobalRuns)
		pr.failed = true
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a][0] < runs[b][0] })
	for k, r := range runs {
		if k > 0 && r[0] <= out[len(out)-1].Below && out[len(out)-1].Op == OpKeys && out[len(out)-1].Stride == 1 {
			last := out[len(out)-1]
			last.Below = max(last.Below, r[1])
			continue
		}
		out = append(out, &Mask{Op: OpKeys, Lo: r[0], Below: r[1], Stride: 1, Pos: pos})
	}
	if pr.has("stride") {
		st := pr.get("stride", true, 1, MaxInt, maxStr())
		hi := max(st-1, 0)
		ph := pr.get("phase", false, 0, hi, fmt.Sprintf("stride - 1 = %d", hi))
		out = append(out, &Mask{Op: OpKeys, Stride: max(st, 1), Phase: ph, Pos: pos})
	} else if pr.has("phase") {
		p.errorf(pr.fields["phase"], "%s.phase: needs stride (the positions p with p mod stride == phase)", pr.what)
		pr.failed = true
	}
	if len(out) == 0 && !pr.failed {
		p.errorf(pr.node, "%s: no global positions: give tokens, positions, ranges or stride", pr.what)
		pr.failed = true
	}
	return out
}

// rowsOf is the same sets as global rows: queries in place of keys.
func rowsOf(cols []*Mask) []*Mask {
	out := make([]*Mask, len(cols))
	for k, c := range cols {
		r := *c
		r.Op = OpQueries
		if c.Op == OpGlobal {
			r = Mask{Op: OpQueries, Below: c.Tokens, Stride: 1, Pos: c.Pos}
		}
		out[k] = &r
	}
	return out
}

// boolean reads a YAML 1.2 boolean (true, True, TRUE, false, False,
// FALSE): yes, no, on and off are strings (and an explicit !!bool tag does
// not make them booleans).
func (p *parser) boolean(n *yaml.Node, what string) (bool, bool) {
	switch v := n.Value; {
	case n.Kind != yaml.ScalarNode || n.Tag != "!!bool":
		p.errorf(n, "%s: want true or false, got %s", what, describe(n))
	case v == "true" || v == "True" || v == "TRUE":
		return true, true
	case v == "false" || v == "False" || v == "FALSE":
		return false, true
	default:
		p.errorf(n, "%s: want true or false, got %q", what, clip(v))
	}
	return false, false
}

// checkSize refuses a mask (written at n) of more than MaxPrimitives
// primitives, naming where the first one past the limit was written.
func (p *parser) checkSize(m *Mask, n *yaml.Node, what string) {
	count := m.Primitives()
	if count <= MaxPrimitives {
		return
	}
	var first Pos // of primitive MaxPrimitives+1, in tree order
	seen := 0
	var walk func(m *Mask)
	walk = func(m *Mask) {
		if len(m.Args) == 0 {
			if seen++; seen == MaxPrimitives+1 {
				first = m.Pos
			}
			return
		}
		for _, a := range m.Args {
			walk(a)
		}
	}
	walk(m)
	where := ""
	if first.Line > 0 {
		where = fmt.Sprintf("; primitive %d is at line %d, column %d", MaxPrimitives+1, first.Line, first.Col)
	}
	p.errorf(n, "%s: %d primitives (shorthands expanded), at most %d%s: each is code in every kernel and work in every tile (write runs of positions as one keys or global range, regular ones with a stride)", what, count, MaxPrimitives, where)
}

// checkDocument enforces where document may stand: as the whole mask or as a
// direct operand of the top-level intersect, so that every kept pair lies in
// one document and document-local positions are well defined.
func (p *parser) checkDocument(m *Mask, what string) {
	var walk func(m *Mask, allowed bool)
	walk = func(m *Mask, allowed bool) {
		if m.Op == OpDocument && !allowed {
			p.errs = append(p.errs, &Error{m.Pos, what + ": document may only be the whole mask or an operand of the top-level intersect"})
		}
		for _, a := range m.Args {
			walk(a, false)
		}
	}
	if m.HasDocument() && m.HasTree() {
		var first func(m *Mask) *Mask
		first = func(m *Mask) *Mask {
			if m.Op == OpTree {
				return m
			}
			for _, a := range m.Args {
				if t := first(a); t != nil {
					return t
				}
			}
			return nil
		}
		p.errs = append(p.errs, &Error{first(m).Pos, what + ": tree and document cannot be combined in one mask (a forest of parent arrays, with -1 at each root, packs sequences)"})
	}
	if m.Op == OpIntersect {
		for _, a := range m.Args {
			walk(a, true)
		}
		return
	}
	walk(m, true)
}

// CheckPackageName reports whether v can name a generated package (the rule
// the spec's name field follows).
func CheckPackageName(v string) error { return checkPackageName(v) }
