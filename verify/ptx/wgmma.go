package ptx

import (
	"encoding/binary"
	"fmt"
)

// This file is wgmma.mma_async for .m64nNk16.f32.{bf16,f16}, written from
// the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate"),
// not from attngen's emitter.

// Swizzle modes of a wgmma matrix descriptor (bits 62-63) and of a tensor map.
type Swizzle uint8

const (
	SwizzleNone Swizzle = iota
	Swizzle128B
	Swizzle64B
	Swizzle32B
)

// span is the swizzle width in bytes (16 for none: one 16-byte unit).
func (s Swizzle) span() int {
	return [...]int{16, 128, 64, 32}[s]
}

func (s Swizzle) String() string {
	return [...]string{"none", "128B", "64B", "32B"}[s]
}

// swizzleAddr applies a swizzle mode to a shared-memory byte address: the
// 16-byte unit index within a span-byte row (address bits 4 and up, as many
// as span/16 needs) is XORed with the row index modulo span/16 (address bits
// 7 and up). The pattern is a function of the address itself, so it repeats
// every 8 rows of 128 bytes (1024 bytes for 128B, 512 for 64B, 256 for 32B).
func swizzleAddr(a uint32, s Swizzle) uint32 {
	if s == SwizzleNone {
		return a
	}
	mask := uint32(s.span()/16 - 1)
	return a ^ (a>>7&mask)<<4
}

// matDesc is a decoded wgmma shared-memory matrix descriptor.
type matDesc struct {
	start, lbo, sbo uint32 // bytes
	swz             Swizzle
}

// decodeDesc checks and decodes a 64-bit matrix descriptor: bits 0-13 start
// address >> 4, bits 16-29 leading-dimension byte offset >> 4, bits 32-45
// stride-dimension byte offset >> 4, bits 49-51 the base offset, bits 62-63
// the swizzle mode (0 none, 1 128B, 2 64B, 3 32B). The interpreter requires
// the base offset and the reserved bits to be zero.
func decodeDesc(v uint64) (matDesc, string) {
	const used = 0x3fff | 0x3fff<<16 | 0x3fff<<32 | 7<<49 | 3<<62
	if v&^uint64(used) != 0 {
		return matDesc{}, fmt.Sprintf("matrix descriptor %#x sets reserved bits %#x", v, v&^uint64(used))
	}
	if b := v >> 49 & 7; b != 0 {
		return matDesc{}, fmt.Sprintf("matrix descriptor %#x has base offset %d; the interpreter models only 0 (a pattern-aligned swizzle)", v, b)
	}
	return matDesc{
		start: uint32(v&0x3fff) << 4,
		lbo:   uint32(v>>16&0x3fff) << 4,
		sbo:   uint32(v>>32&0x3fff) << 4,
		swz:   Swizzle(v >> 62),
	}, ""
}

// elemAddr is the shared address of element (r, k) of a 16-bit operand with
// r rows in M or N and 16 in K, as the ISA's canonical layouts place it
// ("Shared Memory Matrix Layout" and the strides sections). Units of 16
// bytes hold 8 consecutive elements along the operand's contiguous
// dimension (K when K-major, M/N when MN-major).
//
// K-major (trans false):
//   - no swizzle: core matrices of 8 rows x 16 bytes, rows 16 bytes apart;
//     the two K halves (k/8) are LBO apart, groups of 8 rows SBO apart.
//   - swizzle of W bytes: an atom is 8 rows of W bytes; all 16 K elements lie
//     within one row (32 <= W); groups of 8 rows are SBO apart; LBO unused.
//
// MN-major (trans true):
//   - no swizzle: core matrices of 8 K-rows x 8 M/N elements; groups of 8
//     M/N elements are SBO apart, groups of 8 K rows LBO apart.
//   - swizzle of W bytes: an atom is 8 K-rows of W bytes (W/2 M/N elements);
//     groups of W/2 M/N elements are LBO apart, groups of 8 K rows SBO apart.
//
// The swizzle then permutes 16-byte units by address (swizzleAddr).
func (m matDesc) elemAddr(r, k int, trans bool) uint32 {
	var off int
	w := m.swz.span()
	lbo, sbo := int(m.lbo), int(m.sbo)
	switch {
	case !trans && m.swz == SwizzleNone:
		off = r%8*16 + r/8*sbo + k%8*2 + k/8*lbo
	case !trans:
		off = r%8*w + r/8*sbo + k*2
	case m.swz == SwizzleNone:
		off = r%8*2 + r/8*sbo + k%8*16 + k/8*lbo
	default:
		u := w / 2
		off = r%u*2 + r/u*lbo + k%8*w + k/8*sbo
	}
	return swizzleAddr(m.start+uint32(off), m.swz)
}

