package spec_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// lines joins its arguments as the lines of a file, so that argument k is
// line k+1 and positions in the tables below can be read off directly.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// wantErr is one expected error: its exact position and substrings of its
// message, the first naming the field.
type wantErr struct {
	line, col int
	has       []string
}

func at(line, col int, has ...string) wantErr { return wantErr{line, col, has} }

type errCase struct {
	name string
	src  string
	want []wantErr
}

// base is a valid spec the error cases add one fault to.
const base = "name: a\nmask: {full: {}}\n"

// errCases holds one malformed spec per kind of error, and more. The fuzz
// target seeds its corpus from it too.
var errCases = []errCase{
	// YAML itself.
	{"syntax: unclosed flow mapping", lines("name: a", "mask: {full: {}", "head_dim: 64"),
		[]wantErr{at(2, 1, "invalid YAML", "did not find expected ',' or '}'")}},
	{"syntax: unclosed flow sequence", lines("name: a", "mask:", "  union: [{full: {}}", "causal: true"),
		[]wantErr{at(3, 3, "invalid YAML", "did not find expected ',' or ']'")}},
	{"syntax: bad indentation", lines("name: a", "mask:", "  block:", "    size: 4", " head_dim: 64"),
		[]wantErr{at(5, 2, "invalid YAML", "did not find expected key")}},
	{"syntax: tab indentation", lines("name: a", "mask: {full: {}}", "\tcausal: true"),
		[]wantErr{at(3, 1, "invalid YAML", "found character that cannot start any token")}},
	{"syntax: unterminated string", lines("name: a", "mask: {full: {}}", `head_dim: "64`),
		[]wantErr{at(3, 1, "invalid YAML", "unexpected end of stream")}},
	{"syntax: mapping value in plain scalar", lines("name: a: b", "mask: {full: {}}"),
		[]wantErr{at(1, 1, "invalid YAML", "mapping values are not allowed")}},
	{"syntax: control character", "name: a\x01\nmask: {full: {}}\n",
		[]wantErr{at(1, 1, "invalid YAML", "control characters are not allowed")}},
	{"syntax: error on a later line", lines("name: a", "mask:", "  window: {size: 4}", "causal: true", "head_dim: [64"),
		[]wantErr{at(5, 1, "invalid YAML")}},
	{"syntax: too deep for YAML", "name: a\nmask: " + strings.Repeat("[", 20000) + "\n",
		[]wantErr{at(2, 1, "invalid YAML", "exceeded max depth")}},
	{"empty file", "", []wantErr{at(1, 1, "empty spec")}},
	{"only comments", "# nothing here\n\n", []wantErr{at(1, 1, "empty spec")}},
	{"only a document marker", "---\n", []wantErr{at(2, 1, "spec: want a mapping", "got nothing (null)")}},
	{"top level is a list", lines("- name: a", "- mask: {full: {}}"),
		[]wantErr{at(1, 1, "spec: want a mapping", "got a list")}},
	{"top level is a string", "hello\n", []wantErr{at(1, 1, "spec: want a mapping", `got the string "hello"`)}},
	{"second document", lines("name: a", "mask: {full: {}}", "---", "name: b", "mask: {full: {}}"),
		[]wantErr{at(3, 1, "second YAML document")}},
	{"syntax error in a second document", lines("name: a", "mask: {full: {}}", "---", "[", "causal: x"),
		[]wantErr{at(4, 1, "invalid YAML")}},

	// Top-level fields.
	{"unknown top-level key", base + "colour: red\n",
		[]wantErr{at(3, 1, `spec: unknown key "colour"`, "want name, mask, causal, head_dim, page_size, schedule, masks")}},
	{"misspelt top-level key", lines("name: a", "mask: {full: {}}", "headdim: 64"),
		[]wantErr{at(3, 1, `spec: unknown key "headdim"`)}},
	{"missing name and mask", "causal: true\n",
		[]wantErr{at(1, 1, "spec: missing field name"), at(1, 1, "spec: missing field mask")}},
	{"missing mask", "name: a\n", []wantErr{at(1, 1, "spec: missing field mask")}},
	{"duplicate top-level key", lines("name: a", "mask: {full: {}}", "name: b"),
		[]wantErr{at(3, 1, `spec: duplicate key "name"`)}},
	{"top-level key is an integer", base + "5: x\n",
		[]wantErr{at(3, 1, "spec key: want a string", "got the integer 5")}},
	{"top-level key is a boolean", base + "true: x\n",
		[]wantErr{at(3, 1, "spec key: want a string", "got the boolean true")}},
	{"top-level key is a list", base + "? [a]\n: x\n",
		[]wantErr{at(3, 3, "spec key: want a string", "got a list")}},
	{"name is an integer", "name: 5\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name: want a string", "got the integer 5")}},
	{"name is null", "name:\nmask: {full: {}}\n",
		[]wantErr{at(1, 6, "name: want a string", "got nothing (null)")}},
	{"name with a dash", "name: my-kernel\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"my-kernel" is not a valid Go package name`)}},
	{"name with upper case", "name: Bridge\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"Bridge" is not a valid Go package name`)}},
	{"name starting with a digit", "name: 2fast\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"2fast" is not a valid Go package name`)}},
	{"name starting with underscore", "name: _x\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"_x" is not a valid Go package name`)}},
	{"name not ASCII", "name: café\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", "is not a valid Go package name")}},
	{"name is a keyword", "name: func\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"func" cannot be a package name`)}},
	{"name is main", "name: main\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name:", `"main" cannot be a package name`)}},
	{"name is empty", "name: ''\nmask: {full: {}}\n",
		[]wantErr{at(1, 7, "name: empty")}},

	// causal: YAML 1.2 booleans only.
	{"causal yes", base + "causal: yes\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "yes"`)}},
	{"causal no", base + "causal: no\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "no"`)}},
	{"causal on", base + "causal: on\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "on"`)}},
	{"causal off", base + "causal: off\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "off"`)}},
	{"causal y", base + "causal: y\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "y"`)}},
	{"causal 1", base + "causal: 1\n", []wantErr{at(3, 9, "causal: want true or false", "got the integer 1")}},
	{"causal quoted", base + "causal: \"true\"\n", []wantErr{at(3, 9, "causal: want true or false", `got the string "true"`)}},
	{"causal tagged yes", base + "causal: !!bool yes\n", []wantErr{at(3, 9, "causal: want true or false", `got "yes"`)}},
	{"causal list", base + "causal: [true]\n", []wantErr{at(3, 9, "causal: want true or false", "got a list")}},
	{"causal null", base + "causal:\n", []wantErr{at(3, 8, "causal: want true or false", "got nothing (null)")}},

	// head_dim.
	{"head_dim 2048", base + "head_dim: 2048\n", []wantErr{at(3, 11, "head_dim: 2048 is not supported", "want 1 to 1024")}},
	{"head_dim 0", base + "head_dim: 0\n", []wantErr{at(3, 11, "head_dim: 0 is not supported")}},
	{"head_dim negative", base + "head_dim: -64\n", []wantErr{at(3, 11, "head_dim: -64 is not supported")}},
	{"head_dim quoted", base + "head_dim: \"128\"\n", []wantErr{at(3, 11, "head_dim: want an integer", `got the string "128"`)}},
	{"head_dim float", base + "head_dim: 128.0\n", []wantErr{at(3, 11, "head_dim: want an integer", "got the number 128.0")}},
	{"head_dim hex", base + "head_dim: 0x80\n", []wantErr{at(3, 11, "head_dim: want a decimal integer", "0x80")}},
	{"head_dim overflow", base + "head_dim: 99999999999999999999\n",
		[]wantErr{at(3, 11, "head_dim: integer 99999999999999999999 out of range", "at most 2147483647")}},
	{"head_dim mapping", base + "head_dim: {size: 64}\n", []wantErr{at(3, 11, "head_dim: a mapping needs both qk", "and v"), at(3, 12, `head_dim: unknown key "size"`, "want qk, v")}},
	{"head_dim qk only", base + "head_dim: {qk: 192}\n", []wantErr{at(3, 11, "head_dim: a mapping needs both qk", "and v")}},
	{"head_dim v zero", base + "head_dim: {qk: 192, v: 0}\n", []wantErr{at(3, 24, "head_dim.v: 0 is not supported")}},
	{"head_dim qk quoted", base + "head_dim: {qk: \"192\", v: 128}\n", []wantErr{at(3, 16, "head_dim.qk: want an integer")}},
	{"head_dim list", base + "head_dim: [192, 128]\n", []wantErr{at(3, 11, "head_dim: want an integer", "got a list")}},

	// schedule.
	{"schedule not a list", base + "schedule: mask\n",
		[]wantErr{at(3, 11, "schedule: want a list of layer entries", `got the string "mask"`)}},
	{"schedule a mapping", base + "schedule: {mask: 1}\n",
		[]wantErr{at(3, 11, "schedule: want a list", "got a mapping")}},
	{"schedule empty", base + "schedule: []\n", []wantErr{at(3, 11, "schedule: empty")}},
	{"schedule unknown entry", base + "schedule: [mask, wide, full]\n",
		[]wantErr{at(3, 18, `schedule: unknown entry "wide"`, "want mask, full, or a name from masks")}},
	{"schedule entry not a string", base + "schedule: [mask, 3]\n",
		[]wantErr{at(3, 18, "schedule entry: want a string", "got the integer 3")}},
	{"schedule entry a mapping", lines("name: a", "mask: {full: {}}", "schedule:", "  - mask", "  - {window: {size: 4}}"),
		[]wantErr{at(5, 5, "schedule entry: want a string", "got a mapping")}},
	{"schedule names an invalid extra mask", lines("name: a", "mask: {full: {}}", "schedule: [mask, wide]", "masks:", "  wide: {window: {size: 0}}"),
		[]wantErr{at(5, 25, "masks.wide.window.size: 0 is out of range")}},

	// masks.
	{"masks not a mapping", base + "masks: [a]\n",
		[]wantErr{at(3, 8, "masks: want a mapping from name to mask", "got a list")}},
	{"masks reserved name mask", base + "masks: {mask: {full: {}}}\n",
		[]wantErr{at(3, 9, `masks: name "mask" is reserved`)}},
	{"masks reserved name full", base + "masks:\n  full: {window: {size: 4}}\n",
		[]wantErr{at(4, 3, `masks: name "full" is reserved`)}},
	{"masks name not an identifier", base + "masks: {my-mask: {full: {}}}\n",
		[]wantErr{at(3, 9, `masks: name "my-mask" is not an identifier`)}},
	{"masks key not a string", base + "masks: {5: {block: {size: 0}}}\n",
		[]wantErr{at(3, 9, "masks key: want a string", "got the integer 5"), at(3, 27, "masks entry.block.size: 0 is out of range")}},
	{"masks duplicate name", base + "masks:\n  w: {full: {}}\n  w: {window: {size: 2}}\n",
		[]wantErr{at(5, 3, `masks: duplicate name "w"`)}},
	{"masks bad entry", base + "masks:\n  w: {window: {size: 0}}\n",
		[]wantErr{at(4, 22, "masks.w.window.size: 0 is out of range (at least 1)")}},

	// The mask's structure.
	{"mask null", "name: a\nmask:\n", []wantErr{at(2, 6, "mask: want a mapping with one of full, window", "got nothing (null)")}},
	{"mask a string", "name: a\nmask: window\n", []wantErr{at(2, 7, "mask: want a mapping", `got the string "window"`)}},
	{"mask a list", "name: a\nmask: [full]\n", []wantErr{at(2, 7, "mask: want a mapping", "got a list")}},
	{"mask empty mapping", "name: a\nmask: {}\n", []wantErr{at(2, 7, "mask: empty mapping")}},
	{"unknown mask kind", "name: a\nmask: {sliding_window: {size: 4}}\n",
		[]wantErr{at(2, 8, `mask: unknown mask kind "sliding_window"`, "want one of full, window, block, bridge, dilated, global, document, queries, keys, neighborhood, tree, union, intersect, not, pbb, se_bridge, streaming, strided, prefix_lm, chunked, longformer")}},
	{"two primitives in one map", lines("name: a", "mask:", "  block: {size: 4}", "  window: {size: 2}"),
		[]wantErr{at(4, 3, "mask: two primitives in one map (block and window)", "union or intersect")}},
	{"two primitives in a union operand", lines("name: a", "mask:", "  union:", "    - {block: {size: 4}, global: {tokens: 1}}"),
		[]wantErr{at(4, 26, "mask.union[0]: two primitives in one map (block and global)")}},
	{"duplicate primitive key", "name: a\nmask: {block: {size: 4}, block: {size: 8}}\n",
		[]wantErr{at(2, 26, `mask: duplicate key "block"`)}},
	{"mask kind not a string", "name: a\nmask: {5: {}}\n",
		[]wantErr{at(2, 8, "mask kind: want a name", "got the integer 5")}},
	{"parameters not a mapping", "name: a\nmask: {block: 4}\n",
		[]wantErr{at(2, 15, "mask.block: want a mapping of parameters", "got the integer 4")}},
	{"parameters a list", "name: a\nmask: {window: [4]}\n",
		[]wantErr{at(2, 16, "mask.window: want a mapping of parameters", "got a list")}},
	{"unknown parameter", "name: a\nmask: {block: {size: 4, stride: 2}}\n",
		[]wantErr{at(2, 25, `mask.block: unknown key "stride"`, "want size")}},
	{"duplicate parameter", "name: a\nmask: {block: {size: 4, size: 8}}\n",
		[]wantErr{at(2, 25, `mask.block: duplicate key "size"`)}},
	{"parameter key not a string", "name: a\nmask: {block: {4: 4}}\n",
		[]wantErr{at(2, 15, "mask.block: missing parameter size"), at(2, 16, "mask.block key: want a string", "got the integer 4")}},
	{"full with a parameter", "name: a\nmask: {full: {size: 4}}\n",
		[]wantErr{at(2, 15, "mask.full: takes no parameters")}},
	{"document with a parameter", "name: a\nmask: {document: {ids: x}}\n",
		[]wantErr{at(2, 19, "mask.document: takes no parameters")}},
	{"full with a scalar", "name: a\nmask: {full: true}\n",
		[]wantErr{at(2, 14, "mask.full: want a mapping of parameters", "got the boolean true")}},

	// window.
	{"window size 0", "name: a\nmask: {window: {size: 0}}\n",
		[]wantErr{at(2, 23, "mask.window.size: 0 is out of range (at least 1)")}},
	{"window size and left", "name: a\nmask: {window: {size: 4, left: 2}}\n",
		[]wantErr{at(2, 16, "mask.window: give size (causal window) or left and right, not both")}},
	{"window size and right", "name: a\nmask: {window: {size: 4, right: 2}}\n",
		[]wantErr{at(2, 16, "mask.window: give size (causal window) or left and right, not both")}},
	{"window left without right", "name: a\nmask: {window: {left: 4}}\n",
		[]wantErr{at(2, 16, "mask.window: missing parameter right")}},
	{"window right without left", "name: a\nmask: {window: {right: 4}}\n",
		[]wantErr{at(2, 16, "mask.window: missing parameter left")}},
	{"window without parameters", "name: a\nmask: {window: {}}\n",
		[]wantErr{at(2, 16, "mask.window: missing parameter size (or left and right)")}},
	{"window null parameters", "name: a\nmask:\n  window:\n",
		[]wantErr{at(3, 10, "mask.window: missing parameter size (or left and right)")}},
	{"window left negative", "name: a\nmask: {window: {left: -1, right: 0}}\n",
		[]wantErr{at(2, 23, "mask.window.left: -1 is out of range (at least 0)")}},
	{"window left too large", "name: a\nmask: {window: {left: 2147483647, right: 0}}\n",
		[]wantErr{at(2, 23, "mask.window.left: 2147483647 is out of range (at most 2147483646)")}},
	{"window size overflows int32", "name: a\nmask: {window: {size: 2147483648}}\n",
		[]wantErr{at(2, 23, "mask.window.size: integer 2147483648 out of range (at most 2147483647)")}},
	{"window unknown parameter", "name: a\nmask: {window: {width: 4}}\n",
		[]wantErr{at(2, 16, "mask.window: missing parameter size"), at(2, 17, `mask.window: unknown key "width"`, "want size, left, right")}},

	// block.
	{"block size 0", "name: a\nmask: {block: {size: 0}}\n", []wantErr{at(2, 22, "mask.block.size: 0 is out of range (at least 1)")}},
	{"block size negative", "name: a\nmask: {block: {size: -8}}\n", []wantErr{at(2, 22, "mask.block.size: -8 is out of range (at least 1)")}},
	{"block missing size", "name: a\nmask: {block: {}}\n", []wantErr{at(2, 15, "mask.block: missing parameter size")}},

	// bridge.
	{"bridge targets larger than block", "name: a\nmask: {bridge: {block: 32, targets: 40, sources: 8}}\n",
		[]wantErr{at(2, 37, "mask.bridge.targets: 40 is out of range (at most block = 32)")}},
	{"bridge sources larger than block", "name: a\nmask: {bridge: {block: 32, targets: 8, sources: 33}}\n",
		[]wantErr{at(2, 49, "mask.bridge.sources: 33 is out of range (at most block = 32)")}},
	{"bridge targets 0", "name: a\nmask: {bridge: {block: 32, targets: 0, sources: 8}}\n",
		[]wantErr{at(2, 37, "mask.bridge.targets: 0 is out of range (at least 1)")}},
	{"bridge max_distance 0", "name: a\nmask: {bridge: {block: 32, targets: 8, sources: 8, max_distance: 0}}\n",
		[]wantErr{at(2, 66, "mask.bridge.max_distance: 0 is out of range (at least 1)")}},
	{"bridge without parameters", "name: a\nmask: {bridge: {}}\n",
		[]wantErr{at(2, 16, "mask.bridge: missing parameter block"), at(2, 16, "mask.bridge: missing parameter targets"), at(2, 16, "mask.bridge: missing parameter sources")}},
	{"bridge unknown parameter", "name: a\nmask: {bridge: {block: 32, targets: 8, sources: 8, width: 8}}\n",
		[]wantErr{at(2, 52, `mask.bridge: unknown key "width"`, "want block, targets, sources, max_distance")}},
	{"bridge block 0 and targets", "name: a\nmask: {bridge: {block: 0, targets: 8, sources: 8}}\n",
		[]wantErr{at(2, 24, "mask.bridge.block: 0 is out of range (at least 1)")}},

	// block offset, dilated phase.
	{"block offset negative", "name: a\nmask: {block: {size: 4, offset: -1}}\n",
		[]wantErr{at(2, 33, "mask.block.offset: -1 is out of range (at least 0)")}},
	{"block offset without size", "name: a\nmask: {block: {offset: 4}}\n",
		[]wantErr{at(2, 15, "mask.block: missing parameter size")}},
	{"dilated phase and size", "name: a\nmask: {dilated: {stride: 4, size: 2, phase: 1}}\n",
		[]wantErr{at(2, 45, "mask.dilated: give size (taps counted back from the query) or phase (keys at fixed positions), not both")}},
	{"dilated phase not below stride", "name: a\nmask: {dilated: {stride: 4, phase: 4}}\n",
		[]wantErr{at(2, 36, "mask.dilated.phase: 4 is out of range (at most stride - 1 = 3)")}},
	{"dilated phase without stride", "name: a\nmask: {dilated: {phase: 0}}\n",
		[]wantErr{at(2, 17, "mask.dilated: missing parameter stride")}},
	{"chunked offset negative", "name: a\nmask: {chunked: {size: 4, offset: -2}}\n",
		[]wantErr{at(2, 35, "mask.chunked.offset: -2 is out of range (at least 0)")}},

	// dilated, global.
	{"dilated stride 0", "name: a\nmask: {dilated: {stride: 0}}\n", []wantErr{at(2, 26, "mask.dilated.stride: 0 is out of range (at least 1)")}},
	{"dilated size 0", "name: a\nmask: {dilated: {stride: 2, size: 0}}\n", []wantErr{at(2, 35, "mask.dilated.size: 0 is out of range (at least 1)")}},
	{"dilated missing stride", "name: a\nmask: {dilated: {size: 4}}\n", []wantErr{at(2, 17, "mask.dilated: missing parameter stride")}},
	{"global tokens 0", "name: a\nmask: {global: {tokens: 0}}\n", []wantErr{at(2, 25, "mask.global.tokens: 0 is out of range (at least 1)")}},
	{"global missing tokens", "name: a\nmask: {global: {}}\n", []wantErr{at(2, 16, "mask.global: no global positions: give tokens, positions, ranges or stride")}},
	{"global rows alone", "name: a\nmask: {global: {rows: true}}\n", []wantErr{at(2, 16, "mask.global: no global positions")}},
	{"global rows not a boolean", "name: a\nmask: {global: {positions: [3], rows: yes}}\n",
		[]wantErr{at(2, 39, "mask.global.rows: want true or false", `got the string "yes"`)}},
	{"global positions empty", "name: a\nmask: {global: {positions: []}}\n",
		[]wantErr{at(2, 28, "mask.global.positions: want a non-empty list of positions", "got a list")}},
	{"global positions not a list", "name: a\nmask: {global: {positions: 4}}\n",
		[]wantErr{at(2, 28, "mask.global.positions: want a non-empty list of positions", "got the integer 4")}},
	{"global position negative and too large", "name: a\nmask: {global: {positions: [1, -1, 2147483647]}}\n",
		[]wantErr{at(2, 32, "mask.global.positions[1]: -1 is out of range (want 0 to 2147483646)"), at(2, 36, "mask.global.positions[2]: 2147483647 is out of range")}},
	{"global range below not above from", "name: a\nmask: {global: {ranges: [{from: 4, below: 9}, {from: 8, below: 8}]}}\n",
		[]wantErr{at(2, 64, "mask.global.ranges[1].below: 8 must exceed from = 8")}},
	{"global range missing below and unknown key", "name: a\nmask: {global: {ranges: [{from: 4, to: 9}]}}\n",
		[]wantErr{at(2, 26, "mask.global.ranges[0]: missing parameter below"), at(2, 36, `mask.global.ranges[0]: unknown key "to"`, "want from, below")}},
	{"global range not a mapping", "name: a\nmask: {global: {ranges: [[4, 9]]}}\n",
		[]wantErr{at(2, 26, "mask.global.ranges[0]: want a mapping {from, below}", "got a list")}},
	{"global phase without stride", "name: a\nmask: {global: {positions: [0], phase: 1}}\n",
		[]wantErr{at(2, 40, "mask.global.phase: needs stride")}},
	{"global stride phase out of range", "name: a\nmask: {global: {stride: 8, phase: 8}}\n",
		[]wantErr{at(2, 35, "mask.global.phase: 8 is out of range (at most stride - 1 = 7)")}},
	{"longformer odd window", "name: a\nmask: {longformer: {window: 5, positions: [0]}}\n",
		[]wantErr{at(2, 29, "mask.longformer.window: 5 is odd")}},
	{"longformer missing window", "name: a\nmask: {longformer: {positions: [0]}}\n",
		[]wantErr{at(2, 20, "mask.longformer: missing parameter window")}},
	{"longformer rows", "name: a\nmask: {longformer: {window: 4, rows: false}}\n",
		[]wantErr{at(2, 32, `mask.longformer: unknown key "rows"`)}},
	{"global unknown parameter", "name: a\nmask: {global: {tokens: 4, size: 2}}\n",
		[]wantErr{at(2, 28, `mask.global: unknown key "size"`, "want tokens")}},

	// queries, keys.
	{"keys below 0", "name: a\nmask: {keys: {below: 0}}\n", []wantErr{at(2, 22, "mask.keys.below: 0 is out of range (at least 1)")}},
	{"queries from negative", "name: a\nmask: {queries: {from: -1}}\n", []wantErr{at(2, 24, "mask.queries.from: -1 is out of range (at least 0)")}},
	{"keys from not below below", "name: a\nmask: {keys: {from: 8, below: 8}}\n",
		[]wantErr{at(2, 31, "mask.keys.below: 8 must exceed from = 8", "keeps nothing")}},
	{"queries stride misses the range", "name: a\nmask: {queries: {from: 5, below: 8, stride: 4}}\n",
		[]wantErr{at(2, 34, "mask.queries.below: no position in [from, below) = [5, 8) has p mod 4 == 0", "keeps nothing")}},
	{"keys phase without stride", "name: a\nmask: {keys: {phase: 1}}\n",
		[]wantErr{at(2, 22, "mask.keys.phase: needs stride")}},
	{"keys phase not below stride", "name: a\nmask: {keys: {stride: 4, phase: 4}}\n",
		[]wantErr{at(2, 33, "mask.keys.phase: 4 is out of range (at most stride - 1 = 3)")}},
	{"keys stride 0", "name: a\nmask: {keys: {stride: 0}}\n", []wantErr{at(2, 23, "mask.keys.stride: 0 is out of range (at least 1)")}},
	{"queries unknown parameter", "name: a\nmask: {queries: {below: 4, size: 2}}\n",
		[]wantErr{at(2, 28, `mask.queries: unknown key "size"`, "want from, below, stride, phase")}},

	// neighborhood.
	{"neighborhood under the default causal", lines("name: a", "mask: {neighborhood: {grid: [4, 4], kernel: 3}}"),
		[]wantErr{at(2, 8, "mask.neighborhood: is not causal along both axes", "write causal: false")}},
	{"neighborhood even kernel", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [4, 4], kernel: [2, 3]}}"),
		[]wantErr{at(3, 46, "mask.neighborhood.kernel[0]: 2 is even")}},
	{"neighborhood kernel past the grid", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [4, 8], kernel: [3, 9]}}"),
		[]wantErr{at(3, 49, "mask.neighborhood.kernel[1]: kernel 9 x dilation 1 = 9 exceeds the grid's 8 columns")}},
	{"neighborhood dilation past the grid", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [9, 8], kernel: 3, dilation: [4, 1]}}"),
		[]wantErr{at(3, 59, "mask.neighborhood.kernel[0]: kernel 3 x dilation 4 = 12 exceeds the grid's 9 rows")}},
	{"neighborhood grid one value", lines("name: a", "causal: false", "mask: {neighborhood: {grid: 16, kernel: 3}}"),
		[]wantErr{at(3, 29, "mask.neighborhood.grid: want [rows, columns], got the integer 16")}},
	{"neighborhood grid too large", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [65536, 65536], kernel: 3}}"),
		[]wantErr{at(3, 29, "mask.neighborhood.grid: 65536 x 65536 = 4294967296 cells, at most 1073741824")}},
	{"neighborhood grid 0", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [0, 4], kernel: 3}}"),
		[]wantErr{at(3, 30, "mask.neighborhood.grid[0]: 0 is out of range (want 1 to 1073741824)")}},
	{"neighborhood missing kernel", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [4, 4]}}"),
		[]wantErr{at(3, 22, "mask.neighborhood: missing parameter kernel")}},
	{"neighborhood causal not a boolean", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [4, 4], kernel: 3, causal: [yes, false]}}"),
		[]wantErr{at(3, 57, "mask.neighborhood.causal[0]: want true or false")}},
	{"neighborhood unknown parameter", lines("name: a", "causal: false", "mask: {neighborhood: {grid: [4, 4], kernel: 3, stride: 2}}"),
		[]wantErr{at(3, 48, "mask.neighborhood: unknown key \"stride\"", "want grid, kernel, dilation, causal")}},

	// Shorthands.
	{"bigbird even window", lines("name: a", "causal: false", "mask: {bigbird: {block: 4, blocks: 8, window: 2, random: 1, seed: 1}}"),
		[]wantErr{at(3, 47, "mask.bigbird.window: 2 is even")}},
	{"bigbird missing seed", lines("name: a", "causal: false", "mask: {bigbird: {block: 4, blocks: 8, random: 1}}"),
		[]wantErr{at(3, 17, "mask.bigbird: missing parameter seed")}},
	{"bigbird too many global blocks", lines("name: a", "causal: false", "mask: {bigbird: {block: 4, blocks: 8, global: 5, random: 0}}"),
		[]wantErr{at(3, 47, "mask.bigbird.global: 5 is out of range (at most blocks/2 = 4")}},
	{"bigbird too many random blocks", lines("name: a", "causal: false", "mask: {bigbird: {block: 4, blocks: 100, random: 6, seed: 1}}"),
		[]wantErr{at(3, 49, "mask.bigbird.random: 6 random blocks for each of 98 query blocks, more than 512")}},
	{"bigbird too many positions", lines("name: a", "causal: false", "mask: {bigbird: {block: 65536, blocks: 65536, random: 0}}"),
		[]wantErr{at(3, 17, "mask.bigbird: block 65536 x blocks 65536 positions exceed 2147483647")}},
	{"bigbird missing random", lines("name: a", "causal: false", "mask: {bigbird: {block: 4, blocks: 8}}"),
		[]wantErr{at(3, 17, "mask.bigbird: missing parameter random")}},
	{"prefix_lm under causal", "name: a\nmask: {prefix_lm: {prefix: 4}}\n",
		[]wantErr{at(2, 8, "mask.prefix_lm: is bidirectional over the prefix, so it needs causal: false")}},
	{"prefix_lm in masks under causal, written causal", lines("name: a", "causal: true", "mask: {full: {}}", "schedule: [mask, p]", "masks:", "  p: {union: [{window: {size: 4}}, {prefix_lm: {prefix: 4}}]}"),
		[]wantErr{at(6, 37, "masks.p.union[1].prefix_lm: is bidirectional over the prefix")}},
	{"prefix_lm prefix 0", "name: a\ncausal: false\nmask: {prefix_lm: {prefix: 0}}\n",
		[]wantErr{at(3, 28, "mask.prefix_lm.prefix: 0 is out of range (at least 1)")}},
	{"prefix_lm missing prefix", "name: a\ncausal: false\nmask: {prefix_lm: {}}\n",
		[]wantErr{at(3, 19, "mask.prefix_lm: missing parameter prefix")}},
	{"chunked size 0", "name: a\nmask: {chunked: {size: 0}}\n", []wantErr{at(2, 24, "mask.chunked.size: 0 is out of range (at least 1)")}},
	{"chunked unknown parameter", "name: a\nmask: {chunked: {size: 4, chunk: 2}}\n",
		[]wantErr{at(2, 27, `mask.chunked: unknown key "chunk"`, "want size")}},
	{"pbb width larger than block", "name: a\nmask: {pbb: {block: 16, width: 17}}\n",
		[]wantErr{at(2, 32, "mask.pbb.width: 17 is out of range (at most block = 16)")}},
	{"pbb unknown parameter sources", "name: a\nmask: {pbb: {block: 16, width: 4, sources: 8}}\n",
		[]wantErr{at(2, 35, `mask.pbb: unknown key "sources"`, "want block, width")}},
	{"pbb missing width", "name: a\nmask: {pbb: {block: 16}}\n", []wantErr{at(2, 13, "mask.pbb: missing parameter width")}},
	{"pbb block 0", "name: a\nmask: {pbb: {block: 0, width: 4}}\n", []wantErr{at(2, 21, "mask.pbb.block: 0 is out of range (at least 1)")}},
	{"se_bridge sources equal width", "name: a\nmask: {se_bridge: {block: 256, width: 32, sources: 32}}\n",
		[]wantErr{at(2, 52, "mask.se_bridge.sources: 32 must exceed width 32", "use pbb")}},
	{"se_bridge sources below width", "name: a\nmask: {se_bridge: {block: 256, width: 32, sources: 8}}\n",
		[]wantErr{at(2, 52, "mask.se_bridge.sources: 8 must exceed width 32")}},
	{"se_bridge sources larger than block", "name: a\nmask: {se_bridge: {block: 256, width: 32, sources: 257}}\n",
		[]wantErr{at(2, 52, "mask.se_bridge.sources: 257 is out of range (at most block = 256)")}},
	{"se_bridge missing sources", "name: a\nmask: {se_bridge: {block: 256, width: 32}}\n",
		[]wantErr{at(2, 19, "mask.se_bridge: missing parameter sources")}},
	{"se_bridge unknown parameter", "name: a\nmask: {se_bridge: {block: 256, width: 32, sources: 64, targets: 4}}\n",
		[]wantErr{at(2, 56, `mask.se_bridge: unknown key "targets"`, "want block, width, sources")}},
	{"streaming unknown parameter", "name: a\nmask: {streaming: {sinks: 4, size: 64}}\n",
		[]wantErr{at(2, 19, "mask.streaming: missing parameter window"), at(2, 30, `mask.streaming: unknown key "size"`, "want sinks, window")}},
	{"streaming sinks 0", "name: a\nmask: {streaming: {sinks: 0, window: 64}}\n",
		[]wantErr{at(2, 27, "mask.streaming.sinks: 0 is out of range (at least 1)")}},
	{"streaming window 0", "name: a\nmask: {streaming: {sinks: 4, window: 0}}\n",
		[]wantErr{at(2, 38, "mask.streaming.window: 0 is out of range (at least 1)")}},
	{"strided stride 0", "name: a\nmask: {strided: {stride: 0}}\n",
		[]wantErr{at(2, 26, "mask.strided.stride: 0 is out of range (at least 1)")}},
	{"strided unknown parameter", "name: a\nmask: {strided: {stride: 4, size: 2}}\n",
		[]wantErr{at(2, 29, `mask.strided: unknown key "size"`, "want stride")}},
	{"shorthand with a list", "name: a\nmask: {pbb: [16, 4]}\n",
		[]wantErr{at(2, 13, "mask.pbb: want a mapping of parameters", "got a list")}},

	// union and intersect.
	{"empty union", "name: a\nmask: {union: []}\n", []wantErr{at(2, 15, "mask.union: empty union")}},
	{"empty intersect", "name: a\nmask: {intersect: []}\n", []wantErr{at(2, 19, "mask.intersect: empty intersect")}},
	{"union of a mapping", "name: a\nmask: {union: {block: {size: 4}}}\n",
		[]wantErr{at(2, 15, "mask.union: want a list of masks", "got a mapping")}},
	{"union null", "name: a\nmask:\n  union:\n", []wantErr{at(3, 9, "mask.union: want a list of masks", "got nothing (null)")}},
	{"union operand a string", "name: a\nmask: {union: [{full: {}}, window]}\n",
		[]wantErr{at(2, 28, "mask.union[1]: want a mapping", `got the string "window"`)}},
	{"bad operands all reported", lines("name: a", "mask:", "  union:", "    - block: {size: 0}", "    - full: {}", "    - intersect:", "        - window: {size: 4}", "        - dilated: {stride: -2}"),
		[]wantErr{at(4, 21, "mask.union[0].block.size: 0 is out of range"), at(8, 29, "mask.union[2].intersect[1].dilated.stride: -2 is out of range")}},

	// not.
	{"not of a list", "name: a\nmask: {not: [{full: {}}]}\n",
		[]wantErr{at(2, 13, "mask.not: want one mask (a mapping)", "got a list")}},
	{"not null", "name: a\nmask: {not: }\n", []wantErr{at(2, 13, "mask.not: want one mask (a mapping)", "got nothing (null)")}},
	{"not empty", "name: a\nmask: {not: {}}\n", []wantErr{at(2, 13, "mask.not: empty mapping")}},
	{"not of two kinds", "name: a\nmask: {not: {full: {}, block: {size: 4}}}\n",
		[]wantErr{at(2, 24, "mask.not: two primitives in one map (full and block)")}},
	{"not operand error", "name: a\nmask: {not: {block: {size: 0}}}\n",
		[]wantErr{at(2, 28, "mask.not.block.size: 0 is out of range (at least 1)")}},
	{"document under not", "name: a\nmask: {intersect: [{not: {document: {}}}, {full: {}}]}\n",
		[]wantErr{at(2, 27, "mask: document may only be")}},

	// document placement.
	{"document in a union", "name: a\nmask: {union: [{document: {}}, {window: {size: 4}}]}\n",
		[]wantErr{at(2, 17, "mask: document may only be the whole mask or an operand of the top-level intersect")}},
	{"document under a union in the intersect", "name: a\nmask: {intersect: [{window: {size: 4}}, {union: [{document: {}}, {full: {}}]}]}\n",
		[]wantErr{at(2, 51, "mask: document may only be")}},
	{"document in a nested intersect", "name: a\nmask: {intersect: [{full: {}}, {intersect: [{document: {}}]}]}\n",
		[]wantErr{at(2, 46, "mask: document may only be")}},
	{"document in an extra mask's union", base + "masks: {d: {union: [{document: {}}]}}\n",
		[]wantErr{at(3, 22, "masks.d: document may only be")}},
	{"document in a shorthand position twice", "name: a\nmask: {union: [{document: {}}, {document: {}}]}\n",
		[]wantErr{at(2, 17, "mask: document may only be"), at(2, 33, "mask: document may only be")}},

	// Aliases.
	{"alias", lines("name: a", "mask: &m {window: {size: 4}}", "masks:", "  w: *m"),
		[]wantErr{at(4, 6, "aliases (*m) are not supported")}},
	{"alias as a mask name", lines("name: &n a", "mask: {full: {}}", "schedule: [mask, *n]"),
		[]wantErr{at(3, 18, "aliases (*n) are not supported")}},
	{"alias bomb", lines("name: a", "mask: {full: {}}", "masks:", "  x: &a {union: [{full: {}}, {full: {}}]}", "  y: &b {union: [*a, *a, *a]}", "  z: {union: [*b, *b, *b]}"),
		[]wantErr{at(5, 18, "aliases (*a)"), at(5, 22, "aliases (*a)"), at(5, 26, "aliases (*a)"),
			at(6, 15, "aliases (*b)"), at(6, 19, "aliases (*b)"), at(6, 23, "aliases (*b)")}},
	{"merge key", lines("name: a", "mask: {full: {}}", "masks:", "  b: &b {window: {size: 4}}", "  c:", "    <<: *b"),
		[]wantErr{at(6, 9, "aliases (*b)")}},

	// Integers.
	{"integer double-quoted", "name: a\nmask: {block: {size: \"256\"}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", `got the string "256"`)}},
	{"integer single-quoted", "name: a\nmask: {block: {size: '256'}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", `got the string "256"`)}},
	{"integer tagged and quoted", "name: a\nmask: {block: {size: !!int \"256\"}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer")}},
	{"integer tagged nonsense", "name: a\nmask: {block: {size: !!int a b}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", `"a b"`)}},
	{"float", "name: a\nmask: {block: {size: 2.5}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", "got the number 2.5")}},
	{"float with exponent", "name: a\nmask: {block: {size: 1e3}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", "got the number 1e3")}},
	{"float infinity", "name: a\nmask: {block: {size: .inf}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", "got the number .inf")}},
	{"float huge exponent", "name: a\nmask: {block: {size: 1e400}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer")}},
	{"negative", "name: a\nmask: {global: {tokens: -4}}\n",
		[]wantErr{at(2, 25, "mask.global.tokens: -4 is out of range (at least 1)")}},
	{"hexadecimal", "name: a\nmask: {block: {size: 0x100}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", "0x100")}},
	{"YAML 1.2 octal", "name: a\nmask: {block: {size: 0o100}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", "0o100")}},
	{"leading zero (YAML 1.1 octal)", "name: a\nmask: {block: {size: 0100}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", "0100")}},
	{"underscores", "name: a\nmask: {block: {size: 1_024}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", "1_024")}},
	{"binary", "name: a\nmask: {block: {size: 0b100}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want a decimal integer", "0b100")}},
	{"boolean as integer", "name: a\nmask: {block: {size: true}}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", "got the boolean true")}},
	{"null as integer", "name: a\nmask: {block: {size: }}\n",
		[]wantErr{at(2, 22, "mask.block.size: want an integer", "got nothing (null)")}},
	{"integer just over int32", "name: a\nmask: {block: {size: 2147483648}}\n",
		[]wantErr{at(2, 22, "mask.block.size: integer 2147483648 out of range (at most 2147483647)")}},
	{"integer over int64", "name: a\nmask: {block: {size: 9223372036854775808}}\n",
		[]wantErr{at(2, 22, "mask.block.size: integer 9223372036854775808 out of range")}},
	{"integer far over int64", "name: a\nmask: {block: {size: " + strings.Repeat("9", 400) + "}}\n",
		[]wantErr{at(2, 22, "mask.block.size: integer 9999999999", "out of range")}},
	{"negative overflow", "name: a\nmask: {block: {size: -9223372036854775809}}\n",
		[]wantErr{at(2, 22, "mask.block.size: integer -9223372036854775809 out of range")}},

	// Everything at once, in file order.
	{"several errors at once", lines(
		"name: My-Kernel",        // 1
		"mask:",                  // 2
		"  union:",               // 3
		"    - block: {size: 0}", // 4
		"    - bridge: {block: 8, targets: 9, sources: 8}", // 5
		"    - window: {size: 4, left: 2}",                 // 6
		"    - union: []",                                  // 7
		"    - document: {}",                               // 8
		"causal: yes",                                      // 9
		"head_dim: 4096",                                   // 10
		"schedule: [mask, nope]",                           // 11
		"masks:",                                           // 12
		"  full: {window: {size: 4}}",                      // 13
		"colour: red",                                      // 14
	), []wantErr{
		at(1, 7, "name:", "not a valid Go package name"),
		at(4, 21, "mask.union[0].block.size: 0 is out of range"),
		at(5, 35, "mask.union[1].bridge.targets: 9 is out of range (at most block = 8)"),
		at(6, 15, "mask.union[2].window: give size"),
		at(7, 14, "mask.union[3].union: empty union"),
		at(9, 9, "causal: want true or false"),
		at(10, 11, "head_dim: 4096 is not supported"),
		at(11, 18, `schedule: unknown entry "nope"`),
		at(13, 3, `masks: name "full" is reserved`),
		at(14, 1, `spec: unknown key "colour"`),
	}},
}

