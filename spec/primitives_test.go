package spec_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// TestMaxPrimitives: a mask of MaxPrimitives primitives parses; one more,
// in the mask or in a masks entry, is one error at the mask's line naming
// the count, the limit and the line of the first primitive past it. A
// bigbird whose window alone expands past the limit is refused at its
// window before the expansion is built (it used to allocate until out of
// memory), and one whose random blocks do is refused at the mask.
func TestMaxPrimitives(t *testing.T) {
	ok, err := spec.Parse("ok.yaml", []byte(spectest.UnionYAML("ok", spec.MaxPrimitives)))
	if err != nil {
		t.Fatalf("%d primitives: %v", spec.MaxPrimitives, err)
	}
	if n := ok.Mask.Primitives(); n != spec.MaxPrimitives {
		t.Fatalf("Primitives() = %d, want %d", n, spec.MaxPrimitives)
	}

	over := spectest.UnionYAML("big", spec.MaxPrimitives+1)
	line := 4 + spec.MaxPrimitives // operand k is on line 4+k
	want := fmt.Sprintf("big.yaml:3:3: mask: %d primitives (shorthands expanded), at most %d; primitive %d is at line %d, column 7:",
		spec.MaxPrimitives+1, spec.MaxPrimitives, spec.MaxPrimitives+1, line)
	oneError(t, "big.yaml", over, want)

	// The same union as a masks entry, the mask itself small.
	entry := strings.Replace(over, "mask:\n  union:\n", "mask: {full: {}}\nmasks:\n  wide:\n    union:\n", 1)
	entry = strings.ReplaceAll(entry, "\n    - ", "\n      - ")
	want = fmt.Sprintf("entry.yaml:5:5: masks.wide: %d primitives (shorthands expanded), at most %d; primitive %d is at line %d, column 9:",
		spec.MaxPrimitives+1, spec.MaxPrimitives, spec.MaxPrimitives+1, line+2)
	oneError(t, "entry.yaml", entry, want)

	// A shorthand counts its expansion.
	bb := fmt.Sprintf("name: bb\ncausal: false\nmask: {bigbird: {block: 1, blocks: 10, window: %d, random: 0}}\n", 2*spec.MaxPrimitives+1)
	oneError(t, "bb.yaml", bb, fmt.Sprintf("bb.yaml:3:48: mask.bigbird.window: %d expands to window/2 + 1 = %d blocks, more than the %d primitives", 2*spec.MaxPrimitives+1, spec.MaxPrimitives+1, spec.MaxPrimitives))
	bb = "name: bb\ncausal: false\nmask: {bigbird: {block: 1, blocks: 10, window: 2000000001, random: 0}}\n"
	oneError(t, "bb.yaml", bb, "bb.yaml:3:48: mask.bigbird.window: 2000000001 expands to window/2 + 1 = 1000000001 blocks")
	// 512 query blocks of one random block each: 512 queries and 512
	// keys sets, the window's 2 blocks, 4 global sets and the 2 bounds.
	bb = "name: bb\ncausal: false\nmask: {bigbird: {block: 1, blocks: 514, random: 1, seed: 1}}\n"
	oneError(t, "bb.yaml", bb, "bb.yaml:3:7: mask: 1032 primitives (shorthands expanded), at most 1024")
}

// oneError parses src as file and fails unless it is refused, within a
// second, with exactly one error starting with want.
func oneError(t *testing.T, file, src, want string) {
	t.Helper()
	start := time.Now()
	_, err := spec.Parse(file, []byte(src))
	if d := time.Since(start); d > time.Second {
		t.Errorf("%s: parsing took %v", file, d)
	}
	list, _ := err.(spec.ErrorList)
	if len(list) != 1 || !strings.HasPrefix(list[0].Error(), want) {
		t.Errorf("%s: error %v, want one starting %q", file, err, want)
	}
}