// loadOperand reads a rows x 16 operand through a descriptor into vecs
// (one halfVec per row, K along the vector), checking bounds and the
// shared-memory shadow state as reads by warp w.
func (r *blockRun) loadOperand(w *warp, in *inst, desc uint64, rows int, trans, neg bool, what string, vecs []halfVec, sp []bool) error {
	md, msg := decodeDesc(desc)
	if msg != "" {
		return r.errf(w, in, -1, "%s: %s", what, msg)
	}
	dec := decodeBF16
	if in.wg.f16 {
		dec = decodeF16
	}
	for row := 0; row < rows; row++ {
		for k := 0; k < 16; k++ {
			a := int(md.elemAddr(row, k, trans))
			if a+2 > len(r.sm) {
				return r.errf(w, in, -1, "%s (%s, swizzle %s) reads element (%d, %d) at shared offset %#x, outside the %d bytes of shared memory", what, layoutName(trans), md.swz, row, k, a, len(r.sm))
			}
			if m := r.shRead(w, a, 2); m != "" {
				return r.errf(w, in, -1, "%s element (%d, %d): %s", what, row, k, m)
			}
			h := binary.LittleEndian.Uint16(r.sm[a:])
			if neg {
				h ^= 0x8000
			}
			var s bool
			vecs[row].v[k], vecs[row].e[k], s = dec(h)
			sp[row] = sp[row] || s
		}
	}
	return nil
}

func layoutName(trans bool) string {
	if trans {
		return "MN-major"
	}
	return "K-major"
}