func TestParseErrors(t *testing.T) {
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			s, err := spec.Parse("t.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("parsed, want errors; mask %s", s.Mask)
			}
			if s != nil {
				t.Errorf("got a spec along with the error")
			}
			var list spec.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T %v, want a spec.ErrorList", err, err)
			}
			checkErrors(t, list, c.want)
			// The error text is one file:line:col: message per line.
			text := strings.Split(err.Error(), "\n")
			if len(text) != len(list) {
				t.Errorf("Error() has %d lines for %d errors:\n%s", len(text), len(list), err)
			}
			for k, l := range text {
				if k < len(list) {
					want := fmt.Sprintf("t.yaml:%d:%d: %s", list[k].Pos.Line, list[k].Pos.Col, list[k].Msg)
					if l != want {
						t.Errorf("Error() line %d = %q, want %q", k+1, l, want)
					}
				}
			}
		})
	}
}

func checkErrors(t *testing.T, list spec.ErrorList, want []wantErr) {
	t.Helper()
	if len(list) != len(want) {
		t.Errorf("got %d errors, want %d:\n%s", len(list), len(want), list)
	}
	for k := 0; k < min(len(list), len(want)); k++ {
		e, w := list[k], want[k]
		if e.Pos.File != "t.yaml" || e.Pos.Line != w.line || e.Pos.Col != w.col {
			t.Errorf("error %d at %s, want t.yaml:%d:%d (%s)", k, e.Pos, w.line, w.col, e.Msg)
		}
		for _, h := range w.has {
			if !strings.Contains(e.Msg, h) {
				t.Errorf("error %d %q does not contain %q", k, e.Msg, h)
			}
		}
	}
}

