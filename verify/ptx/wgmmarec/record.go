package wgmmarec

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// File names of the recordings (in a directory of goldens, such as
// verify/ptx/testdata/h200).
const (
	WgmmaFileName = "wgmma.json.gz"
	CopyFileName  = "tensorcopy.json.gz"
)

// WgmmaFile is the content of wgmma.json.gz.
type WgmmaFile struct {
	Instruction string       `json:"instruction"`
	Device      string       `json:"device"`
	Layout      string       `json:"layout"`
	Cases       []*WgmmaCase `json:"cases"`
}

// WgmmaCase is one wgmma.mma_async by one warpgroup: its inputs exactly as
// the kernel received them, and what the device returned.
type WgmmaCase struct {
	Name    string `json:"name"`
	Type    string `json:"type"`    // bf16 or f16
	N       int    `json:"n"`       // the instruction's N
	A       string `json:"a"`       // desc-K, desc-MN or regs
	BMN     bool   `json:"b_mn"`    // imm-trans-b = 1
	NegA    bool   `json:"neg_a"`   // imm-scale-a = -1
	NegB    bool   `json:"neg_b"`   // imm-scale-b = -1
	ScaleD  uint32 `json:"scale_d"` // 0 or 1
	Swizzle string `json:"swizzle"` // of both descriptors: none, 32B, 64B, 128B
	Family  string `json:"family"`  // how the values were drawn
	// Image is the shared-memory image, little-endian words, placed at a
	// 1024-byte aligned shared address; its length in bytes is a multiple
	// of 2048.
	Image []uint32 `json:"image"`
	// DescA and DescB are the matrix descriptors with start addresses
	// relative to the image (the kernel adds the image's address >> 4).
	DescA string   `json:"desc_a,omitempty"`
	DescB string   `json:"desc_b"`
	ARegs []uint32 `json:"a_regs,omitempty"` // A in registers: thread t's 4 registers at 4t
	C     []uint32 `json:"c"`                // input accumulators: thread t's N/2 registers at t*N/2
	// Fill is how many bytes from the image's start the kernel writes: the
	// image, then padWord's pattern (so that a misread past the image reads
	// defined values).
	Fill int `json:"fill"`

	// Recorded: the image's shared address and the absolute descriptors
	// the kernel passed, and the output accumulators (layout of C).
	Base      uint32   `json:"base"`
	DescAUsed string   `json:"desc_a_used,omitempty"`
	DescBUsed string   `json:"desc_b_used"`
	D         []uint32 `json:"d"`
}

// Variant is the kernel the case runs.
func (c *WgmmaCase) Variant() Variant {
	return Variant{Type: c.Type, N: c.N, A: c.A, BMN: c.BMN, NegA: c.NegA, NegB: c.NegB}
}

// inputs returns a copy of the case without its recorded outputs.
func (c *WgmmaCase) inputs() *WgmmaCase {
	x := *c
	x.Base, x.DescAUsed, x.DescBUsed, x.D = 0, "", "", nil
	return &x
}

func (c *WgmmaCase) check() error {
	v := c.Variant()
	if err := v.check(); err != nil {
		return err
	}
	switch {
	case c.ScaleD > 1:
		return fmt.Errorf("scale-d %d", c.ScaleD)
	case len(c.Image) == 0 || len(c.Image)%512 != 0:
		return fmt.Errorf("image of %d words: want a positive multiple of 512 (2048 bytes)", len(c.Image))
	case len(c.C) != 64*c.N:
		return fmt.Errorf("%d accumulators: want 128 x %d", len(c.C), c.N/2)
	case c.A == ARegs && len(c.ARegs) != 512:
		return fmt.Errorf("%d A registers: want 128 x 4", len(c.ARegs))
	case c.A != ARegs && c.DescA == "":
		return fmt.Errorf("A from shared memory without desc_a")
	case c.Fill < 4*len(c.Image) || c.Fill%2048 != 0 || c.Fill+1024 > maxDynShared:
		return fmt.Errorf("fill %d: want a multiple of 2048 from the image's %d bytes to %d", c.Fill, 4*len(c.Image), maxDynShared-1024)
	}
	if _, err := parseHex(c.DescB); err != nil {
		return err
	}
	if c.A != ARegs {
		if _, err := parseHex(c.DescA); err != nil {
			return err
		}
	}
	return nil
}

func parseHex(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("descriptor %q: %v", s, err)
	}
	return v, nil
}

