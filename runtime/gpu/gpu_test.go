package gpu

import (
	"reflect"
	"strings"
	"testing"
)

// pkgKernels are forward kernels as a generated package lists them: sm_80
// for both element types, an sm_90a one (OptIn, with tensor maps), and a
// backward kernel that must never be picked for the forward.
func pkgKernels() []Kernel {
	maps := []TensorMapLayout{
		{Param: "tmap_q", Tensor: "q", Cols: 128, BoxCols: 64, BoxRows: 128, Swizzle: 128},
		{Param: "tmap_k", Tensor: "k", Cols: 128, BoxCols: 64, BoxRows: 64, Swizzle: 128},
		{Param: "tmap_v", Tensor: "v", Cols: 128, BoxCols: 64, BoxRows: 64, Swizzle: 128},
	}
	return []Kernel{
		{Target: "sm_80", Elem: "bf16", Name: "fwd80", TileQ: 64, Threads: 128, Stride: 1},
		{Target: "sm_80", Elem: "bf16", Kind: KindBwdDQ, Name: "dq80", TileQ: 64, TileK: 64, Threads: 128, Stride: 1},
		{Target: "sm_80", Elem: "f16", Name: "fwd80h", TileQ: 64, Threads: 128, Stride: 1},
		{Target: "sm_90a", Elem: "bf16", Name: "fwd90a", TileQ: 128, Threads: 256, Stride: 1, TensorMaps: maps, OptIn: true},
	}
}

func TestCanRun(t *testing.T) {
	for _, c := range []struct {
		target       string
		major, minor int
		want         string // "" when it runs
	}{
		{"sm_80", 8, 0, ""},
		{"sm_80", 8, 6, ""},
		{"sm_80", 9, 0, ""},
		{"sm_80", 10, 0, ""},
		{"sm_80", 7, 5, "needs compute capability 8.0 or later"},
		{"sm_90", 8, 9, "needs compute capability 9.0 or later"},
		{"sm_90a", 9, 0, ""},
		{"sm_90a", 8, 0, "runs only on devices of compute capability 9.0; this one is 8.0"},
		{"sm_90a", 10, 0, "runs only on devices of compute capability 9.0"},
		{"sm90", 9, 0, "want sm_XY"},
		{"sm_9x", 9, 0, "want sm_XY"},
		{"sm_80", 0, 0, "not one a device reports"},
	} {
		err := CanRun(c.target, c.major, c.minor)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CanRun(%s, %d.%d) = %v, want %q", c.target, c.major, c.minor, err, c.want)
		}
	}
}

// TestSelect: by default every device gets the sm_80 kernel, a 9.0 device
// too while the sm_90a one is OptIn; asked for by target, a 9.0 device gets
// the sm_90a kernel and an 8.0 device an error naming both capabilities;
// once verified (OptIn false) the sm_90a kernel is the 9.0 default and
// 8.0 devices still get sm_80.
func TestSelect(t *testing.T) {
	ks := pkgKernels()
	name := func(major, minor int, elem, target string) string {
		t.Helper()
		k, err := Select(ks, KindForward, elem, major, minor, target)
		if err != nil {
			return "error: " + err.Error()
		}
		return k.Name
	}
	for _, c := range []struct {
		major, minor int
		elem, target string
		want         string
	}{
		{8, 0, "bf16", "", "fwd80"},
		{8, 6, "bf16", "", "fwd80"},
		{9, 0, "bf16", "", "fwd80"},
		{9, 0, "f16", "", "fwd80h"},
		{9, 0, "bf16", "sm_90a", "fwd90a"},
		{8, 0, "bf16", "sm_90a", "error: gpu: an sm_90a kernel runs only on devices of compute capability 9.0; this one is 8.0"},
		{9, 0, "f16", "sm_90a", "error: gpu: no sm_90a forward kernel for f16"},
		{7, 5, "bf16", "", "error: gpu: no forward kernel for bf16 runs on compute capability 7.5 (an sm_80 kernel needs"},
		{9, 0, "bf16", "90a", "error: gpu: target \"90a\""},
	} {
		if got := name(c.major, c.minor, c.elem, c.target); !strings.HasPrefix(got, c.want) {
			t.Errorf("Select(%d.%d, %s, %q) = %s, want %s", c.major, c.minor, c.elem, c.target, got, c.want)
		}
	}
	if got := name(7, 5, "bf16", ""); !strings.Contains(got, "sm_90a only when asked for") || !strings.Contains(got, "8.0 or later") {
		t.Errorf("no kernel for 7.5: %s, want the reasons", got)
	}
	ks[3].OptIn = false
	if got := name(9, 0, "bf16", ""); got != "fwd90a" {
		t.Errorf("verified sm_90a on 9.0: %s", got)
	}
	if got := name(8, 9, "bf16", ""); got != "fwd80" {
		t.Errorf("verified sm_90a, device 8.9: %s", got)
	}
	if got, err := Select(ks, KindBwdDQ, "bf16", 9, 0, ""); err != nil || got.Name != "dq80" {
		t.Errorf("backward dq on 9.0: %v %v", got.Name, err)
	}
}