// TestParseErrorsNestedDepth: masks nest MaxDepth deep and no deeper; far
// deeper YAML is refused before the masks are looked at.
func TestParseErrorsNestedDepth(t *testing.T) {
	nest := func(levels int) string {
		return "name: a\nmask: " + strings.Repeat("{union: [", levels-1) + "{full: {}}" + strings.Repeat("]}", levels-1) + "\n"
	}
	s, err := spec.Parse("t.yaml", []byte(nest(spec.MaxDepth)))
	if err != nil {
		t.Fatalf("%d levels: %v", spec.MaxDepth, err)
	}
	d := 0
	for m := s.Mask; m != nil; d++ {
		if len(m.Args) == 0 {
			m = nil
		} else {
			m = m.Args[0]
		}
	}
	if d != spec.MaxDepth {
		t.Errorf("parsed %d levels, want %d", d, spec.MaxDepth)
	}

	// One level more: the error is at the innermost mask, named by its path.
	src := nest(spec.MaxDepth + 1)
	_, err = spec.Parse("t.yaml", []byte(src))
	col := 7 + spec.MaxDepth*len("{union: [")
	path := "mask" + strings.Repeat(".union[0]", spec.MaxDepth)
	checkList(t, err, []wantErr{at(2, col, path+": masks nested more than 64 deep")})

	// In block style, inside an extra mask.
	var b strings.Builder
	b.WriteString("name: a\nmask: {full: {}}\nmasks:\n  deep:\n")
	for k := 0; k < spec.MaxDepth; k++ {
		fmt.Fprintf(&b, "%sunion:\n%s- ", strings.Repeat("  ", 2*k+2), strings.Repeat("  ", 2*k+2))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%sfull: {}\n", strings.Repeat("  ", 2*spec.MaxDepth+2))
	_, err = spec.Parse("t.yaml", []byte(b.String()))
	path = "masks.deep" + strings.Repeat(".union[0]", spec.MaxDepth)
	checkList(t, err, []wantErr{at(5+2*spec.MaxDepth, 4*spec.MaxDepth+5, path+": masks nested more than 64 deep")})

	// Far deeper: refused as YAML nesting, once.
	_, err = spec.Parse("t.yaml", []byte(nest(1000)))
	checkList(t, err, []wantErr{at(2, 7+136*len("{union: ["), "spec nested too deeply")})
}

func checkList(t *testing.T, err error, want []wantErr) {
	t.Helper()
	var list spec.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T %v, want a spec.ErrorList", err, err)
	}
	checkErrors(t, list, want)
}

