package spectest

import (
	"fmt"
	"strings"
)

// UnionYAML is the text of a spec named name whose mask is a union of n
// primitives with distinct parameters (windows, blocks with offsets,
// dilated windows and key ranges, in turn), one operand a line; operand k
// is on line 4+k. It is the shape of a spec that grows past
// spec.MaxPrimitives.
func UnionYAML(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nmask:\n  union:\n", name)
	for k := range n {
		switch k % 4 {
		case 0:
			fmt.Fprintf(&b, "    - window: {size: %d}\n", k+2)
		case 1:
			fmt.Fprintf(&b, "    - block: {size: %d, offset: %d}\n", k+3, k%3)
		case 2:
			fmt.Fprintf(&b, "    - dilated: {stride: %d, size: %d}\n", k+2, 1+k%9)
		default:
			fmt.Fprintf(&b, "    - keys: {from: %d, below: %d}\n", 2*k, 2*k+1+k%3)
		}
	}
	b.WriteString("head_dim: 64\n")
	return b.String()
}
