package ptx

import (
	"fmt"
	"math/bits"
)

// This file is mbarrier and cp.async.bulk.tensor, written from the PTX ISA
// ("Parallel Synchronization and Communication Instructions: mbarrier",
// "cp.async.bulk.tensor", "Tensor Map"), not from attngen's emitter.

// mbarState is one mbarrier object. The ISA keeps its state opaque in 8
// bytes of shared memory; the interpreter keeps it here, keyed by offset,
// and rejects ordinary loads and stores of those bytes.
type mbarState struct {
	off      int   // shared offset
	expected int32 // arrivals per phase (init's count)
	pending  int32 // arrivals the current phase still needs
	tx       int64 // transaction count: expected bytes not yet transferred
	phase    uint64
	copies   []chunk // bulk-copy destinations completing with the current phase
	// join is the elementwise max of the vector clocks of the current
	// phase's arrivers (release), done that of every completed phase's: a
	// wait that observes a completion joins done (acquire)
	join, done []uint32
}

const (
	mbarMaxCount = 1<<20 - 1 // arrival and tx-count limits
	asyncWriter  = 62        // wsh tag of bytes a completed bulk copy wrote (epoch 0: never a race)
)

// mbarAt resolves lane l's mbarrier operand to its state (nil when no
// mbarrier was initialized there).
func (r *blockRun) mbarAt(w *warp, in *inst, o *operand, l int) (int, *mbarState, error) {
	_, off, err := r.resolve(w, in, l, spShared, w.addr(o, l), 8, 8)
	if err != nil {
		return 0, nil, err
	}
	return off, r.mbars[off], nil
}

// complete advances mb's phase when its arrivals and transactions are done.
func (r *blockRun) mbarCheck(mb *mbarState) {
	if mb.pending != 0 || mb.tx != 0 {
		return
	}
	mb.phase++
	mb.pending = mb.expected
	for i, t := range mb.join {
		mb.done[i] = max(mb.done[i], t)
	}
	clear(mb.join)
	for _, c := range mb.copies {
		for i := int(c.off); i < int(c.off+c.n); i++ {
			if r.shadow {
				r.pend[i] = false
				r.wsh[i] = asyncWriter
				r.aph[i] = uint64(mb.off)<<32 | mb.phase
			}
		}
	}
	mb.copies = mb.copies[:0]
}

func (r *blockRun) mbarOp(w *warp, in *inst, active uint32) error {
	if in.op == opMbarArrive && active != 0 {
		// the warp's later accesses are not covered by this arrival
		defer func() { w.vc[w.id]++ }()
	}
	for m := active; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		var ao *operand
		if in.op == opMbarArrive {
			ao = &in.src[0]
		} else {
			ao = &in.dst[0]
		}
		off, mb, err := r.mbarAt(w, in, ao, l)
		if err != nil {
			return err
		}
		r.events++
		if in.op == opMbarInit {
			cnt := w.val(&in.src[0], l) & 0xffffffff
			if cnt < 1 || cnt > mbarMaxCount {
				return r.errf(w, in, l, "mbarrier.init count %d outside 1..%d", cnt, mbarMaxCount)
			}
			if mb != nil && len(mb.copies) > 0 {
				return r.errf(w, in, l, "mbarrier.init of the mbarrier at shared offset %#x while bulk copies are pending on it", off)
			}
			if r.shadow {
				for i := off; i < off+8; i++ {
					if r.pend[i] {
						return r.errf(w, in, l, "mbarrier.init at shared offset %#x, which a copy has not completed", off)
					}
				}
			}
			if r.mbars == nil {
				r.mbars = map[int]*mbarState{}
			}
			r.mbars[off] = &mbarState{off: off, expected: int32(cnt), pending: int32(cnt), join: make([]uint32, len(r.warps)), done: make([]uint32, len(r.warps))}
			for _, o := range r.warps { // a new object: its phases start again
				delete(o.seen, off)
			}
			continue
		}
		if mb == nil {
			return r.errf(w, in, l, "%s on shared offset %#x, where no mbarrier is initialized", opName(in), off)
		}
		switch in.op {
		case opMbarInval:
			if len(mb.copies) > 0 {
				return r.errf(w, in, l, "mbarrier.inval while bulk copies are pending on it")
			}
			delete(r.mbars, off)
		case opMbarExpectTx:
			if err := r.mbarTx(w, in, l, mb, int64(w.val(&in.src[0], l)&0xffffffff)); err != nil {
				return err
			}
		case opMbarArrive:
			cnt := int32(1)
			if in.flags&flExpectTx != 0 {
				if err := r.mbarTx(w, in, l, mb, int64(w.val(&in.src[1], l)&0xffffffff)); err != nil {
					return err
				}
			} else if len(in.src) == 2 {
				c := w.val(&in.src[1], l) & 0xffffffff
				if c < 1 || c > mbarMaxCount {
					return r.errf(w, in, l, "mbarrier.arrive count %d outside 1..%d", c, mbarMaxCount)
				}
				cnt = int32(c)
			}
			token := mb.phase // the state: the phase this arrival belongs to
			if cnt > mb.pending {
				return r.errf(w, in, l, "mbarrier.arrive of %d on the mbarrier at shared offset %#x, whose current phase awaits only %d more arrivals (undefined in the ISA)", cnt, off, mb.pending)
			}
			mb.pending -= cnt
			for i, t := range w.vc {
				mb.join[i] = max(mb.join[i], t)
			}
			r.mbarCheck(mb)
			if in.dst[0].kind == oReg {
				w.set(&in.dst[0], l, token)
			}
		}
	}
	return nil
}

