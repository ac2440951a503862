package spec

import (
	"fmt"
	"go/token"
	"strings"
	"unicode"

	"github.com/attngen/attngen/runtime/mask"
	"go.yaml.in/yaml/v3"
)

// HeadParam is a run-time integer of a mask: one value per query head,
// given to the kernels at call time (a generated package's HeadParams
// argument), declared in a spec under head_params with the range its
// values may take. Window sizes and sink counts that differ between heads
// are head parameters.
type HeadParam struct {
	Name     string
	Min, Max int
	Pos      Pos
}

// Ref ties a mask field to a head parameter: the field's value at head h
// is the parameter's value at h plus Add. The zero Ref is no parameter:
// the field is the constant written in the spec.
type Ref struct {
	Param int    // 1 + the parameter's index in the pattern's Params; 0: none
	Name  string // the parameter's name, for printing
	Add   int
}

// Set reports whether the field is a head parameter.
func (r Ref) Set() bool { return r.Param > 0 }

// MaxHeadParams bounds the head parameters of a spec.
const MaxHeadParams = mask.MaxHeadParams

// An unbound pattern (one whose mask has Refs) evaluates every field at its
// parameter's Max: At, Keys, Classify and the other exact functions then
// describe that instance. Bind gives the pattern of one head.

// HasParams reports whether the pattern's mask takes head parameters.
func (p Pattern) HasParams() bool { return len(p.Params) > 0 }

// Bind returns the pattern with every head parameter replaced by its value
// (vals[k] for Params[k]): the mask of the heads with these values, with
// no parameters left. A value outside its parameter's [Min, Max] is an
// error naming the parameter.
func (p Pattern) Bind(vals []int) (Pattern, error) {
	if len(vals) != len(p.Params) {
		return p, fmt.Errorf("%d head parameter values for %d parameters", len(vals), len(p.Params))
	}
	for k, hp := range p.Params {
		if vals[k] < hp.Min || vals[k] > hp.Max {
			return p, fmt.Errorf("head parameter %s = %d is out of its range [%d, %d]", hp.Name, vals[k], hp.Min, hp.Max)
		}
	}
	if len(vals) == 0 {
		return p, nil
	}
	q := p
	q.Params = nil
	q.Mask = p.Mask.bind(vals)
	return q, nil
}

// MaxBound returns the values that make Bind give the pattern's own
// (unbound) instance: every parameter at its Max.
func (p Pattern) MaxBound() []int {
	v := make([]int, len(p.Params))
	for k, hp := range p.Params {
		v[k] = hp.Max
	}
	return v
}

// bind copies the tree with the Refs replaced by values.
func (m *Mask) bind(vals []int) *Mask {
	c := *m
	val := func(r Ref, v *int) {
		if r.Set() {
			*v = vals[r.Param-1] + r.Add
		}
	}
	val(m.LeftRef, &c.Left)
	val(m.RightRef, &c.Right)
	val(m.TokensRef, &c.Tokens)
	c.LeftRef, c.RightRef, c.TokensRef = Ref{}, Ref{}, Ref{}
	if len(m.Args) > 0 {
		c.Args = make([]*Mask, len(m.Args))
		for k, a := range m.Args {
			c.Args[k] = a.bind(vals)
		}
	}
	return &c
}

// HasRefs reports whether any node of the mask takes a head parameter.
func (m *Mask) HasRefs() bool {
	if m.LeftRef.Set() || m.RightRef.Set() || m.TokensRef.Set() {
		return true
	}
	for _, a := range m.Args {
		if a.HasRefs() {
			return true
		}
	}
	return false
}

