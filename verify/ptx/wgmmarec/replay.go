package wgmmarec

import (
	"fmt"
	"sort"
	"strings"
)

// Report is the outcome of a replay: how many recorded outputs the
// interpreter reproduced, and how the others differ.
type Report struct {
	Outputs int            // outputs compared
	Differ  int            // outputs not bit-identical
	Classes map[string]int // differing outputs by kind (see classify)
	Cases   []CaseReport   // the cases with differences or problems
	Checked int            // cases replayed
}

// CaseReport is one case's differences.
type CaseReport struct {
	Name    string
	Outputs int
	Differ  int
	Classes map[string]int
	First   []string // up to 4 differing outputs, described
	Problem string   // a recorded field that is inconsistent (not an output)
}

// OK reports whether every output matched and no case had a problem.
func (r *Report) OK() bool {
	if r.Differ > 0 {
		return false
	}
	for _, c := range r.Cases {
		if c.Problem != "" {
			return false
		}
	}
	return true
}

func (r *Report) add(c CaseReport) {
	r.Checked++
	r.Outputs += c.Outputs
	r.Differ += c.Differ
	if r.Classes == nil {
		r.Classes = map[string]int{}
	}
	for k, n := range c.Classes {
		r.Classes[k] += n
	}
	if c.Differ > 0 || c.Problem != "" {
		r.Cases = append(r.Cases, c)
	}
}

// String summarizes the report: totals, the distribution of differences,
// and one line per case with differences.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cases, %d outputs, %d differ", r.Checked, r.Outputs, r.Differ)
	if len(r.Classes) > 0 {
		fmt.Fprintf(&b, " (%s)", classString(r.Classes))
	}
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "\n  %s: ", c.Name)
		if c.Problem != "" {
			fmt.Fprintf(&b, "PROBLEM %s; ", c.Problem)
		}
		fmt.Fprintf(&b, "%d of %d differ", c.Differ, c.Outputs)
		if len(c.Classes) > 0 {
			fmt.Fprintf(&b, " (%s)", classString(c.Classes))
		}
		for _, f := range c.First {
			fmt.Fprintf(&b, "\n    %s", f)
		}
	}
	return b.String()
}

func classString(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func isNaN(u uint32) bool { return u&0x7fffffff > 0x7f800000 }

// classify names how a replayed f32 output differs from the recorded one.
func classify(got, want uint32) string {
	switch {
	case isNaN(got) && isNaN(want):
		return "NaN payload"
	case isNaN(got) || isNaN(want):
		return "NaN vs number"
	case got&0x7fffffff == 0 && want&0x7fffffff == 0:
		return "sign of zero"
	case (got^want)>>31 != 0:
		return "opposite signs"
	}
	d := int64(got&0x7fffffff) - int64(want&0x7fffffff)
	if d < 0 {
		d = -d
	}
	switch {
	case d == 1:
		return "1 ulp"
	case d == 2:
		return "2 ulp"
	case d <= 16:
		return "3-16 ulp"
	}
	return "over 16 ulp"
}

// ReplayWgmma runs every case of f through the interpreter with its
// recorded inputs and compares the outputs bit for bit. It also checks
// that the recorded image address is 1024-byte aligned and that the
// recorded descriptors are the relative ones plus that address.
func ReplayWgmma(f *WgmmaFile) (*Report, error) {
	var vs []Variant
	for _, c := range f.Cases {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("%s: %v", c.Name, err)
		}
		vs = append(vs, c.Variant())
	}
	src, err := WgmmaModule(vs)
	if err != nil {
		return nil, err
	}
	b := NewInterp()
	if err := b.Load("wgmma.ptx", src); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, rec := range f.Cases {
		cr := CaseReport{Name: rec.Name, Outputs: len(rec.D), Classes: map[string]int{}}
		if len(rec.D) != len(rec.C) {
			cr.Problem = fmt.Sprintf("%d recorded outputs, %d accumulators", len(rec.D), len(rec.C))
			rep.add(cr)
			continue
		}
		cr.Problem = descProblem(rec)
		c := rec.inputs()
		if err := runWgmma(b, c); err != nil {
			return nil, err
		}
		for i, want := range rec.D {
			got := c.D[i]
			if got == want {
				continue
			}
			cr.Differ++
			k := classify(got, want)
			cr.Classes[k]++
			if len(cr.First) < 4 {
				t, reg := i/(c.N/2), i%(c.N/2)
				row := 16*(t/32) + t%32/4 + 8*(reg/2%2)
				col := 8*(reg/4) + 2*(t%4) + reg%2
				cr.First = append(cr.First, fmt.Sprintf("thread %d register %d (D row %d, column %d): interpreter %08x, recorded %08x, c %08x (%s)", t, reg, row, col, got, want, c.C[i], k))
			}
		}
		rep.add(cr)
	}
	return rep, nil
}

func descProblem(c *WgmmaCase) string {
	if c.Base%1024 != 0 {
		return fmt.Sprintf("image address %#x is not 1024-byte aligned", c.Base)
	}
	check := func(rel, used, what string) string {
		r, _ := parseHex(rel)
		u, err := parseHex(used)
		if err != nil {
			return fmt.Sprintf("%s used: %v", what, err)
		}
		if u != r+uint64(c.Base>>4) {
			return fmt.Sprintf("%s used %s, want %s + %#x", what, used, rel, c.Base>>4)
		}
		return ""
	}
	if c.A != ARegs {
		if p := check(c.DescA, c.DescAUsed, "desc_a"); p != "" {
			return p
		}
	}
	return check(c.DescB, c.DescBUsed, "desc_b")
}

// ReplayCopy runs every tensor-copy case of f through the interpreter and
// compares the box's shared bytes word for word.
func ReplayCopy(f *CopyFile) (*Report, error) {
	b := NewInterp()
	if err := b.Load("tensorcopy.ptx", CopyModule()); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, rec := range f.Cases {
		cr := CaseReport{Name: rec.Name, Outputs: len(rec.Out), Classes: map[string]int{}}
		if len(rec.Out) != rec.boxBytes()/4 {
			cr.Problem = fmt.Sprintf("%d recorded words for a box of %d bytes", len(rec.Out), rec.boxBytes())
			rep.add(cr)
			continue
		}
		if rec.Base%1024 != 0 {
			cr.Problem = fmt.Sprintf("destination %#x is not 1024-byte aligned", rec.Base)
		}
		c := rec.inputs()
		if err := runCopy(b, c); err != nil {
			return nil, err
		}
		for i, want := range rec.Out {
			if got := c.Out[i]; got != want {
				cr.Differ++
				cr.Classes["word"]++
				if len(cr.First) < 4 {
					cr.First = append(cr.First, fmt.Sprintf("shared byte %#x: interpreter %08x, recorded %08x", 4*i, got, want))
				}
			}
		}
		rep.add(cr)
	}
	return rep, nil
}