// mbarTx adds n expected bytes to the current phase's tx-count.
func (r *blockRun) mbarTx(w *warp, in *inst, l int, mb *mbarState, n int64) error {
	if n > mbarMaxCount {
		return r.errf(w, in, l, "expect-tx of %d bytes exceeds %d", n, mbarMaxCount)
	}
	mb.tx += n
	if mb.tx > mbarMaxCount {
		return r.errf(w, in, l, "mbarrier tx-count %d exceeds %d", mb.tx, mbarMaxCount)
	}
	return nil
}

// mbarWait evaluates try_wait/test_wait for the active lanes, sets the
// destination predicate and reports whether every active lane saw its phase
// complete. With .parity the operand names the parity of the phase waited
// for: it has completed when the current phase's parity differs. Otherwise
// the operand is a state token from mbarrier.arrive: its phase has completed
// when the barrier has moved past it.
func (r *blockRun) mbarWait(w *warp, in *inst, active uint32) (bool, error) {
	var res uint32
	for m := active; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		off, mb, err := r.mbarAt(w, in, &in.src[0], l)
		if err != nil {
			return false, err
		}
		if mb == nil {
			return false, r.errf(w, in, l, "%s on shared offset %#x, where no mbarrier is initialized", opName(in), off)
		}
		v := w.val(&in.src[1], l)
		var done bool
		if in.flags&flParity != 0 {
			if v&0xffffffff > 1 {
				return false, r.errf(w, in, l, "phase parity %d is not 0 or 1", v)
			}
			done = mb.phase&1 != v&1
		} else {
			if v > mb.phase {
				return false, r.errf(w, in, l, "state token %d is from a phase the mbarrier at shared offset %#x has not reached", v, off)
			}
			done = mb.phase > v
		}
		if done {
			res |= 1 << l
			if w.seen == nil {
				w.seen = map[int]uint64{}
			}
			w.seen[off] = max(w.seen[off], mb.phase)
			for i, t := range mb.done {
				w.vc[i] = max(w.vc[i], t)
			}
		}
	}
	w.setPred(in.dst[0].slot, active, res)
	return res == active, nil
}

// mbarOverlap reports a live mbarrier among shared bytes [off, off+n).
func (r *blockRun) mbarOverlap(off, n int) (int, bool) {
	for a := off &^ 7; a < off+n; a += 8 {
		if _, ok := r.mbars[a]; ok {
			return a, true
		}
	}
	return 0, false
}