// exampleWant is what each example spec says, written with the
// constructors.
var exampleWant = map[string]struct {
	name     string
	mask     *spec.Mask
	headDim  int
	schedule []string
	masks    map[string]*spec.Mask
	causal   bool
}{
	"bigbird.yaml":  {"bigbird", spec.BigBird{Block: 64, Blocks: 16, Window: 3, Global: 1, Random: 2, Seed: 2020}.Mask(), 64, nil, nil, false},
	"block.yaml":    {"block", spec.Block(256), 128, nil, nil, true},
	"bridge.yaml":   {"bridge", spec.Union(spec.Block(256), spec.Bridge(256, 32, 32, 0)), 128, nil, nil, true},
	"causal.yaml":   {"causal", spec.Full(), 128, nil, nil, true},
	"chunked.yaml":  {"chunked", spec.Intersect(spec.Block(256), spec.Window(spec.MaxInt)), 128, nil, nil, true},
	"dilated.yaml":  {"dilated", spec.Dilated(8, 0), 128, nil, nil, true},
	"document.yaml": {"document", spec.Intersect(spec.Document(), spec.Union(spec.Global(2), spec.Window(512))), 64, nil, nil, true},
	"except.yaml":   {"except", spec.Not(spec.Window(64)), 64, nil, nil, true},
	"hetero.yaml":   {"hetero", spec.Block(128), 64, []string{"mask", "wide", "sparse"}, map[string]*spec.Mask{"wide": spec.Window(256), "sparse": spec.Dilated(16, 32)}, true},
	"hybrid.yaml":   {"hybrid", spec.Union(spec.Block(64), spec.Bridge(64, 8, 8, 0)), 64, []string{"mask", "mask", "mask", "full"}, nil, true},
	"longformer.yaml": {"longformer", spec.Union(spec.WindowLR(128, 128), spec.KeySet(0, 1, 1, 0), spec.KeySet(100, 101, 1, 0), spec.KeySet(128, 192, 1, 0),
		spec.QuerySet(0, 1, 1, 0), spec.QuerySet(100, 101, 1, 0), spec.QuerySet(128, 192, 1, 0)), 64, nil, nil, false},
	"neighborhood.yaml": {"neighborhood", spec.Neighborhood(32, 48, 7, 7, 2, 3, false, false), 64, nil, nil, false},
	"offsets.yaml":      {"offsets", spec.Union(spec.Intersect(spec.BlockAt(256, 100), spec.Window(spec.MaxInt)), spec.KeySet(0, 0, 64, 63)), 128, nil, nil, true},
	"prefix_lm.yaml":    {"prefixlm", spec.Union(spec.KeySet(0, 512, 1, 0), spec.Window(spec.MaxInt)), 128, nil, nil, false},
	"se_bridge.yaml":    {"sebridge", spec.Union(spec.Block(256), spec.Bridge(256, 32, 256, 0)), 128, nil, nil, true},
	"streaming.yaml":    {"streaming", spec.Union(spec.Global(4), spec.Window(1024)), 128, nil, nil, true},
	"window.yaml":       {"window", spec.Window(1024), 128, nil, nil, true},
}