// TestTensorMapsOf checks the maps of a call against the layout written
// out by hand (rank 4, or rank 5 with the residue class), and the
// refusals.
func TestTensorMapsOf(t *testing.T) {
	k := pkgKernels()[3]
	tms, err := k.TensorMapsOf(2, 4, 2, 100, 300, 1<<20, 2<<20, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []TensorMap{
		{Param: "tmap_q", Tensor: "q", Global: 1 << 20, ElemSize: 2, Dims: []uint64{128, 100, 4, 2}, Strides: []uint64{256, 100 * 256, 4 * 100 * 256}, Box: []uint32{64, 128, 1, 1}, Swizzle: 128},
		{Param: "tmap_k", Tensor: "k", Global: 2 << 20, ElemSize: 2, Dims: []uint64{128, 300, 2, 2}, Strides: []uint64{256, 300 * 256, 2 * 300 * 256}, Box: []uint32{64, 64, 1, 1}, Swizzle: 128},
		{Param: "tmap_v", Tensor: "v", Global: 3 << 20, ElemSize: 2, Dims: []uint64{128, 300, 2, 2}, Strides: []uint64{256, 300 * 256, 2 * 300 * 256}, Box: []uint32{64, 64, 1, 1}, Swizzle: 128},
	}
	if len(tms) != len(want) {
		t.Fatalf("%d maps", len(tms))
	}
	for x := range want {
		if !reflect.DeepEqual(tms[x], want[x]) {
			t.Errorf("map %d: %+v, want %+v", x, tms[x], want[x])
		}
	}
	// BSHD and a packed QKV buffer: the head stride below the pos stride
	bshd := Layout{Q: Strides{Batch: 100 * 4 * 128, Head: 128, Pos: 4 * 128}, K: Strides{Batch: 300 * 2 * 128, Head: 128, Pos: 2 * 128}}
	bshd.V = bshd.K
	tms, err = k.TensorMapsWith(2, 4, 2, 100, 300, 1<<20, 2<<20, 3<<20, bshd)
	if err != nil {
		t.Fatal(err)
	}
	if q := tms[0]; !reflect.DeepEqual(q.Dims, []uint64{128, 100, 4, 2}) || !reflect.DeepEqual(q.Strides, []uint64{4 * 256, 256, 100 * 4 * 256}) {
		t.Errorf("BSHD map of q: %+v", q)
	}
	w := (4 + 2*2) * 128
	in := Strides{Batch: 300 * w, Head: 128, Pos: w}
	tms, err = k.TensorMapsWith(2, 4, 2, 300, 300, 1<<20, 1<<20+2*4*128, 1<<20+2*6*128, Layout{Q: in, K: in, V: in})
	if err != nil {
		t.Fatal(err)
	}
	if v := tms[2]; v.Global != 1<<20+2*6*128 || !reflect.DeepEqual(v.Strides, []uint64{2 * uint64(w), 256, 2 * 300 * uint64(w)}) {
		t.Errorf("packed map of v: %+v", v)
	}
	for _, c := range []struct {
		what string
		ly   Layout
		q    uint64
		want string
	}{
		{"a head stride of 4 elements", Layout{Q: Strides{Batch: 100 * 4 * 128, Head: 4, Pos: 4 * 128}}, 1 << 20, "head stride of 4 elements"},
		{"a pos stride of 132 elements", Layout{K: Strides{Batch: 2 * 300 * 132, Head: 300 * 132, Pos: 132}}, 1 << 20, "pos stride of 132"},
		{"a broadcast head", Layout{K: Strides{Batch: 300 * 128, Head: 0, Pos: 128}}, 1 << 20, "head stride of 0"},
		{"rows overlapping", Layout{V: Strides{Batch: 2 * 300 * 64, Head: 300 * 64, Pos: 64}}, 1 << 20, "at least the row's 128"},
		{"a negative stride", Layout{V: Strides{Batch: -1, Head: 300 * 128, Pos: 128}}, 1 << 20, "negative"},
		{"a stride of 2^39 elements", Layout{Q: Strides{Batch: 1 << 39, Head: 100 * 128, Pos: 128}}, 1 << 20, "below 2^40"},
		{"q unaligned", Layout{}, 1<<20 + 8, "16-byte aligned"},
	} {
		if _, err := k.TensorMapsWith(2, 4, 2, 100, 300, c.q, 2<<20, 3<<20, c.ly); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.want)
		}
	}
	// an axis of one row takes any stride
	if _, err := k.TensorMapsWith(1, 1, 1, 100, 300, 1<<20, 2<<20, 3<<20, Layout{Q: Strides{Batch: 0, Head: 3, Pos: 128}}); err != nil {
		t.Errorf("batch and heads of one row with strides 0 and 3: %v", err)
	}
	k.Stride = 3
	tms, err = k.TensorMapsOf(1, 2, 1, 99, 300, 1<<20, 2<<20, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if q := tms[0]; !reflect.DeepEqual(q.Dims, []uint64{128, 3, 99 / 3, 2, 1}) || !reflect.DeepEqual(q.Strides, []uint64{256, 3 * 256, 99 * 256, 2 * 99 * 256}) || !reflect.DeepEqual(q.Box, []uint32{64, 1, 128, 1, 1}) {
		t.Errorf("residue map of q: %+v", q)
	}
	if _, err := k.TensorMapsOf(1, 2, 1, 100, 300, 1<<20, 2<<20, 3<<20); err == nil || !strings.Contains(err.Error(), "multiples of the stride") {
		t.Errorf("seq_q 100 with stride 3: %v", err)
	}
	if _, _, _, err := k.Geometry(1, 2, 1, 99, 301); err == nil || !strings.Contains(err.Error(), "multiples of the stride") {
		t.Errorf("Geometry, seq_k 301 with stride 3: %v", err)
	}
	if _, _, _, err := pkgKernels()[0].Geometry(1, 2, 1, 100, 301); err != nil {
		t.Errorf("a kernel without tensor maps refused a shape: %v", err)
	}
	if tms, err := pkgKernels()[0].TensorMapsOf(1, 1, 1, 1, 1, 1, 2, 3); tms != nil || err != nil {
		t.Errorf("a kernel without tensor maps: %v %v", tms, err)
	}
	k = pkgKernels()[3]
	k.TensorMaps[1].Tensor = "x"
	if _, err := k.TensorMapsOf(1, 1, 1, 1, 1, 1<<20, 2<<20, 3<<20); err == nil || !strings.Contains(err.Error(), `unknown tensor "x"`) {
		t.Errorf("unknown tensor: %v", err)
	}
	if _, err := k.TensorMapsOf(0, 1, 1, 1, 1, 1, 2, 3); err == nil {
		t.Error("batch 0 accepted")
	}
}