// TensorMap is what the interpreter knows of a CUDA tensor map
// (CUtensorMap, cuTensorMapEncodeTiled): a tiled view of a global tensor
// of rank 1 to 5 with dimension 0 innermost. Tests and runners fill one in
// and register it with Device.NewTensorMap, which returns the device
// address a kernel passes (as a .u64 parameter or register) to
// cp.async.bulk.tensor. Element strides are 1, there is no interleave, and
// out-of-bound elements are filled with zeros
// (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE); those are the only modes modelled.
// Element (c0, c1, ..) lies at Global + c0*ElemSize + c1*Strides[0] +
// c2*Strides[1] + ..: the strides of dimensions 1.. are independent byte
// strides (in any order of size: a BSHD tensor seen as (D, seq, heads,
// batch) has a head stride below its position stride).
type TensorMap struct {
	Global   uint64   // device address of element (0, 0, ...): 16-byte aligned
	ElemSize int      // bytes per element: 1, 2, 4 or 8
	Dims     []uint64 // size of each dimension, innermost first (rank 1 to 5), each 1..2^32
	Strides  []uint64 // byte stride of dimensions 1..rank-1: multiples of 16, above 0, below 2^40
	Box      []uint32 // box size per dimension, 1..256; Box[0]*ElemSize a multiple of 16
	Swizzle  Swizzle  // destination swizzle; when set, Box[0]*ElemSize must equal its span
}

const (
	tensorMapBytes = 128
	maxTensorRank  = 5       // cuTensorMapEncodeTiled's tensorRank: 1..5
	maxTmapStride  = 1 << 40 // global strides are below 2^40 bytes
	maxTmapDim     = 1 << 32 // global dimensions are at most 2^32
	maxTmapBox     = 256     // box dimensions are at most 256
)

// NewTensorMap checks tm, copies it into 128 bytes of global memory (whose
// contents are opaque to kernels) and returns their address.
func (d *Device) NewTensorMap(tm TensorMap) (uint64, error) {
	bad := func(f string, a ...any) (uint64, error) {
		return 0, fmt.Errorf("ptx: NewTensorMap: "+f, a...)
	}
	rank := len(tm.Dims)
	switch {
	case rank < 1 || rank > maxTensorRank:
		return bad("rank %d: a tiled tensor map has rank 1 to %d", rank, maxTensorRank)
	case len(tm.Strides) != rank-1 || len(tm.Box) != rank:
		return bad("%d dims need %d strides and %d box sizes", rank, rank-1, rank)
	case tm.ElemSize != 1 && tm.ElemSize != 2 && tm.ElemSize != 4 && tm.ElemSize != 8:
		return bad("element size %d", tm.ElemSize)
	case tm.Global%16 != 0:
		return bad("global address %#x is not 16-byte aligned", tm.Global)
	case tm.Swizzle > Swizzle32B:
		return bad("swizzle %d", tm.Swizzle)
	}
	for i, s := range tm.Strides {
		if s%16 != 0 || s == 0 || s >= maxTmapStride {
			return bad("stride %d (%d bytes) is not a positive multiple of 16 below 2^40", i+1, s)
		}
	}
	for i, b := range tm.Box {
		if b < 1 || b > maxTmapBox {
			return bad("box size %d of dimension %d outside 1..%d", b, i, maxTmapBox)
		}
		if tm.Dims[i] < 1 || tm.Dims[i] > maxTmapDim {
			return bad("dimension %d size %d outside 1..2^32", i, tm.Dims[i])
		}
	}
	inner := int(tm.Box[0]) * tm.ElemSize
	if inner%16 != 0 {
		return bad("inner box of %d bytes is not a multiple of 16", inner)
	}
	if tm.Swizzle != SwizzleNone && inner != tm.Swizzle.span() {
		return bad("inner box of %d bytes with swizzle %s: the interpreter models only an inner box equal to the swizzle span", inner, tm.Swizzle)
	}
	a, err := d.Alloc(tensorMapBytes)
	if err != nil {
		return 0, err
	}
	b := make([]byte, tensorMapBytes)
	copy(b, "attngen-ptx-tensormap")
	if err := d.Write(a, b); err != nil {
		return 0, err
	}
	if d.tmaps == nil {
		d.tmaps = map[uint64]*TensorMap{}
	}
	c := tm
	c.Dims = append([]uint64(nil), tm.Dims...)
	c.Strides = append([]uint64(nil), tm.Strides...)
	c.Box = append([]uint32(nil), tm.Box...)
	d.tmaps[a] = &c
	return a, nil
}