func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

// TestParseExamples: every example parses; those listed above to exactly the
// masks they describe, and none keeps a shorthand.
func TestParseExamples(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range exampleFiles(t) {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if s.File != f || s.Mask == nil {
			t.Errorf("%s: File %q, Mask %v", f, s.File, s.Mask)
			continue
		}
		checkNormal(t, f, s.Mask)
		for _, n := range s.MaskNames() {
			checkNormal(t, f+" masks."+n, s.Masks[n])
		}
		w, ok := exampleWant[filepath.Base(f)]
		if !ok {
			continue
		}
		seen[filepath.Base(f)] = true
		if s.Name != w.name || s.HeadDim != w.headDim || s.Causal != w.causal {
			t.Errorf("%s: name %q head_dim %d causal %v, want %q %d %v", f, s.Name, s.HeadDim, s.Causal, w.name, w.headDim, w.causal)
		}
		if !s.Mask.Equal(w.mask) {
			t.Errorf("%s: mask %s, want %s", f, s.Mask, w.mask)
		}
		var sched []string
		for _, e := range s.Schedule {
			sched = append(sched, e.Name)
			if e.Pos.File != f || e.Pos.Line < 1 || e.Pos.Col < 1 {
				t.Errorf("%s: schedule entry %s at %s", f, e.Name, e.Pos)
			}
		}
		if fmt.Sprint(sched) != fmt.Sprint(w.schedule) {
			t.Errorf("%s: schedule %v, want %v", f, sched, w.schedule)
		}
		if len(s.Masks) != len(w.masks) {
			t.Errorf("%s: %d extra masks, want %d", f, len(s.Masks), len(w.masks))
		}
		for n, m := range w.masks {
			if got := s.Masks[n]; got == nil || !got.Equal(m) {
				t.Errorf("%s: masks.%s = %v, want %s", f, n, got, m)
			}
		}
		layers := s.Layers()
		if len(w.schedule) > 0 && len(layers) != len(w.schedule) || len(w.schedule) == 0 && len(layers) != 1 {
			t.Errorf("%s: %d layers for schedule %v", f, len(layers), w.schedule)
		}
		for _, l := range layers {
			if l.Mask == nil || l.Causal != s.Causal {
				t.Errorf("%s: layer %v", f, l)
			}
		}
	}
	for name := range exampleWant {
		if !seen[name] {
			t.Errorf("example %s missing", name)
		}
	}
}

