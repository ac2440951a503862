package gen

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// namedProg is one program of a plan, by the name its text carries.
type namedProg struct {
	name string
	prog *Prog
	ptr  **Prog
}

// Programs lists the plan's programs in the order Text prints them.
func (p *Plan) Programs() []namedProg {
	return []namedProg{{"pred", p.Pred, &p.Pred}, {"hull", p.Hull, &p.Hull}, {"qhull", p.QHull, &p.QHull}, {"class", p.Class, &p.Class}, {"word", p.Word, &p.Word}}
}

// Dump is a plan with the schedule of one call, as printed by Text and read
// back by ParseText.
type Dump struct {
	Plan  *Plan
	Stats Stats
	// First lists the visited key tiles of the first query tiles of the
	// first segment.
	First [][]TileRef
}

// Text prints the plan and the schedule of a call with sq queries and sk
// keys: counts of tiles by class and the key tiles of the first `first`
// query tiles of the first segment. ParseText reads it back.
func (p *Plan) Text(sq, sk, first int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s\n", p.Name)
	fmt.Fprintf(&b, "target %s\n", p.Target)
	if p.HeadDimV != 0 && p.HeadDimV != p.HeadDim {
		fmt.Fprintf(&b, "head_dim %d %d\n", p.HeadDim, p.HeadDimV)
	} else {
		fmt.Fprintf(&b, "head_dim %d\n", p.HeadDim)
	}
	fmt.Fprintf(&b, "tiles %d %d\n", p.TileQ, p.TileK)
	for _, hp := range p.Source.Params {
		fmt.Fprintf(&b, "head_param %s %d %d\n", hp.Name, hp.Min, hp.Max)
	}
	fmt.Fprintf(&b, "source causal=%v %s\n", p.Source.Causal, p.Source.Mask)
	fmt.Fprintf(&b, "layout %s %d\n", p.Layout.Kind, p.Layout.Stride)
	fmt.Fprintf(&b, "pattern causal=%v %s\n", p.Pattern.Causal, p.Pattern.Mask)
	fmt.Fprintf(&b, "row_interval %v\n", p.RowInterval)
	if p.Score.Active() {
		fmt.Fprintf(&b, "score %s\n", p.Score)
	}
	for _, pr := range p.Programs() {
		if pr.prog == nil {
			fmt.Fprintf(&b, "program %s 0\n", pr.name)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(pr.prog.String(), "\n"), "\n")
		fmt.Fprintf(&b, "program %s %d\n", pr.name, len(lines))
		for _, line := range lines {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	if sq < 1 {
		return b.String()
	}
	st := p.Stats(sq, sk)
	fmt.Fprintf(&b, "call seq_q %d seq_k %d\n", sq, sk)
	fmt.Fprintf(&b, "segments %d\n", st.Segments)
	fmt.Fprintf(&b, "query_tiles %d\n", st.QueryTiles)
	fmt.Fprintf(&b, "key_tiles full %d partial %d empty %d\n", st.Full, st.Partial, st.Empty)
	fmt.Fprintf(&b, "visited_pairs %d\n", st.VisitedPairs)
	segs := p.Segments(sq, sk)
	n := min(first, p.QueryTiles(segs[0]))
	fmt.Fprintf(&b, "first %d\n", n)
	var refs []TileRef
	docs := p.oneDoc(segs[0].SeqK)
	for qt := 0; qt < n; qt++ {
		refs = p.Visit(refs[:0], segs[0], qt, docs)
		fmt.Fprintf(&b, "  q%d:", qt)
		for _, r := range refs {
			c := "P"
			if r.Class == mask.Full {
				c = "F"
			}
			fmt.Fprintf(&b, " %d%s", r.K, c)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseText reads what Text printed.
func ParseText(text string) (*Dump, error) {
	d := &Dump{Plan: &Plan{}}
	p := d.Plan
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	next := func() ([]string, string, bool) {
		if !sc.Scan() {
			return nil, "", false
		}
		line++
		return strings.Fields(sc.Text()), sc.Text(), true
	}
	bad := func(what string) error { return fmt.Errorf("plan text line %d: %s", line, what) }
	ints := func(f []string, want ...string) ([]int, error) {
		var out []int
		for k, w := range want {
			if w != "" {
				if k >= len(f) || f[k] != w {
					return nil, bad(fmt.Sprintf("want %q", strings.Join(want, " ")))
				}
				continue
			}
			if k >= len(f) {
				return nil, bad("missing number")
			}
			v, err := strconv.Atoi(f[k])
			if err != nil {
				return nil, bad(fmt.Sprintf("bad number %q", f[k]))
			}
			out = append(out, v)
		}
		if len(f) != len(want) {
			return nil, bad("extra fields")
		}
		return out, nil
	}
	heads := "" // the head_params section of the source, as YAML
	var params []spec.HeadParam
	pattern := func(raw, key string) (spec.Pattern, error) {
		rest, ok := strings.CutPrefix(raw, key+" causal=")
		if !ok {
			return spec.Pattern{}, bad("want " + key)
		}
		flag, mask, _ := strings.Cut(rest, " ")
		s, err := spec.Parse("plan", []byte(fmt.Sprintf("name: x\ncausal: %s\n%smask: %s\n", flag, heads, mask)))
		if err != nil {
			return spec.Pattern{}, bad(fmt.Sprintf("%s: %v", key, err))
		}
		return s.Pattern(), nil
	}
	f, raw, _ := next()
	if len(f) != 2 || f[0] != "plan" {
		return nil, bad("want \"plan NAME\"")
	}
	p.Name = f[1]
	if f, _, _ = next(); len(f) != 2 || f[0] != "target" {
		return nil, bad("want \"target NAME\"")
	}
	p.Target = f[1]
	f, _, _ = next()
	want := []string{"head_dim", ""}
	if len(f) == 3 {
		want = append(want, "") // head_dim QK V
	}
	v, err := ints(f, want...)
	if err != nil {
		return nil, err
	}
	p.HeadDim, p.HeadDimV = v[0], v[len(v)-1]
	f, _, _ = next()
	if v, err = ints(f, "tiles", "", ""); err != nil {
		return nil, err
	}
	p.TileQ, p.TileK = v[0], v[1]
	for f, raw, _ = next(); len(f) > 0 && f[0] == "head_param"; f, raw, _ = next() {
		if len(f) != 4 {
			return nil, bad("want \"head_param NAME MIN MAX\"")
		}
		if v, err = ints(f, "head_param", f[1], "", ""); err != nil {
			return nil, err
		}
		params = append(params, spec.HeadParam{Name: f[1], Min: v[0], Max: v[1]})
	}
	heads = spec.HeadParamsYAML(params)
	if p.Source, err = pattern(raw, "source"); err != nil {
		return nil, err
	}
	f, _, _ = next()
	if len(f) != 3 || f[0] != "layout" {
		return nil, bad("want \"layout KIND STRIDE\"")
	}
	switch f[1] {
	case "identity":
	case "residue":
		p.Layout.Kind = Residue
	default:
		return nil, bad("unknown layout " + f[1])
	}
	if p.Layout.Stride, err = strconv.Atoi(f[2]); err != nil {
		return nil, bad("bad stride")
	}
	_, raw, _ = next()
	if p.Pattern, err = pattern(raw, "pattern"); err != nil {
		return nil, err
	}
	switch f, _, _ = next(); {
	case len(f) == 2 && f[0] == "row_interval" && (f[1] == "true" || f[1] == "false"):
		p.RowInterval = f[1] == "true"
	default:
		return nil, bad("want \"row_interval true|false\"")
	}
	f, _, _ = next()
	if len(f) > 0 && f[0] == "score" {
		if p.Score, err = parseScore(f[1:]); err != nil {
			return nil, bad(err.Error())
		}
		f, _, _ = next()
	}
	for k, pr := range p.Programs() {
		if k > 0 {
			f, _, _ = next()
		}
		if v, err = ints(f, "program", pr.name, ""); err != nil {
			return nil, err
		}
		if v[0] == 0 {
			continue
		}
		var text strings.Builder
		for k := 0; k < v[0]; k++ {
			if _, raw, ok := next(); ok {
				text.WriteString(strings.TrimSpace(raw) + "\n")
			}
		}
		prog, err := ParseProg(text.String())
		if err != nil {
			return nil, bad(err.Error())
		}
		if prog.Name != pr.name {
			return nil, bad(fmt.Sprintf("program %s is named %s", pr.name, prog.Name))
		}
		*pr.ptr = prog
	}
	f, _, ok := next()
	if !ok {
		return d, nil
	}
	st := &d.Stats
	if v, err = ints(f, "call", "seq_q", "", "seq_k", ""); err != nil {
		return nil, err
	}
	st.SeqQ, st.SeqK = v[0], v[1]
	f, _, _ = next()
	if v, err = ints(f, "segments", ""); err != nil {
		return nil, err
	}
	st.Segments = v[0]
	f, _, _ = next()
	if v, err = ints(f, "query_tiles", ""); err != nil {
		return nil, err
	}
	st.QueryTiles = v[0]
	f, _, _ = next()
	if v, err = ints(f, "key_tiles", "full", "", "partial", "", "empty", ""); err != nil {
		return nil, err
	}
	st.Full, st.Partial, st.Empty = v[0], v[1], int64(v[2])
	f, _, _ = next()
	if v, err = ints(f, "visited_pairs", ""); err != nil {
		return nil, err
	}
	st.VisitedPairs = int64(v[0])
	f, _, _ = next()
	if v, err = ints(f, "first", ""); err != nil {
		return nil, err
	}
	for qt := 0; qt < v[0]; qt++ {
		f, _, _ := next()
		if len(f) == 0 || f[0] != fmt.Sprintf("q%d:", qt) {
			return nil, bad(fmt.Sprintf("want \"q%d:\"", qt))
		}
		refs := []TileRef{}
		for _, t := range f[1:] {
			if len(t) < 2 {
				return nil, bad("bad tile " + t)
			}
			k, err := strconv.Atoi(t[:len(t)-1])
			c := map[byte]mask.Class{'F': mask.Full, 'P': mask.Partial}[t[len(t)-1]]
			if err != nil || c == mask.Empty {
				return nil, bad("bad tile " + t)
			}
			refs = append(refs, TileRef{K: k, Class: c})
		}
		d.First = append(d.First, refs)
	}
	if _, _, ok := next(); ok {
		return nil, bad("trailing text")
	}
	return d, nil
}