// TestPersistentGrid: a forward kernel that takes the batch parameter is
// persistent; Geometry gives it one CTA per work item (query tiles x
// heads_q x batch x stride) along x, ResidentGrid at most one per
// multiprocessor and at least one; other kernels keep their grids.
func TestPersistentGrid(t *testing.T) {
	k := pkgKernels()[3]
	if k.Persistent() {
		t.Fatal("a kernel without the batch parameter is persistent")
	}
	k.Params = [][3]string{{"o", "u64", ""}, {PersistentParam, "u32", ""}}
	if !k.Persistent() {
		t.Fatal("a forward kernel with the batch parameter is not persistent")
	}
	for _, c := range []struct {
		stride, batch, hq, sq, sk int
		items                     int
	}{
		{1, 2, 4, 300, 500, 3 * 4 * 2},
		{1, 1, 1, 1, 9, 1},
		{4, 3, 2, 1024, 1024, 2 * 2 * 3 * 4}, // 256 queries per class: 2 tiles
	} {
		k.Stride = c.stride
		grid, block, _, err := k.Geometry(c.batch, c.hq, 1, c.sq, c.sk)
		if err != nil {
			t.Fatal(err)
		}
		if grid != [3]int{c.items, 1, 1} || block != [3]int{256, 1, 1} {
			t.Errorf("%+v: grid %v, block %v", c, grid, block)
		}
		for _, sms := range []int{0, 1, 5, 132} {
			want := max(1, min(c.items, sms*PersistentCTAsPerSM))
			if g := k.ResidentGrid(grid, sms); g != [3]int{want, 1, 1} {
				t.Errorf("%+v on %d multiprocessors: grid %v, want %d CTAs", c, sms, g, want)
			}
		}
	}
	k.Stride = 1
	if _, _, _, err := k.Geometry(65535, 65535, 1, 1<<20, 1<<20); err == nil || !strings.Contains(err.Error(), "work items") {
		t.Errorf("2^45 work items: %v", err)
	}
	dq := pkgKernels()[1]
	dq.Params = k.Params
	if dq.Persistent() || dq.ResidentGrid([3]int{7, 2, 3}, 1) != [3]int{7, 2, 3} {
		t.Error("a backward kernel with a batch parameter is persistent")
	}
}