// wgmmaGroup executes the wgmma.mma_async at which the four warps of a
// warpgroup wait. Each output element is one mmaDot (the mma.sync model:
// the 16 products and the accumulator added in one step). The accumulator
// fragment: thread t of the warpgroup (warp t/32, g = lane/4, q = lane%4)
// holds in register i the element at row 16*(t/32) + g + 8*(i/2%2), column
// 8*(i/4) + 2q + i%2. A from registers uses the mma.m16n8k16 A fragment per
// warp, rows offset by 16 per warp.
func (r *blockRun) wgmmaGroup(g []*warp) error {
	w0 := g[0]
	in := &r.k.code[w0.pc-1]
	for _, w := range g[1:] {
		if w.pc != w0.pc {
			o := &r.k.code[w.pc-1]
			return r.errf(w, o, -1, "warps of a warpgroup wait at different wgmma instructions (warp %d at line %d, warp %d at line %d)", w0.id, in.line, w.id, o.line)
		}
	}
	info := in.wg
	n := info.n
	// uniformity of the descriptors and scale-d, fences
	var descA, descB uint64
	nA := 1
	if info.aRegs {
		nA = 4
	}
	bi := nA
	scale := info.scaleImm == 1
	for wi, w := range g {
		for l := 0; l < 32; l++ {
			if !info.aRegs {
				v := w.val(&in.src[0], l)
				if wi == 0 && l == 0 {
					descA = v
				} else if v != descA {
					return r.errf(w, in, l, "a-desc differs across the warpgroup (%#x vs %#x)", v, descA)
				}
			}
			v := w.val(&in.src[bi], l)
			if wi == 0 && l == 0 {
				descB = v
			} else if v != descB {
				return r.errf(w, in, l, "b-desc differs across the warpgroup (%#x vs %#x)", v, descB)
			}
		}
		if info.scaleImm < 0 {
			p := &in.src[bi+1]
			m := w.preds[p.slot]
			if p.neg {
				m = ^m
			}
			if m != 0 && m != ^uint32(0) || wi > 0 && (m != 0) != scale {
				return r.errf(w, in, -1, "scale-d differs across the warpgroup")
			}
			scale = m != 0
		}
		if w.fenceAt < 0 {
			return r.errf(w, in, -1, "wgmma.mma_async before any wgmma.fence in warp %d (the ISA requires wgmma.fence before the first wgmma.mma_async)", w.id)
		}
		check := func(o *operand, what string) error {
			if w.wstamp[o.slot] > w.fenceAt {
				return r.errf(w, in, -1, "%s register %s was written after the last wgmma.fence (a wgmma.fence must separate register writes from the wgmma.mma_async that reads them)", what, r.k.regNames[o.slot])
			}
			return nil
		}
		for i := range in.dst {
			if err := check(&in.dst[i], "accumulator"); err != nil {
				return err
			}
			if scale && w.def[in.dst[i].slot] != ^uint32(0) {
				return r.undefErr(w, in, r.k.regNames[in.dst[i].slot], ^w.def[in.dst[i].slot])
			}
		}
		if info.aRegs {
			for i := 0; i < 4; i++ {
				if err := check(&in.src[i], "A"); err != nil {
					return err
				}
			}
		}
	}
	A := make([]halfVec, 64)
	B := make([]halfVec, n)
	rowSp := make([]bool, 64)
	colSp := make([]bool, n)
	if err := r.loadOperand(w0, in, descB, n, info.tB, info.negB, "B", B, colSp); err != nil {
		return err
	}
	if info.aRegs {
		dec := decodeBF16
		if info.f16 {
			dec = decodeF16
		}
		for wi, w := range g {
			for l := 0; l < 32; l++ {
				gq, q := l>>2, l&3
				for i := 0; i < 4; i++ {
					v := uint32(w.val(&in.src[i], l))
					if info.negA {
						v ^= 0x80008000
					}
					row, col := 16*wi+gq+8*(i&1), 2*q+8*(i>>1)
					rv := &A[row]
					var s0, s1 bool
					rv.v[col], rv.e[col], s0 = dec(uint16(v))
					rv.v[col+1], rv.e[col+1], s1 = dec(uint16(v >> 16))
					rowSp[row] = rowSp[row] || s0 || s1
				}
			}
		}
	} else if err := r.loadOperand(w0, in, descA, 64, info.tA, info.negA, "A", A, rowSp); err != nil {
		return err
	}
	for wi, w := range g {
		for l := 0; l < 32; l++ {
			gq, q := l>>2, l&3
			for i := 0; i < n/2; i++ {
				row := 16*wi + gq + 8*(i>>1&1)
				col := 8*(i>>2) + 2*q + i&1
				c := uint32(0x80000000) // scale-d = 0: D = A*B, a -0 addend keeps IEEE signed zeros
				if scale {
					c = uint32(w.val(&in.dst[i], l))
				}
				w.set(&in.dst[i], l, uint64(mmaDot(c, &A[row], &B[col], rowSp[row] || colSp[col])))
			}
		}
		// results are in flight until wgmma.wait_group covers this op's group
		if w.wgOpen == 0 {
			w.wgSeq++
			w.wgOpen = w.wgSeq
		}
		mark := func(s int32) {
			if w.wgPend[s] == 0 {
				w.nPend++
			}
			w.wgPend[s] = w.wgOpen
		}
		for i := range in.dst {
			w.def[in.dst[i].slot] = ^uint32(0)
			mark(in.dst[i].slot)
		}
		if info.aRegs {
			for i := 0; i < 4; i++ {
				mark(in.src[i].slot)
			}
		}
		w.state = wsRun
	}
	return nil
}