// bulkTensor copies one box at issue, as the ISA's tile mode defines it:
// the box whose first element has the given coordinates (signed, one per
// dimension, innermost first; elements outside the tensor read as zero)
// lands in shared memory densely, dimension 0 fastest, then dimension 1,
// and so on; then each 16-byte unit is placed by the map's swizzle
// (swizzleAddr on the destination address). The bytes stay pending
// (unreadable) until the mbarrier's current phase completes; the copy
// counts the box's full size against its tx-count (complete_tx), out of
// bound elements included.
func (r *blockRun) bulkTensor(w *warp, in *inst, active uint32) error {
	rank := int(in.vec)
	for m := active; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		ta := w.val(&in.src[0], l)
		tm := r.d.tmaps[ta]
		if tm == nil {
			return r.errf(w, in, l, "%#x is not the address of a tensor map made by Device.NewTensorMap", ta)
		}
		if len(tm.Dims) != rank {
			return r.errf(w, in, l, "a .%dd copy through a rank-%d tensor map", rank, len(tm.Dims))
		}
		var box [maxTensorRank]int
		var crd [maxTensorRank]int64
		total := tm.ElemSize
		for i := 0; i < maxTensorRank; i++ {
			box[i] = 1
			if i < rank {
				box[i] = int(tm.Box[i])
				crd[i] = int64(int32(w.val(&in.src[1+i], l)))
			}
			total *= box[i]
		}
		da := w.addr(&in.dst[0], l)
		if da%128 != 0 {
			return r.errf(w, in, l, "cp.async.bulk.tensor destination %#x is not 128-byte aligned", da)
		}
		_, doff, err := r.resolve(w, in, l, spShared, da, total, 1)
		if err != nil {
			return err
		}
		moff, mb, err := r.mbarAt(w, in, &in.src[1+rank], l)
		if err != nil {
			return err
		}
		if mb == nil {
			return r.errf(w, in, l, "cp.async.bulk.tensor completes on shared offset %#x, where no mbarrier is initialized", moff)
		}
		if lo, ok := r.mbarOverlap(doff, total); ok {
			return r.errf(w, in, l, "cp.async.bulk.tensor destination overlaps the mbarrier at shared offset %#x", lo)
		}
		es := tm.ElemSize
		// idx walks the box's elements in their shared-memory order:
		// dimension 0 fastest
		var idx [maxTensorRank]int
		for lin := 0; lin < total; lin += es {
			dst := int(swizzleAddr(uint32(doff+lin), tm.Swizzle))
			if dst+es > len(r.sm) {
				return r.errf(w, in, l, "cp.async.bulk.tensor writes shared offset %#x, outside the %d bytes of shared memory", dst, len(r.sm))
			}
			if r.shadow {
				for b := dst; b < dst+es; b++ {
					if r.pend[b] {
						return r.errf(w, in, l, "cp.async.bulk.tensor to shared offset %#x, which an earlier copy has not completed", b)
					}
					if ws := r.wsh[b]; r.d.CheckRaces && !r.ordered(w, ws) {
						return r.errf(w, in, l, "race: cp.async.bulk.tensor to shared offset %#x written by warp %d since the last barrier", b, ws&63-1)
					}
					if r.d.CheckRaces {
						if msg := r.readRace(w, b, "cp.async.bulk.tensor to"); msg != "" {
							return r.errf(w, in, l, "%s", msg)
						}
					}
					r.pend[b] = true
				}
				mb.copies = append(mb.copies, chunk{uint32(dst), uint32(es)})
			}
			var c [maxTensorRank]int64
			inside := true
			g := tm.Global
			for i := 0; i < rank; i++ {
				c[i] = crd[i] + int64(idx[i])
				if c[i] < 0 || uint64(c[i]) >= tm.Dims[i] {
					inside = false
					break
				}
				if i == 0 {
					g += uint64(c[0]) * uint64(es)
				} else {
					g += uint64(c[i]) * tm.Strides[i-1]
				}
			}
			// the next element of the box
			for i := 0; i < maxTensorRank; i++ {
				if idx[i]++; idx[i] < box[i] {
					break
				}
				idx[i] = 0
			}
			if !inside {
				clear(r.sm[dst : dst+es])
				continue
			}
			goff, ok := r.d.global(g, es)
			if !ok {
				return r.errf(w, in, l, "cp.async.bulk.tensor reads element %v at %#x, outside any allocation", c[:rank], g)
			}
			copy(r.sm[dst:dst+es], r.d.mem[goff:goff+es])
		}
		r.events++
		mb.tx -= int64(total)
		if mb.tx < -mbarMaxCount {
			return r.errf(w, in, l, "mbarrier tx-count below %d", -mbarMaxCount)
		}
		r.mbarCheck(mb)
	}
	return nil
}