// headParams parses the head_params section: a mapping from a name to its
// range, {min: A, max: B}.
func (p *parser) headParams(n *yaml.Node) []HeadParam {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "head_params: want a mapping from a name to {min, max}, got %s", describe(n))
		return nil
	}
	var out []HeadParam
	p.badHeads = map[string]bool{}
	for k := 0; k+1 < len(n.Content); k += 2 {
		kn, vn := n.Content[k], n.Content[k+1]
		name, ok := p.str(kn, "head_params key")
		if !ok {
			continue
		}
		what := "head_params." + clip(name)
		switch {
		case !token.IsIdentifier(name) || !unicode.IsLetter(rune(name[0])) || name[0] >= 0x80:
			p.errorf(kn, "head_params: name %q is not an identifier starting with a letter", clip(name))
			continue
		case len(out) == MaxHeadParams:
			p.errorf(kn, "head_params: more than %d parameters", MaxHeadParams)
			return out
		}
		dup := false
		for _, o := range out {
			dup = dup || strings.EqualFold(o.Name, name)
		}
		if dup {
			p.errorf(kn, "head_params: duplicate name %q (names are compared ignoring case: each becomes an exported field)", clip(name))
			continue
		}
		// a declaration with errors still declares its name: fields that
		// name it get no error of their own
		p.badHeads[name] = true
		if vn.Kind != yaml.MappingNode {
			p.errorf(vn, "%s: want {min: A, max: B}, got %s", what, describe(vn))
			continue
		}
		pr := params{p: p, what: what, node: vn}
		pr.allow("min", "max")
		lo := pr.get("min", true, 0, MaxInt, maxStr())
		hi := pr.get("max", true, 0, MaxInt, maxStr())
		if pr.failed {
			continue
		}
		if lo > hi {
			p.errorf(vn, "%s: min %d exceeds max %d", what, lo, hi)
			continue
		}
		delete(p.badHeads, name)
		out = append(out, HeadParam{Name: name, Min: lo, Max: hi, Pos: p.pos(kn)})
	}
	if len(out) == 0 && len(n.Content) == 0 {
		p.errorf(n, "head_params: empty; omit it when no mask field varies by head")
	}
	return out
}

// getRef reads a field that may name a head parameter: an integer in
// [lo, hi] as get reads it, or the name of a parameter whose values all
// lie in [refLo, hi] (sinks may be 0 at some heads, never all). The value
// returned for a parameter is its Max (the unbound pattern's instance).
func (pr *params) getRef(key string, required bool, lo, refLo, hi int, hiWhy string) (int, Ref) {
	n := pr.fields[key]
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || decimalInt.MatchString(n.Value) {
		return pr.get(key, required, lo, hi, hiWhy), Ref{}
	}
	p := pr.p
	for k, hp := range p.heads {
		if hp.Name != n.Value {
			continue
		}
		p.used[k] = true
		if hp.Min < refLo {
			p.errorf(n, "%s.%s: head parameter %s may be %d (its min), want at least %d", pr.what, key, hp.Name, hp.Min, refLo)
			pr.failed = true
		} else if hp.Max > hi {
			p.errorf(n, "%s.%s: head parameter %s may be %d (its max), want at most %s", pr.what, key, hp.Name, hp.Max, hiWhy)
			pr.failed = true
		}
		return hp.Max, Ref{Param: k + 1, Name: hp.Name}
	}
	switch {
	case p.badHeads[n.Value]:
		// its declaration's error says what is wrong
	case len(p.heads) == 0:
		p.errorf(n, "%s.%s: want an integer or a head parameter, got %s (no head_params are declared)", pr.what, key, describe(n))
	default:
		p.errorf(n, "%s.%s: want an integer or a head parameter (%s), got %s", pr.what, key, p.headNames(), describe(n))
	}
	pr.failed = true
	return 0, Ref{}
}

func (p *parser) headNames() string {
	var names []string
	for _, hp := range p.heads {
		names = append(names, hp.Name)
	}
	return strings.Join(names, ", ")
}

// HeadParamsYAML renders declarations as a spec's head_params section
// (one line, ending in a newline), which the parser reads back to the same
// parameters; "" for none.
func HeadParamsYAML(params []HeadParam) string {
	if len(params) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("head_params: {")
	for k, hp := range params {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: {min: %d, max: %d}", hp.Name, hp.Min, hp.Max)
	}
	b.WriteString("}\n")
	return b.String()
}

// field prints a field that may be a head parameter: its name, or the
// constant v.
func field(v int, r Ref) string {
	if r.Set() {
		return r.Name
	}
	return fmt.Sprint(v)
}