// TestGeometryAtPositions: seq_q > seq_k is refused by Geometry and by
// GeometryAt without positions, and by GeometryAt with positions for a
// kernel that takes none; with positions a kernel taking q_pos gets a
// grid whose query tiles cover every class's ceil(seq_q/stride) rows
// (plain and persistent), and calls with seq_q <= seq_k keep their grids.
func TestGeometryAtPositions(t *testing.T) {
	k := pkgKernels()[0]
	if _, _, _, err := k.Geometry(1, 2, 1, 200, 50); err == nil || !strings.Contains(err.Error(), "exceeds seq_k") {
		t.Errorf("Geometry, seq_q > seq_k: %v", err)
	}
	if _, _, _, err := k.GeometryAt(1, 2, 1, 200, 50, true); err == nil || !strings.Contains(err.Error(), "takes no positions") {
		t.Errorf("GeometryAt with positions, a kernel without q_pos: %v", err)
	}
	k.Params = append(k.Params, [3]string{QPosParam, "u64", ""})
	for _, c := range []struct{ stride, sq, sk, tiles int }{{1, 200, 50, 4}, {3, 200, 50, 2}, {3, 100, 301, 1}, {8, 65, 65, 1}} {
		k.Stride = c.stride
		plain, _, _, err := k.Geometry(2, 2, 1, min(c.sq, c.sk), c.sk)
		if err != nil {
			t.Fatal(err)
		}
		grid, _, _, err := k.GeometryAt(2, 2, 1, c.sq, c.sk, true)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if grid != [3]int{c.tiles, 2, 2 * c.stride} {
			t.Errorf("%+v: grid %v, want %d query tiles", c, grid, c.tiles)
		}
		if c.sq <= c.sk && plain != grid {
			t.Errorf("%+v: positions changed the grid %v to %v", c, plain, grid)
		}
	}
	if _, _, _, err := k.GeometryAt(1, 1, 1, MaxSeq, 10, true); err == nil || !strings.Contains(err.Error(), "32-bit positions") {
		t.Errorf("seq_q = MaxSeq: %v", err)
	}
	p := pkgKernels()[3]
	p.Params = [][3]string{{"o", "u64", ""}, {QPosParam, "u64", ""}, {PersistentParam, "u32", ""}}
	grid, _, _, err := p.GeometryAt(3, 2, 1, 300, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if grid != [3]int{3 * 2 * 3, 1, 1} {
		t.Errorf("persistent, seq_q 300 > seq_k 100: grid %v, want %d items", grid, 3*2*3)
	}
}