// wgWait completes every committed group but the newest n.
func (r *blockRun) wgWait(w *warp, n int) {
	done := len(w.wgGroups) - n
	if done <= 0 {
		return
	}
	last := w.wgGroups[done-1] // groups are numbered in order
	for s, g := range w.wgPend {
		if g != 0 && g <= last && g != w.wgOpen {
			w.wgPend[s] = 0
			w.nPend--
		}
	}
	w.wgGroups = w.wgGroups[:copy(w.wgGroups, w.wgGroups[done:])]
}

// checkPending rejects an instruction that touches a register an unfinished
// wgmma.mma_async writes (its accumulators) or reads (A in registers).
func (r *blockRun) checkPending(w *warp, in *inst) error {
	for _, list := range [][]int32{in.rd, in.wr} {
		for _, s := range list {
			if g := w.wgPend[s]; g != 0 {
				state := "committed but not waited for (wgmma.wait_group)"
				if g == w.wgOpen {
					state = "not yet committed (wgmma.commit_group) nor waited for"
				}
				return r.errf(w, in, -1, "register %s belongs to a wgmma.mma_async whose group is %s", r.k.regNames[s], state)
			}
		}
	}
	return nil
}

// wake resolves what the warps parked for: warpgroups complete at a wgmma,
// mbarrier waits whose phase completed, test_wait spinners after an
// mbarrier changed. It reports whether any warp can run again.
func (r *blockRun) wake() (bool, error) {
	progress := false
	for g := 0; g*4 < len(r.warps); g++ {
		ws := r.warps[g*4 : min(g*4+4, len(r.warps))]
		at := 0
		for _, w := range ws {
			if w.state == wsWG {
				at++
			}
		}
		if at == 0 {
			continue
		}
		if len(ws) < 4 || ws[3].full != ^uint32(0) {
			w := ws[0]
			return false, r.errf(w, &r.k.code[w.pc-1], -1, "wgmma.mma_async in warpgroup %d, which has fewer than 128 threads (block of %d threads)", g, r.block[0]*r.block[1]*r.block[2])
		}
		if at == 4 {
			if err := r.wgmmaGroup(ws); err != nil {
				return false, err
			}
			progress = true
		}
	}
	for _, w := range r.warps {
		switch w.state {
		case wsMbar:
			done, err := r.mbarWait(w, w.waitIn, w.waitActive)
			if err != nil {
				return false, err
			}
			if done {
				w.state, w.waitIn = wsRun, nil
				progress = true
			}
		case wsYield:
			if r.events != w.yieldEv {
				w.state = wsRun
				progress = true
			}
		}
	}
	return progress, nil
}

// deadlock reports warps that can never continue.
func (r *blockRun) deadlock() error {
	var first *warp
	var desc string
	for _, w := range r.warps {
		var s string
		switch w.state {
		case wsBar:
			b := &r.bars[w.waitBar]
			s = fmt.Sprintf("bar.sync %d (%d of %d threads arrived)", w.waitBar, b.arrived, b.count)
		case wsExit:
			s = "exited"
		case wsWG:
			s = "wgmma.mma_async (waiting for its warpgroup)"
		case wsMbar:
			s = "mbarrier.try_wait (phase incomplete)"
		case wsYield:
			s = "mbarrier.test_wait spin (phase incomplete)"
		}
		if w.state != wsExit && first == nil {
			first = w
		}
		desc += fmt.Sprintf("; warp %d: %s", w.id, s)
	}
	return r.errf(first, &r.k.code[max(first.pc-1, 0)], -1, "deadlock: no warp can continue%s", desc)
}

// leftovers checks the end of a block: every warp has exited.
func (r *blockRun) leftovers() error {
	for off, mb := range r.mbars {
		if len(mb.copies) > 0 {
			w := r.warps[0]
			return r.errf(w, &r.k.code[len(r.k.code)-1], -1, "block ended with bulk copies into shared memory still pending on the mbarrier at shared offset %#x (its phase never completed)", off)
		}
	}
	return nil
}