func words(w []uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func fromBytes(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// upload allocates and writes.
func upload(b Backend, p []byte) (uint64, error) {
	a, err := b.Alloc(len(p))
	if err != nil {
		return 0, err
	}
	return a, b.Write(a, p)
}

// runWgmma runs one case on b (whose module of wgmma kernels is loaded)
// and fills in its recorded fields.
func runWgmma(b Backend, c *WgmmaCase) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("%s: %v", c.Name, err)
	}
	defer b.Reset()
	var da uint64
	if c.A != ARegs {
		da, _ = parseHex(c.DescA)
	}
	db, _ := parseHex(c.DescB)
	img, err := upload(b, words(c.Image))
	if err != nil {
		return err
	}
	acc, err := upload(b, words(c.C))
	if err != nil {
		return err
	}
	ar := c.ARegs
	if ar == nil {
		ar = make([]uint32, 512) // loaded, not used
	}
	areg, err := upload(b, words(ar))
	if err != nil {
		return err
	}
	unset := make([]byte, 4*len(c.C))
	for i := range unset {
		unset[i] = 0xff
	}
	out, err := upload(b, unset)
	if err != nil {
		return err
	}
	info, err := upload(b, make([]byte, 32))
	if err != nil {
		return err
	}
	nimg := 4 * len(c.Image)
	if err := b.Launch(c.Variant().Name(), c.Fill+1024, img, uint32(nimg), acc, areg, out, info, da, db, c.ScaleD, uint32(c.Fill)); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	d := make([]byte, len(unset))
	if err := b.Read(out, d); err != nil {
		return err
	}
	inf := make([]byte, 32)
	if err := b.Read(info, inf); err != nil {
		return err
	}
	c.D = fromBytes(d)
	c.Base = binary.LittleEndian.Uint32(inf)
	if c.A != ARegs {
		c.DescAUsed = hex64(binary.LittleEndian.Uint64(inf[8:]))
	}
	c.DescBUsed = hex64(binary.LittleEndian.Uint64(inf[16:]))
	return nil
}

const wgmmaLayout = "per case: image = shared-memory words at a 1024-byte aligned shared address (base), followed up to fill bytes by the pattern ((o*0x9e3779b1) & 0x07ff07ff) | 0x38003800 for the word at byte offset o; desc_a/desc_b = descriptors with start addresses relative to the image, desc_*_used = as passed (start + base>>4); " +
	"a_regs = thread t's 4 A registers at 4t (A from registers); c and d = thread t's N/2 accumulator registers at t*N/2 (f32 bits, input and output); scale_d the predicate; neg_a/neg_b: imm-scale -1; b_mn: imm-trans-b 1; a desc-MN: imm-trans-a 1"