// checkNormal: only normalized nodes, combinators non-empty, and the
// rendering names no shorthand.
func checkNormal(t *testing.T, what string, m *spec.Mask) {
	t.Helper()
	var walk func(m *spec.Mask) bool
	walk = func(m *spec.Mask) bool {
		if m == nil || m.Op >= spec.NumOps {
			return false
		}
		if m.Op.Combinator() != (len(m.Args) > 0) || m.Op == spec.OpNot && len(m.Args) != 1 {
			return false
		}
		for _, a := range m.Args {
			if !walk(a) {
				return false
			}
		}
		return true
	}
	if !walk(m) {
		t.Errorf("%s: mask is not normalized: %v", what, m)
	}
	str := m.String()
	for _, sh := range []string{"pbb", "se_bridge", "streaming", "strided", "sinks", "width"} {
		// as a key: a head parameter may be named sinks (a value)
		if strings.Contains(str, sh+":") {
			t.Errorf("%s: %s still names %s", what, str, sh)
		}
	}
}

// TestParsePrimitives: each primitive and combinator, in flow and block
// style, parses to its constructor.
func TestParsePrimitives(t *testing.T) {
	cases := []struct {
		src  string
		want *spec.Mask
	}{
		{"{full: {}}", spec.Full()},
		{"{full: }", spec.Full()},
		{"{document: {}}", spec.Document()},
		{"{window: {size: 1}}", spec.Window(1)},
		{"{window: {size: 1024}}", spec.Window(1024)},
		{"{window: {size: 2147483647}}", spec.Window(spec.MaxInt)},
		{"{window: {left: 3, right: 2}}", spec.WindowLR(3, 2)},
		{"{window: {left: 0, right: 0}}", spec.WindowLR(0, 0)},
		{"{window: {left: 7, right: 0}}", spec.Window(8)},
		{"{block: {size: 64}}", spec.Block(64)},
		{"{block: {size: 64, offset: 0}}", spec.Block(64)},
		{"{block: {size: 64, offset: 100}}", spec.BlockAt(64, 100)},
		{"{block: {offset: 2147483647, size: 1}}", spec.BlockAt(1, spec.MaxInt)},
		{"{block: {size: +64}}", spec.Block(64)},
		{"{bridge: {block: 64, targets: 8, sources: 16}}", spec.Bridge(64, 8, 16, 0)},
		{"{bridge: {block: 64, targets: 64, sources: 64, max_distance: 1}}", spec.Bridge(64, 64, 64, 1)},
		{"{bridge: {max_distance: 100, sources: 2, targets: 1, block: 4}}", spec.Bridge(4, 1, 2, 100)},
		{"{dilated: {stride: 4}}", spec.Dilated(4, 0)},
		{"{dilated: {stride: 4, size: 3}}", spec.Dilated(4, 3)},
		{"{global: {tokens: 4}}", spec.Global(4)},
		{"{queries: {below: 4}}", spec.QuerySet(0, 4, 1, 0)},
		{"{queries: {from: 4}}", spec.QuerySet(4, 0, 1, 0)},
		{"{keys: {from: 2, below: 9, stride: 3, phase: 2}}", spec.KeySet(2, 9, 3, 2)},
		{"{keys: {stride: 2}}", spec.KeySet(0, 0, 2, 0)},
		{"{keys: {stride: 1}}", spec.KeySet(0, 0, 1, 0)},
		{"{keys: {}}", spec.KeySet(0, 0, 1, 0)},
		{"{keys: {from: 7, below: 8, stride: 7}}", spec.KeySet(7, 8, 7, 0)},
		{"{union: [{block: {size: 4}}]}", spec.Union(spec.Block(4))},
		{"{not: {window: {size: 64}}}", spec.Not(spec.Window(64))},
		{"{not: {not: {full: {}}}}", spec.Not(spec.Not(spec.Full()))},
		{"{intersect: [{window: {size: 512}}, {not: {union: [{block: {size: 64}}, {keys: {below: 4}}]}}]}",
			spec.Intersect(spec.Window(512), spec.Not(spec.Union(spec.Block(64), spec.KeySet(0, 4, 1, 0))))},
		{"\n  not:\n    dilated: {stride: 2}\n", spec.Not(spec.Dilated(2, 0))},
		{"{intersect: [{document: {}}, {window: {size: 4}}, {global: {tokens: 1}}]}", spec.Intersect(spec.Document(), spec.Window(4), spec.Global(1))},
		{"{union: [{intersect: [{block: {size: 8}}, {dilated: {stride: 2}}]}, {union: [{full: {}}]}]}",
			spec.Union(spec.Intersect(spec.Block(8), spec.Dilated(2, 0)), spec.Union(spec.Full()))},
		{"\n  union:\n    - block:\n        size: 4\n    - window: {left: 1, right: 1}\n", spec.Union(spec.Block(4), spec.WindowLR(1, 1))},
		{"\n  bridge:\n    block: 8\n    targets: 2\n    sources: 3\n", spec.Bridge(8, 2, 3, 0)},
	}
	for _, c := range cases {
		s, err := spec.Parse("t.yaml", []byte("name: a\nmask: "+c.src+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if !s.Mask.Equal(c.want) {
			t.Errorf("%s: got %s, want %s", c.src, s.Mask, c.want)
		}
		if s.Mask.From != "" {
			t.Errorf("%s: From %q on a mask written out", c.src, s.Mask.From)
		}
	}
}

// TestParseShorthands: every shorthand lowers to the union of MASKS.md, in
// its order, wherever it stands.
func TestParseShorthands(t *testing.T) {
	cases := []struct {
		src  string
		from string
		want *spec.Mask
	}{
		{"{pbb: {block: 256, width: 32}}", "pbb", spec.Union(spec.Block(256), spec.Bridge(256, 32, 32, 0))},
		{"{pbb: {width: 4, block: 4}}", "pbb", spec.Union(spec.Block(4), spec.Bridge(4, 4, 4, 0))},
		{"{se_bridge: {block: 256, width: 32, sources: 256}}", "se_bridge", spec.Union(spec.Block(256), spec.Bridge(256, 32, 256, 0))},
		{"{se_bridge: {block: 64, width: 1, sources: 2}}", "se_bridge", spec.Union(spec.Block(64), spec.Bridge(64, 1, 2, 0))},
		{"{streaming: {sinks: 4, window: 1024}}", "streaming", spec.Union(spec.Global(4), spec.Window(1024))},
		{"{streaming: {sinks: 1, window: 1}}", "streaming", spec.Union(spec.Global(1), spec.Window(1))},
		{"{strided: {stride: 8}}", "strided", spec.Union(spec.Window(8), spec.Dilated(8, 0))},
		{"{strided: {stride: 1}}", "strided", spec.Union(spec.Window(1), spec.Dilated(1, 0))},
		{"{chunked: {size: 8192}}", "chunked", spec.Intersect(spec.Block(8192), spec.Window(spec.MaxInt))},
		{"{chunked: {size: 8192, offset: 17}}", "chunked", spec.Intersect(spec.BlockAt(8192, 17), spec.Window(spec.MaxInt))},
		{"{dilated: {stride: 2, phase: 0}}", "dilated", spec.KeySet(0, 0, 2, 0)},
		{"{global: {positions: [5]}}", "global", spec.KeySet(5, 6, 1, 0)},
		{"{global: {tokens: 4, rows: false}}", "global", spec.Global(4)},
		{"{global: {positions: [9, 3, 4, 5], ranges: [{from: 6, below: 8}, {from: 20, below: 30}]}}", "global",
			spec.Union(spec.KeySet(3, 8, 1, 0), spec.KeySet(9, 10, 1, 0), spec.KeySet(20, 30, 1, 0))},
		{"{global: {tokens: 2, positions: [10], rows: true}}", "global",
			spec.Union(spec.Global(2), spec.KeySet(10, 11, 1, 0), spec.QuerySet(0, 2, 1, 0), spec.QuerySet(10, 11, 1, 0))},
		{"{global: {stride: 64, phase: 63, rows: true}}", "global", spec.Union(spec.KeySet(0, 0, 64, 63), spec.QuerySet(0, 0, 64, 63))},
		{"{global: {ranges: [{from: 0, below: 4}, {below: 9, from: 4}], positions: [9]}}", "global", spec.KeySet(0, 10, 1, 0)},
		{"{global: {ranges: [{from: 2, below: 10}], positions: [5, 2, 12]}}", "global", spec.Union(spec.KeySet(2, 10, 1, 0), spec.KeySet(12, 13, 1, 0))},
		{"{longformer: {window: 4, positions: [0]}}", "longformer", spec.Union(spec.WindowLR(2, 2), spec.KeySet(0, 1, 1, 0), spec.QuerySet(0, 1, 1, 0))},
		{"{longformer: {window: 512}}", "longformer", spec.Union(spec.WindowLR(256, 256))},
		{"{longformer: {window: 8, tokens: 1, stride: 100}}", "longformer",
			spec.Union(spec.WindowLR(4, 4), spec.Global(1), spec.KeySet(0, 0, 100, 0), spec.QuerySet(0, 1, 1, 0), spec.QuerySet(0, 0, 100, 0))},
		{"{dilated: {stride: 64, phase: 63}}", "dilated", spec.KeySet(0, 0, 64, 63)},
		{"{dilated: {phase: 0, stride: 1}}", "dilated", spec.KeySet(0, 0, 1, 0)},
	}
	for _, c := range cases {
		s, err := spec.Parse("t.yaml", []byte("name: a\nmask: "+c.src+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if !s.Mask.Equal(c.want) {
			t.Errorf("%s: got %s, want %s", c.src, s.Mask, c.want)
		}
		checkNormal(t, c.src, s.Mask)
		// Provenance: the union and its operands remember the shorthand
		// and where it was written.
		if s.Mask.From != c.from || s.Mask.Pos != (spec.Pos{File: "t.yaml", Line: 2, Col: 8}) {
			t.Errorf("%s: From %q at %s, want %q at t.yaml:2:8", c.src, s.Mask.From, s.Mask.Pos, c.from)
		}
		for _, a := range s.Mask.Args {
			if a.From != c.from {
				t.Errorf("%s: operand %s From %q", c.src, a, a.From)
			}
		}

		// Nested in a combinator, in an intersect with document, and in
		// an extra mask.
		nested := fmt.Sprintf("name: a\nmask: {intersect: [{document: {}}, {union: [{full: {}}, %s]}]}\nmasks: {x: %s}\nschedule: [x, mask]\n", c.src, c.src)
		s, err = spec.Parse("t.yaml", []byte(nested))
		if err != nil {
			t.Errorf("%s: %v", nested, err)
			continue
		}
		want := spec.Intersect(spec.Document(), spec.Union(spec.Full(), c.want))
		if !s.Mask.Equal(want) || !s.Masks["x"].Equal(c.want) {
			t.Errorf("%s: got %s and %s, want %s and %s", nested, s.Mask, s.Masks["x"], want, c.want)
		}
		checkNormal(t, nested, s.Mask)
		checkNormal(t, nested, s.Masks["x"])
	}
}

// TestParsePrefixLM: prefix_lm lowers to keys below the prefix united
// with the causal window, under causal: false (the only flag it takes).
func TestParsePrefixLM(t *testing.T) {
	s, err := spec.Parse("t.yaml", []byte("name: a\ncausal: false\nmask: {prefix_lm: {prefix: 64}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := spec.Union(spec.KeySet(0, 64, 1, 0), spec.Window(spec.MaxInt))
	if !s.Mask.Equal(want) || s.Mask.From != "prefix_lm" || s.Causal {
		t.Errorf("got %s (from %q, causal %v), want %s", s.Mask, s.Mask.From, s.Causal, want)
	}
	checkNormal(t, "prefix_lm", s.Mask)
}

// TestParseDefaults: causal true, head_dim 128, no schedule, no extra masks.
func TestParseDefaults(t *testing.T) {
	s, err := spec.Parse("t.yaml", []byte("name: a\nmask: {full: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Causal || s.HeadDim != 128 || len(s.Schedule) != 0 || len(s.Masks) != 0 || s.Name != "a" || s.File != "t.yaml" {
		t.Errorf("defaults: %+v", s)
	}
	if l := s.Layers(); len(l) != 1 || !l[0].Mask.Equal(spec.Full()) || !l[0].Causal {
		t.Errorf("layers %v", l)
	}
	if p := s.LayerAt(5); !p.Causal || !p.Mask.Equal(spec.Full()) {
		t.Errorf("LayerAt(5) = %v", p)
	}

	for _, c := range []struct {
		src      string
		causal   bool
		headDim  int
		headDimV int
	}{
		{"causal: false", false, 128, 128},
		{"causal: False", false, 128, 128},
		{"causal: FALSE", false, 128, 128},
		{"causal: true", true, 128, 128},
		{"causal: True", true, 128, 128},
		{"causal: TRUE", true, 128, 128},
		{"head_dim: 64", true, 64, 64},
		{"head_dim: {qk: 192, v: 128}", true, 192, 128},
		{"head_dim: 128\ncausal: false", false, 128, 128},
	} {
		s, err := spec.Parse("t.yaml", []byte("name: a\nmask: {full: {}}\n"+c.src+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if s.Causal != c.causal || s.HeadDim != c.headDim || s.HeadDimV != c.headDimV {
			t.Errorf("%s: causal %v head_dim %d, %d", c.src, s.Causal, s.HeadDim, s.HeadDimV)
		}
	}

	// A schedule resolves every entry; extra masks keep their names.
	s, err = spec.Parse("t.yaml", []byte(lines(
		"name: hetero2",
		"mask: {block: {size: 4}}",
		"causal: false",
		"schedule: [mask, full, w, mask]",
		"masks:",
		"  w: {window: {size: 3}}",
		"  unused: {global: {tokens: 2}}",
	)))
	if err != nil {
		t.Fatal(err)
	}
	want := []*spec.Mask{spec.Block(4), spec.Full(), spec.Window(3), spec.Block(4)}
	l := s.Layers()
	if len(l) != len(want) {
		t.Fatalf("layers %v", l)
	}
	for k := range l {
		if !l[k].Mask.Equal(want[k]) || l[k].Causal {
			t.Errorf("layer %d = %v, want %s, not causal", k, l[k], want[k])
		}
		if p := s.LayerAt(k + 1 + 4); !p.Mask.Equal(want[k]) {
			t.Errorf("LayerAt(%d) = %v", k+5, p)
		}
	}
	if s.Schedule[2].Pos != (spec.Pos{File: "t.yaml", Line: 4, Col: 24}) {
		t.Errorf("schedule entry at %s", s.Schedule[2].Pos)
	}
	if fmt.Sprint(s.MaskNames()) != "[unused w]" {
		t.Errorf("mask names %v", s.MaskNames())
	}
}

// reparse parses a mask rendered by String back, as a whole spec.
func reparse(m *spec.Mask, causal bool, params ...spec.HeadParam) (*spec.Spec, error) {
	src := fmt.Sprintf("name: rt\ncausal: %v\n%smask: %s\n", causal, spec.HeadParamsYAML(params), m)
	return spec.Parse("rt.yaml", []byte(src))
}

// TestParseRoundTrip: String renders a mask that parses back to an Equal one,
// for every example, every shorthand and random masks.
func TestParseRoundTrip(t *testing.T) {
	var masks []*spec.Mask
	params := map[*spec.Mask][]spec.HeadParam{} // of the masks that take head parameters
	for _, f := range exampleFiles(t) {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		masks = append(masks, s.Mask)
		params[s.Mask] = s.Pattern().Params
		for _, n := range s.MaskNames() {
			masks = append(masks, s.Masks[n])
		}
	}
	masks = append(masks,
		spec.Window(spec.MaxInt), spec.WindowLR(spec.MaxInt-1, 0), spec.WindowLR(0, spec.MaxInt),
		spec.Bridge(spec.MaxInt, spec.MaxInt, 1, spec.MaxInt), spec.Dilated(spec.MaxInt, spec.MaxInt),
		spec.Global(spec.MaxInt), spec.Block(spec.MaxInt),
		spec.Intersect(spec.Document(), spec.Window(3)), spec.Document(),
	)
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		masks = append(masks, spectest.Mask(r, 1+r.IntN(300), 1+r.IntN(5)))
	}
	for _, m := range masks {
		for _, causal := range []bool{true, false} {
			s, err := reparse(m, causal, params[m]...)
			if err != nil {
				t.Errorf("%s: %v", m, err)
				continue
			}
			if !s.Mask.Equal(m) || s.Causal != causal {
				t.Errorf("round trip of %s gave %s", m, s.Mask)
			}
			if s.Mask.String() != m.String() {
				t.Errorf("String of %s changed to %s", m, s.Mask)
			}
		}
	}
}

// TestParseFile: a missing file is an os error, not a positioned one.
func TestParseFile(t *testing.T) {
	_, err := spec.ParseFile(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("name: a\nmask: {block: {size: 0}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = spec.ParseFile(path)
	if want := path + ":2:22: mask.block.size: 0 is out of range (at least 1)"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestParseLargeInputs: huge or deeply nested inputs end in an error (or a
// spec) promptly, without exhausting the stack. The times are logged; the
// test only needs each to finish.
func TestParseLargeInputs(t *testing.T) {
	var deepBlock, deepSeq strings.Builder
	for k := 0; k < 3000; k++ {
		fmt.Fprintf(&deepBlock, "%sa:\n", strings.Repeat(" ", k))
		fmt.Fprintf(&deepSeq, "%s-\n", strings.Repeat(" ", k))
	}
	cases := []struct {
		name string
		src  string
		ok   bool
	}{
		{"1 MB flow sequence", "[" + strings.Repeat("1,", 500_000) + "1]", false},
		// Unions past MaxPrimitives are refused once parsed (TestMaxPrimitives).
		{"1 MB flow sequence as a union", "name: a\nmask: {union: [" + strings.Repeat("{full: {}},", 50_000) + "{full: {}}]}\n", false},
		{"100k open brackets", strings.Repeat("[", 100_000), false},
		{"100k open mappings", strings.Repeat("{a: ", 100_000), false},
		{"9k closed brackets", strings.Repeat("[", 9000) + strings.Repeat("]", 9000), false},
		{"9k nested unions", "name: a\nmask: " + strings.Repeat("{union: [", 4000) + "{full: {}}" + strings.Repeat("]}", 4000) + "\n", false},
		{"deep block mappings", deepBlock.String(), false},
		{"deep block sequences", deepSeq.String(), false},
		{"100k unknown keys", base + strings.Repeat("x: 1\n", 100_000), false},
		{"1 MB name", "name: " + strings.Repeat("a", 1<<20) + "\nmask: {full: {}}\n", true},
		{"1 MB key", "name: a\nmask: {full: {}}\n" + strings.Repeat("k", 1<<20) + ": 1\n", false},
		{"1 MB integer", "name: a\nmask: {block: {size: " + strings.Repeat("7", 1<<20) + "}}\n", false},
		{"1M newlines", strings.Repeat("\n", 1<<20) + "x", false},
		{"syntax error after 100k lines", base + strings.Repeat("# c\n", 100_000) + "[\n", false},
		{"syntax error before 30k lines", "name: [\n" + strings.Repeat("a: 1\n", 30_000), false},
		{"50k documents", strings.Repeat("---\nname: a\n", 50_000), false},
		{"10k aliases", "name: &a a\nmask: {full: {}}\nschedule: [" + strings.Repeat("*a, ", 10_000) + "mask]\n", false},
		{"64k-wide union of windows", "name: a\nmask:\n  union:\n" + strings.Repeat("    - window: {size: 7}\n", 1<<16), false},
		{"1024-wide union of windows", "name: a\nmask:\n  union:\n" + strings.Repeat("    - window: {size: 7}\n", spec.MaxPrimitives), true},
	}
	for _, c := range cases {
		t0 := time.Now()
		s, err := spec.Parse("big.yaml", []byte(c.src))
		dt := time.Since(t0)
		msg := fmt.Sprint(err)
		if k := strings.IndexByte(msg, '\n'); k >= 0 {
			msg = msg[:k] + " ..."
		}
		t.Logf("%-32s %8d bytes  %12v  %.120s", c.name, len(c.src), dt, msg)
		if c.ok != (err == nil) || c.ok != (s != nil) {
			t.Errorf("%s: spec %v, error %v", c.name, s != nil, err != nil)
		}
		if err != nil {
			var list spec.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Errorf("%s: error %T", c.name, err)
			}
		}
	}
}