// RecordWgmma runs every case on b. On an error it returns the cases
// recorded before it too (a partial file, for the record).
func RecordWgmma(b Backend) (*WgmmaFile, error) {
	src, err := WgmmaModule(Variants())
	if err != nil {
		return nil, err
	}
	f := &WgmmaFile{
		Instruction: "wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16} (sm_90a)",
		Device:      b.Name(),
		Layout:      wgmmaLayout,
	}
	if err := b.Load("wgmma.ptx", src); err != nil {
		return f, err
	}
	for _, s := range specs() {
		c := s.build()
		if err := runWgmma(b, c); err != nil {
			return f, err
		}
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

// CopyFile is the content of tensorcopy.json.gz.
type CopyFile struct {
	Instruction string      `json:"instruction"`
	Device      string      `json:"device"`
	Layout      string      `json:"layout"`
	Cases       []*CopyCase `json:"cases"`
}

// CopyCase is one cp.async.bulk.tensor.2d of a box of u16 elements.
type CopyCase struct {
	Name     string   `json:"name"`
	Swizzle  string   `json:"swizzle"`
	Dims     [2]int   `json:"dims"`      // tensor size in elements: inner, rows
	RowBytes int      `json:"row_bytes"` // byte stride of the rows
	Box      [2]int   `json:"box"`       // elements: inner, rows
	Coords   [2]int32 `json:"coords"`    // the box's first element
	Tensor   []uint32 `json:"tensor"`    // the global tensor, RowBytes x rows bytes
	// Recorded: the encoded CUtensorMap (hex; GPU only), the destination's
	// shared address, and the box's shared bytes as the copy left them.
	Map  string   `json:"map,omitempty"`
	Base uint32   `json:"base"`
	Out  []uint32 `json:"out"`

	global uint64 // the tensor's device address during a run
}

func (c *CopyCase) boxBytes() int { return 2 * c.Box[0] * c.Box[1] }

func (c *CopyCase) inputs() *CopyCase {
	x := *c
	x.Map, x.Base, x.Out = "", 0, nil
	return &x
}

// copyCases: one box per swizzle mode, inside the tensor, and one 128B box
// hanging over the tensor's top and right edges (zero fill).
func copyCases() []*CopyCase {
	r := rand.New(rand.NewPCG(20261130, 7))
	var cs []*CopyCase
	add := func(swz string, inner int, oob bool) {
		rows := 4096 / (2 * inner) // every box is 4096 bytes
		c := &CopyCase{Swizzle: swz, Box: [2]int{inner, rows}, Dims: [2]int{2*inner + 8, rows + 11}}
		c.RowBytes = (2*c.Dims[0]+15)/16*16 + 32
		c.Coords = [2]int32{8, 5}
		c.Name = fmt.Sprintf("swizzle %s box %dx%d", swz, inner, rows)
		if oob {
			c.Coords = [2]int32{int32(c.Dims[0] - inner/2), -3}
			c.Name += " over the edges (zero fill)"
		}
		c.Tensor = make([]uint32, c.RowBytes*c.Dims[1]/4)
		for i := range c.Tensor {
			c.Tensor[i] = r.Uint32()
		}
		cs = append(cs, c)
	}
	add("none", 32, false)
	add("32B", 16, false)
	add("64B", 32, false)
	add("128B", 64, false)
	add("128B", 64, true)
	return cs
}

func runCopy(b Backend, c *CopyCase) error {
	defer b.Reset()
	if c.boxBytes()%2048 != 0 || len(c.Tensor) != c.RowBytes*c.Dims[1]/4 {
		return fmt.Errorf("%s: bad case (box %d bytes, tensor %d words)", c.Name, c.boxBytes(), len(c.Tensor))
	}
	g, err := upload(b, words(c.Tensor))
	if err != nil {
		return err
	}
	c.global = g
	tm, enc, err := b.TensorMap(*c)
	if err != nil {
		return fmt.Errorf("%s: tensor map: %w", c.Name, err)
	}
	if enc != nil {
		c.Map = fmt.Sprintf("%x", enc)
	}
	unset := make([]byte, c.boxBytes())
	for i := range unset {
		unset[i] = 0xff
	}
	out, err := upload(b, unset)
	if err != nil {
		return err
	}
	info, err := upload(b, make([]byte, 8))
	if err != nil {
		return err
	}
	if err := b.Launch(CopyKernel, c.boxBytes()+1024, tm, out, info, uint32(c.Coords[0]), uint32(c.Coords[1]), uint32(c.boxBytes())); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	o := make([]byte, len(unset))
	if err := b.Read(out, o); err != nil {
		return err
	}
	inf := make([]byte, 8)
	if err := b.Read(info, inf); err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(inf[4:]) != 1 {
		return fmt.Errorf("%s: the mbarrier phase did not complete within %d waits", c.Name, copyWaitLimit)
	}
	c.Out = fromBytes(o)
	c.Base = binary.LittleEndian.Uint32(inf)
	return nil
}

// RecordCopy runs every tensor-copy case on b; on an error it returns the
// cases recorded before it too.
func RecordCopy(b Backend) (*CopyFile, error) {
	f := &CopyFile{
		Instruction: "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes (tile mode, u16 elements, zero fill)",
		Device:      b.Name(),
		Layout:      "per case: tensor = the global tensor's rows (row_bytes apart) as little-endian words; the box of box[0] x box[1] elements at coords lands at a 1024-byte aligned shared address (base), first marked with words 0xdead0000+i; out = its box-size bytes of shared memory after the copy, as words",
	}
	if err := b.Load("tensorcopy.ptx", CopyModule()); err != nil {
		return f, err
	}
	for _, c := range copyCases() {
		if err := runCopy(b, c); err != nil {
			return f, err
		}
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

// WriteFile writes v as gzip-compressed JSON.
func WriteFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	z, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err := json.NewEncoder(z).Encode(v); err != nil {
		f.Close()
		return err
	}
	if err := z.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile reads gzip-compressed JSON into v.
func ReadFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if err := json.NewDecoder(z).Decode(v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}
