package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

const (
	wsRun uint8 = iota
	wsBar
	wsExit
	wsWG    // at a wgmma.mma_async, waiting for the rest of its warpgroup
	wsMbar  // parked at an mbarrier.try_wait whose phase has not completed
	wsYield // after an mbarrier.test_wait that found the phase incomplete
)

type chunk struct {
	off uint32
	n   uint32
}

// laneAsync is one thread's incomplete cp.async copies, oldest first;
// ends[i] is the number of them in committed groups 0..i (the rest are not
// yet committed).
type laneAsync struct {
	chunks []chunk
	ends   []int
}

type warp struct {
	id    int
	pc    int
	live  uint32 // lanes that have not exited
	full  uint32 // lanes that exist in the block
	state uint8
	regs  []uint64 // slot<<5 | lane
	def   []uint32 // per data slot: lanes that have written it
	preds []uint32 // per predicate slot: one bit per lane
	pdef  []uint32
	async [32]laneAsync

	// wgmma state (see wgmma.go)
	icount   int64   // instructions this warp executed
	wstamp   []int64 // per data slot: icount of its last write by a non-wgmma instruction
	fenceAt  int64   // icount of the last wgmma.fence (-1: none yet)
	wgPend   []int32 // per data slot: the wgmma group whose result it awaits (0: none)
	nPend    int     // slots with wgPend != 0
	wgOpen   int32   // group of the wgmma ops issued since the last commit (0: none)
	wgGroups []int32 // committed groups not yet waited for, oldest first
	wgSeq    int32

	// mbarrier waits (see mbarrier.go)
	waitIn     *inst
	waitActive uint32
	yieldEv    int64
	// seen: per mbarrier (shared offset), the phases whose completion this
	// warp has observed, by its own wait or through a bar.sync after
	// another warp's; bulk-copied bytes are readable only after that.
	seen map[int]uint64

	// vc is the warp's vector clock: vc[id] its own clock (from 1, one
	// more after each barrier arrival), vc[x] the latest clock of warp x
	// whose accesses are ordered before this warp's by barriers. Shared
	// accesses are stamped with the accessing warp's own clock; a warp's
	// access is ordered after warp x's access stamped t when vc[x] >= t.
	vc      []uint32
	waitBar int // the named barrier the warp waits at (state wsBar)
}

// barState is one named barrier (0..15) of a block between completions.
type barState struct {
	count   int            // threads it completes at (0: idle)
	arrived int            // threads arrived so far (whole warps)
	waiters []*warp        // warps waiting at bar.sync
	join    []uint32       // elementwise max of the arrivers' vector clocks
	seen    map[int]uint64 // mbarrier phases the arrivers observed
	first   *inst          // the first arrival's instruction (errors)
}

type blockRun struct {
	d      *Device
	k      *Kernel
	st     *Stats
	grid   [3]int
	block  [3]int
	ctaid  [3]int
	params []byte
	sm     []byte
	wsh    []uint32 // per shared byte: writer's clock<<6 | writer warp+1 (0: not written in this block)
	rclk   []uint32 // per shared byte and warp (byte*warps + warp): the warp's clock at its last read (0: none)
	pend   []bool   // per shared byte: target of an incomplete cp.async
	aph    []uint64 // per shared byte written by a completed bulk copy: mbarrier offset<<32 | the phase count its completion reached (0: none)
	shadow bool
	warps  []*warp
	bars   [16]barState
	tmp    [32]uint64
	ma     [128]uint32
	mb     [64]uint32
	mc     [128]uint32
	md     [128]uint32

	mbars  map[int]*mbarState // live mbarrier objects by shared offset
	events int64              // mbarrier state changes (wakes test_wait spinners)
	idleEv int64              // events at the last round that woke a spinner
	idle   int                // rounds only spinners ran since events changed
}

// maxIdleRounds bounds the rounds in which only mbarrier.test_wait spinners
// run without any mbarrier changing state.
const maxIdleRounds = 1000

func newBlockRun(d *Device, k *Kernel, grid, block [3]int, shSize int, params []byte, st *Stats) *blockRun {
	r := &blockRun{d: d, k: k, st: st, grid: grid, block: block, params: params}
	r.sm = make([]byte, shSize)
	r.shadow = d.CheckRaces || d.CheckUninitShared
	n := block[0] * block[1] * block[2]
	nw := (n + 31) / 32
	if r.shadow {
		r.wsh = make([]uint32, shSize)
		r.rclk = make([]uint32, shSize*nw)
		r.pend = make([]bool, shSize)
		r.aph = make([]uint64, shSize)
	}
	for i := 0; i*32 < n; i++ {
		w := &warp{id: i}
		w.regs = make([]uint64, k.nData*32)
		w.def = make([]uint32, k.nData)
		w.preds = make([]uint32, k.nPred)
		w.pdef = make([]uint32, k.nPred)
		w.wstamp = make([]int64, k.nData)
		w.wgPend = make([]int32, k.nData)
		w.vc = make([]uint32, nw)
		cnt := min(32, n-32*i)
		if cnt == 32 {
			w.full = ^uint32(0)
		} else {
			w.full = 1<<cnt - 1
		}
		r.warps = append(r.warps, w)
	}
	return r
}

func (r *blockRun) run(ctaid [3]int) error {
	r.ctaid = ctaid
	for i := range r.sm {
		r.sm[i] = 0xff
	}
	if r.shadow {
		clear(r.wsh)
		clear(r.rclk)
		clear(r.pend)
		clear(r.aph)
	}
	r.bars = [16]barState{}
	clear(r.mbars)
	r.events, r.idleEv, r.idle = 0, 0, 0
	k := r.k
	bx, by := r.block[0], r.block[1]
	for _, w := range r.warps {
		w.pc, w.live, w.state = 0, w.full, wsRun
		clear(w.def)
		clear(w.pdef)
		clear(w.wstamp)
		clear(w.wgPend)
		w.icount, w.fenceAt, w.nPend, w.wgOpen, w.wgGroups, w.wgSeq = 0, -1, 0, 0, w.wgGroups[:0], 0
		w.waitIn, w.waitActive, w.yieldEv = nil, 0, 0
		clear(w.seen)
		clear(w.vc)
		w.vc[w.id] = 1
		for l := range w.async {
			w.async[l].chunks = w.async[l].chunks[:0]
			w.async[l].ends = w.async[l].ends[:0]
		}
		r.st.Warps++
		set := func(sp int, f func(l int) int) {
			s := k.special[sp]
			if s < 0 {
				return
			}
			for l := 0; l < 32; l++ {
				w.regs[int(s)<<5|l] = uint64(uint32(f(l)))
			}
			w.def[s] = w.full
		}
		lin := func(l int) int { return w.id*32 + l }
		set(spTidX, func(l int) int { return lin(l) % bx })
		set(spTidY, func(l int) int { return lin(l) / bx % by })
		set(spTidZ, func(l int) int { return lin(l) / (bx * by) })
		set(spNtidX, func(int) int { return r.block[0] })
		set(spNtidY, func(int) int { return r.block[1] })
		set(spNtidZ, func(int) int { return r.block[2] })
		set(spCtaidX, func(int) int { return ctaid[0] })
		set(spCtaidY, func(int) int { return ctaid[1] })
		set(spCtaidZ, func(int) int { return ctaid[2] })
		set(spNctaidX, func(int) int { return r.grid[0] })
		set(spNctaidY, func(int) int { return r.grid[1] })
		set(spNctaidZ, func(int) int { return r.grid[2] })
		set(spLaneid, func(l int) int { return l })
		set(spWarpid, func(int) int { return w.id })
		set(spNwarpid, func(int) int { return len(r.warps) })
	}
	for {
		for _, w := range r.warps {
			if w.state == wsRun {
				if err := r.runWarp(w); err != nil {
					return err
				}
			}
		}
		progress, err := r.wake()
		if err != nil {
			return err
		}
		for _, w := range r.warps {
			progress = progress || w.state == wsRun // released by a barrier
		}
		if progress {
			continue
		}
		if r.events != r.idleEv {
			r.idleEv, r.idle = r.events, 0
		}
		if r.idle < maxIdleRounds {
			// test_wait spinners resume even without an mbarrier change: a
			// warp may poll while doing other work; a spin that never sees
			// a change ends as a deadlock after maxIdleRounds
			yielded := false
			for _, w := range r.warps {
				if w.state == wsYield {
					w.state, yielded = wsRun, true
				}
			}
			if yielded {
				r.idle++
				continue
			}
		}
		nexit := 0
		for _, w := range r.warps {
			if w.state == wsExit {
				nexit++
			}
		}
		if nexit == len(r.warps) {
			return r.leftovers()
		}
		return r.stuck()
	}
}

// errf builds an execution error for instruction in; lane < 0 names the warp.
func (r *blockRun) errf(w *warp, in *inst, lane int, format string, args ...any) error {
	e := &Error{File: r.k.mod.File, Line: in.line, Text: in.text, Msg: fmt.Sprintf(format, args...)}
	where := fmt.Sprintf("kernel %s, block (%d,%d,%d)", r.k.Name, r.ctaid[0], r.ctaid[1], r.ctaid[2])
	if lane >= 0 {
		t := w.id*32 + lane
		bx, by := r.block[0], r.block[1]
		where += fmt.Sprintf(", thread (%d,%d,%d)", t%bx, t/bx%by, t/(bx*by))
	} else {
		where += fmt.Sprintf(", warp %d", w.id)
	}
	e.Where = where
	return e
}

// opName is the instruction's opcode as written, without the guard.
func opName(in *inst) string {
	t := in.text
	if strings.HasPrefix(t, "@") {
		_, t, _ = strings.Cut(t, " ")
	}
	op, _, _ := strings.Cut(t, " ")
	return op
}

func lanesString(m uint32) string {
	var parts []string
	for m != 0 {
		l := bits.TrailingZeros32(m)
		parts = append(parts, fmt.Sprint(l))
		m &= m - 1
		if len(parts) == 8 && m != 0 {
			parts = append(parts, "...")
			break
		}
	}
	return strings.Join(parts, ",")
}

func (w *warp) val(o *operand, l int) uint64 {
	if o.kind == oReg {
		return w.regs[int(o.slot)<<5|l]
	}
	return o.imm
}

func (w *warp) set(o *operand, l int, v uint64) {
	w.regs[int(o.slot)<<5|l] = v & o.imm
}

func (w *warp) addr(o *operand, l int) uint64 {
	a := uint64(o.off)
	if o.base >= 0 {
		a += w.regs[int(o.base)<<5|l]
	}
	return a
}

func sizeMask(n int) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

func sext(v uint64, n int) int64 {
	s := uint(64 - 8*n)
	return int64(v<<s) >> s
}

// extend widens an n-byte value by t's signedness.
func extend(v uint64, t dtype) uint64 {
	n := t.size()
	if t.signed() {
		return uint64(sext(v, n))
	}
	return v & sizeMask(n)
}

// prepare fills in the read and write sets and register masks after decoding.
func (in *inst) prepare() (rd, wr, rdp, wrp []int32) {
	for i := range in.dst {
		o := &in.dst[i]
		switch o.kind {
		case oReg:
			o.imm = sizeMask(o.rtyp.size()) // destination registers keep their mask in imm
			wr = append(wr, o.slot)
		case oPred:
			wrp = append(wrp, o.slot)
		case oAddr:
			if o.base >= 0 {
				rd = append(rd, o.base)
			}
		}
	}
	for i := range in.src {
		o := &in.src[i]
		switch o.kind {
		case oReg:
			rd = append(rd, o.slot)
		case oPred:
			rdp = append(rdp, o.slot)
		case oAddr:
			if o.base >= 0 && in.op != opLdmatrix {
				rd = append(rd, o.base)
			}
		}
	}
	return
}

func (r *blockRun) undefErr(w *warp, in *inst, name string, missing uint32) error {
	l := bits.TrailingZeros32(missing)
	return r.errf(w, in, l, "read of register %s before it was written (lanes %s)", name, lanesString(missing))
}

func (r *blockRun) runWarp(w *warp) error {
	k := r.k
	code := k.code
	st := r.st
	limit := r.d.MaxWarpInstructions
	for {
		in := &code[w.pc]
		if st.WarpInstructions >= limit {
			return r.errf(w, in, -1, "more than %d warp instructions executed (endless loop?)", limit)
		}
		active := w.live
		if in.guard >= 0 {
			if m := w.pdef[in.guard] & active; m != active {
				return r.undefErr(w, in, k.predNames[in.guard], active&^m)
			}
			p := w.preds[in.guard]
			if in.guardNeg {
				p = ^p
			}
			active &= p
		}
		w.pc++
		st.WarpInstructions++
		st.ThreadInstructions += int64(bits.OnesCount32(active))
		if active != 0 {
			for _, s := range in.rd {
				if m := w.def[s] & active; m != active {
					return r.undefErr(w, in, k.regNames[s], active&^m)
				}
			}
			for _, s := range in.rdp {
				if m := w.pdef[s] & active; m != active {
					return r.undefErr(w, in, k.predNames[s], active&^m)
				}
			}
		}
		if w.nPend > 0 && in.op != opWgmma && active != 0 {
			if err := r.checkPending(w, in); err != nil {
				return err
			}
		}
		w.icount++
		switch in.op {
		case opWgmma:
			if active != ^uint32(0) {
				return r.errf(w, in, -1, "wgmma.mma_async needs all 32 lanes of the warp active; lanes %s are not", lanesString(^active))
			}
			w.state = wsWG
			return nil
		case opMbarWait:
			if active == 0 {
				continue
			}
			done, err := r.mbarWait(w, in, active)
			if err != nil {
				return err
			}
			if !done && in.sub == 1 { // try_wait: park until the phase completes, then run it again
				w.pc--
				w.state, w.waitIn, w.waitActive = wsMbar, in, active
				return nil
			}
			w.pdef[in.dst[0].slot] |= active
			if !done { // test_wait: let the other warps run
				w.state, w.yieldEv = wsYield, r.events
				return nil
			}
			continue
		case opBra:
			switch active {
			case 0:
			case w.live:
				w.pc = in.target
			default:
				return r.errf(w, in, -1, "divergent branch: lanes %s take it, lanes %s do not (the interpreter requires warp-uniform branches)",
					lanesString(active), lanesString(w.live&^active))
			}
			continue
		case opExit:
			w.live &^= active
			if w.live == 0 {
				w.state = wsExit
				return nil
			}
			continue
		case opBar:
			if active == 0 {
				continue
			}
			if active != w.live {
				return r.errf(w, in, -1, "%s executed by only some lanes of the warp (lanes %s skip it)", opName(in), lanesString(w.live&^active))
			}
			wait, err := r.barrier(w, in, active)
			if err != nil {
				return err
			}
			if wait {
				return nil
			}
			continue
		case opWarpSync, opShfl, opMma, opLdmatrix, opWgFence, opWgCommit, opWgWait, opSetmaxnreg:
			if active != ^uint32(0) {
				return r.errf(w, in, -1, "%s needs all 32 lanes of the warp active; lanes %s are not", opName(in), lanesString(^active))
			}
		default:
			if active == 0 {
				continue
			}
		}
		if err := r.exec(w, in, active); err != nil {
			return err
		}
		for _, s := range in.wr {
			w.def[s] |= active
			w.wstamp[s] = w.icount
		}
		for _, s := range in.wrp {
			w.pdef[s] |= active
		}
	}
}

// exec runs one non-control instruction over the active lanes.
func (r *blockRun) exec(w *warp, in *inst, active uint32) error {
	switch in.op {
	case opLdParam:
		n := in.typ.size()
		off := in.src[0].off
		if off < 0 || int(off)+n > len(r.params) {
			return r.errf(w, in, -1, "ld.param outside the parameter buffer")
		}
		var v uint64
		if n == 8 {
			v = binary.LittleEndian.Uint64(r.params[off:])
		} else {
			v = uint64(binary.LittleEndian.Uint32(r.params[off:]))
		}
		v = extend(v, in.typ)
		for m := active; m != 0; m &= m - 1 {
			w.set(&in.dst[0], bits.TrailingZeros32(m), v)
		}
	case opMov:
		d, s := &in.dst[0], &in.src[0]
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(d, l, w.val(s, l))
		}
	case opMovPack:
		sh := uint(in.typ.size() * 4)
		hm := sizeMask(in.typ.size() / 2)
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&in.dst[0], l, w.val(&in.src[0], l)&hm|(w.val(&in.src[1], l)&hm)<<sh)
		}
	case opMovUnpack:
		sh := uint(in.typ.size() * 4)
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			v := w.val(&in.src[0], l)
			w.set(&in.dst[0], l, v)
			w.set(&in.dst[1], l, v>>sh)
		}
	case opInt2:
		n := in.typ.size()
		mask := sizeMask(n)
		signed := in.typ.signed()
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b := w.val(&in.src[0], l)&mask, w.val(&in.src[1], l)
			var v uint64
			switch in.sub {
			case iAdd:
				v = a + b
			case iSub:
				v = a - b
			case iMulLo:
				v = a * b
			case iMulHi:
				v = mulHi(a, b&mask, n, signed)
			case iDiv, iRem:
				b &= mask
				if b == 0 {
					return r.errf(w, in, l, "integer division by zero")
				}
				if signed {
					x, y := sext(a, n), sext(b, n)
					if y == -1 { // avoid the MinInt/-1 trap: the quotient wraps, the remainder is 0
						if in.sub == iDiv {
							v = uint64(-x)
						}
					} else if in.sub == iDiv {
						v = uint64(x / y)
					} else {
						v = uint64(x % y)
					}
				} else if in.sub == iDiv {
					v = a / b
				} else {
					v = a % b
				}
			case iMin, iMax:
				b &= mask
				less := a < b
				if signed {
					less = sext(a, n) < sext(b, n)
				}
				if less == (in.sub == iMin) {
					v = a
				} else {
					v = b
				}
			case iAnd:
				v = a & b
			case iOr:
				v = a | b
			case iXor:
				v = a ^ b
			case iShl:
				if s := uint32(b); s < uint32(8*n) {
					v = a << s
				}
			case iShr:
				s := uint32(b)
				if signed {
					s = min(s, uint32(8*n-1))
					v = uint64(sext(a, n) >> s)
				} else if s < uint32(8*n) {
					v = a >> s
				}
			}
			w.set(&in.dst[0], l, v&mask)
		}
	case opInt1:
		n := in.typ.size()
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a := w.val(&in.src[0], l)
			var v uint64
			switch in.sub {
			case iNot:
				v = ^a
			case iNeg:
				v = -a
			case iAbs:
				if x := sext(a, n); x < 0 {
					v = uint64(-x)
				} else {
					v = uint64(x)
				}
			}
			w.set(&in.dst[0], l, v)
		}
	case opMulWide:
		n := in.typ.size()
		signed := in.typ.signed()
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b := w.val(&in.src[0], l), w.val(&in.src[1], l)
			var v uint64
			if signed {
				v = uint64(sext(a, n) * sext(b, n))
			} else {
				mask := sizeMask(n)
				v = (a & mask) * (b & mask)
			}
			w.set(&in.dst[0], l, v)
		}
	case opMad:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&in.dst[0], l, w.val(&in.src[0], l)*w.val(&in.src[1], l)+w.val(&in.src[2], l))
		}
	case opMadWide:
		signed := in.typ.signed()
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b, c := w.val(&in.src[0], l), w.val(&in.src[1], l), w.val(&in.src[2], l)
			var v uint64
			if signed {
				v = uint64(sext(a, 4)*sext(b, 4)) + c
			} else {
				v = (a&0xffffffff)*(b&0xffffffff) + c
			}
			w.set(&in.dst[0], l, v)
		}
	case opSetp:
		var res uint32
		n := in.typ.size()
		mask := sizeMask(n)
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b := w.val(&in.src[0], l)&mask, w.val(&in.src[1], l)&mask
			var t bool
			switch {
			case in.typ == tF32:
				x, y := f32of(a), f32of(b)
				if in.flags&flFtz != 0 {
					x, y = ftz(x), ftz(y)
				}
				t = cmpF32(in.cmp, x, y)
			case in.typ.signed():
				t = cmpInt(in.cmp, sext(a, n) < sext(b, n), a == b)
			default:
				t = cmpInt(in.cmp, a < b, a == b)
			}
			if t {
				res |= 1 << l
			}
		}
		p, q := res, ^res
		if in.flags&flCombine != 0 {
			c := w.preds[in.src[2].slot]
			if in.src[2].neg {
				c = ^c
			}
			p, q = boolOp(in.bop, p, c), boolOp(in.bop, q, c)
		}
		w.setPred(in.dst[0].slot, active, p)
		if in.flags&flPair != 0 {
			w.setPred(in.dst[1].slot, active, q)
		}
	case opSelp:
		pm := w.preds[in.src[2].slot]
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			if pm>>l&1 != 0 {
				w.set(&in.dst[0], l, w.val(&in.src[0], l))
			} else {
				w.set(&in.dst[0], l, w.val(&in.src[1], l))
			}
		}
	case opPred2:
		a, b := w.preds[in.src[0].slot], w.preds[in.src[1].slot]
		w.setPred(in.dst[0].slot, active, boolOp(in.sub, a, b))
	case opPredNot:
		w.setPred(in.dst[0].slot, active, ^w.preds[in.src[0].slot])
	case opCvta:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			v := w.val(&in.src[0], l)
			if in.space == spShared {
				if in.flags&flToSpace != 0 {
					if v < SharedWindow || v >= SharedWindow+uint64(len(r.sm)) {
						return r.errf(w, in, l, "cvta.to.shared of %#x, which is not a generic shared address", v)
					}
					v -= SharedWindow
				} else {
					v += SharedWindow
				}
			}
			w.set(&in.dst[0], l, v)
		}
	case opCvtInt:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			v := extend(w.val(&in.src[0], l), in.typ2)
			w.set(&in.dst[0], l, extend(v, in.typ))
		}
	case opCvtIF:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			v := extend(w.val(&in.src[0], l), in.typ2)
			w.set(&in.dst[0], l, bitsOf(intToF32(v, in.typ2.signed(), in.rnd)))
		}
	case opCvtFI:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			x := f32of(w.val(&in.src[0], l))
			if in.flags&flFtz != 0 {
				x = ftz(x)
			}
			w.set(&in.dst[0], l, extend(f32ToInt(x, in.typ, in.rnd), in.typ))
		}
	case opCvtPack:
		conv := f32ToBF16
		if in.flags&flF16 != 0 {
			conv = f32ToF16
		}
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b := uint32(w.val(&in.src[0], l)), uint32(w.val(&in.src[1], l))
			w.set(&in.dst[0], l, uint64(conv(a))<<16|uint64(conv(b)))
		}
	case opCvtHalf:
		conv := f32ToBF16
		if in.flags&flF16 != 0 {
			conv = f32ToF16
		}
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.set(&in.dst[0], l, uint64(conv(uint32(w.val(&in.src[0], l)))))
		}
	case opCvtWiden:
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			h := uint16(w.val(&in.src[0], l))
			if in.flags&flF16 != 0 {
				w.set(&in.dst[0], l, uint64(f16ToF32(h)))
			} else {
				w.set(&in.dst[0], l, uint64(bf16ToF32(h)))
			}
		}
	case opF2:
		fz := in.flags&flFtz != 0
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b := f32of(w.val(&in.src[0], l)), f32of(w.val(&in.src[1], l))
			if fz {
				a, b = ftz(a), ftz(b)
			}
			var v float32
			switch in.sub {
			case fAdd:
				v = a + b
			case fSub:
				v = a - b
			case fMul:
				v = a * b
			case fDiv:
				v = a / b
			case fMin:
				v = minF32(a, b)
			case fMax:
				v = maxF32(a, b)
			}
			if fz {
				v = ftz(v)
			}
			w.set(&in.dst[0], l, bitsOf(v))
		}
	case opFma:
		fz := in.flags&flFtz != 0
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			a, b, c := f32of(w.val(&in.src[0], l)), f32of(w.val(&in.src[1], l)), f32of(w.val(&in.src[2], l))
			if fz {
				a, b, c = ftz(a), ftz(b), ftz(c)
			}
			v := fmaF32(a, b, c)
			if fz {
				v = ftz(v)
			}
			w.set(&in.dst[0], l, bitsOf(v))
		}
	case opF1:
		fz := in.flags&flFtz != 0
		for m := active; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			u := w.val(&in.src[0], l)
			var v uint64
			switch in.sub {
			case fNeg, fAbs:
				if fz {
					u = uint64(math.Float32bits(ftz(f32of(u))))
				}
				if in.sub == fNeg {
					v = u ^ 0x80000000
				} else {
					v = u &^ 0x80000000
				}
			case fEx2:
				v = bitsOf(ex2Approx(f32of(u), fz))
			case fLg2:
				v = bitsOf(lg2Approx(f32of(u), fz))
			case fRcpApprox:
				v = bitsOf(rcpApproxFtz(f32of(u)))
			case fRcpRN:
				v = bitsOf(1 / f32of(u))
			}
			w.set(&in.dst[0], l, v)
		}
	case opLd, opSt:
		return r.ldst(w, in, active)
	case opCpAsync:
		return r.cpAsync(w, in, active)
	case opCpCommit:
		for m := active; m != 0; m &= m - 1 {
			a := &w.async[bits.TrailingZeros32(m)]
			a.ends = append(a.ends, len(a.chunks))
		}
	case opCpWait:
		for m := active; m != 0; m &= m - 1 {
			a := &w.async[bits.TrailingZeros32(m)]
			if in.flags&flWaitAll != 0 {
				a.ends = append(a.ends, len(a.chunks))
			}
			done := len(a.ends) - int(in.imm)
			if done <= 0 {
				continue
			}
			n := a.ends[done-1]
			for _, c := range a.chunks[:n] {
				r.completeCopy(w, c)
			}
			a.chunks = a.chunks[:copy(a.chunks, a.chunks[n:])]
			a.ends = a.ends[:copy(a.ends, a.ends[done:])]
			for i := range a.ends {
				a.ends[i] -= n
			}
		}
	case opWarpSync:
	case opShfl:
		return r.shfl(w, in)
	case opMma:
		return r.mma(w, in)
	case opLdmatrix:
		return r.ldmatrix(w, in)
	case opWgFence:
		w.fenceAt = w.icount
	case opWgCommit:
		if w.wgOpen != 0 {
			w.wgGroups = append(w.wgGroups, w.wgOpen)
			w.wgOpen = 0
		}
	case opWgWait:
		r.wgWait(w, int(in.imm))
	case opMbarInit, opMbarArrive, opMbarExpectTx, opMbarInval:
		return r.mbarOp(w, in, active)
	case opBulkTensor:
		return r.bulkTensor(w, in, active)
	case opSetmaxnreg, opNop:
	default:
		panic(fmt.Sprintf("BUG: opcode %d reached exec", in.op))
	}
	return nil
}

func (w *warp) setPred(slot int32, active, v uint32) {
	w.preds[slot] = w.preds[slot]&^active | v&active
}

func boolOp(op uint8, a, b uint32) uint32 {
	switch op {
	case iAnd:
		return a & b
	case iOr:
		return a | b
	}
	return a ^ b
}

func cmpInt(c uint8, less, eq bool) bool {
	switch c {
	case cmpEq:
		return eq
	case cmpNe:
		return !eq
	case cmpLt:
		return less
	case cmpLe:
		return less || eq
	case cmpGt:
		return !less && !eq
	case cmpGe:
		return !less
	}
	panic("BUG: integer comparison")
}

func cmpF32(c uint8, a, b float32) bool {
	nan := a != a || b != b
	switch c {
	case cmpEq:
		return a == b
	case cmpNe:
		return !nan && a != b
	case cmpLt:
		return a < b
	case cmpLe:
		return a <= b
	case cmpGt:
		return a > b
	case cmpGe:
		return a >= b
	case cmpEqu:
		return nan || a == b
	case cmpNeu:
		return a != b
	case cmpLtu:
		return nan || a < b
	case cmpLeu:
		return nan || a <= b
	case cmpGtu:
		return nan || a > b
	case cmpGeu:
		return nan || a >= b
	case cmpNum:
		return !nan
	case cmpNan:
		return nan
	}
	panic("BUG: float comparison")
}

func mulHi(a, b uint64, n int, signed bool) uint64 {
	if n == 8 {
		hi, _ := bits.Mul64(a, b)
		if signed {
			if int64(a) < 0 {
				hi -= b
			}
			if int64(b) < 0 {
				hi -= a
			}
		}
		return hi
	}
	if signed {
		return uint64(sext(a, n)*sext(b, n)) >> (8 * n)
	}
	return a * b >> (8 * n)
}

// resolve maps an address of space sp to (is shared, offset) after bounds
// and alignment checks.
func (r *blockRun) resolve(w *warp, in *inst, l int, sp space, a uint64, n, align int) (bool, int, error) {
	if a%uint64(align) != 0 {
		return false, 0, r.errf(w, in, l, "misaligned %d-byte access at %s address %#x", n, sp, a)
	}
	if sp == spGeneric {
		switch {
		case a >= SharedWindow && a < SharedWindow+uint64(len(r.sm)):
			sp, a = spShared, a-SharedWindow
		case a >= GlobalBase:
			sp = spGlobal
		default:
			return false, 0, r.errf(w, in, l, "generic address %#x is in neither global nor shared memory", a)
		}
	}
	if sp == spShared {
		if a > uint64(len(r.sm)) || int(a)+n > len(r.sm) {
			return false, 0, r.errf(w, in, l, "out-of-bounds shared access of %d bytes at offset %#x (shared memory is %d bytes)", n, a, len(r.sm))
		}
		return true, int(a), nil
	}
	off, ok := r.d.global(a, n)
	if !ok {
		return false, 0, r.errf(w, in, l, "out-of-bounds global access of %d bytes at %#x", n, a)
	}
	return false, off, nil
}

func (r *blockRun) ldst(w *warp, in *inst, active uint32) error {
	es := in.typ.size()
	n := es * int(in.vec)
	load := in.op == opLd
	ao := &in.src[0]
	if !load {
		ao = &in.dst[0]
	}
	for m := active; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		sh, off, err := r.resolve(w, in, l, in.space, w.addr(ao, l), n, n)
		if err != nil {
			return err
		}
		mem := r.d.mem
		if !sh && !load && r.d.OnGlobalStore != nil {
			r.d.OnGlobalStore(r.ctaid, GlobalBase+uint64(off), n)
		}
		if sh {
			mem = r.sm
			if len(r.mbars) > 0 {
				if a, ok := r.mbarOverlap(off, n); ok {
					return r.errf(w, in, l, "ld/st of the mbarrier object at shared offset %#x (only mbarrier instructions may access it)", a)
				}
			}
			var msg string
			if load {
				msg = r.shRead(w, off, n)
			} else {
				msg = r.shWrite(w, off, n)
			}
			if msg != "" {
				return r.errf(w, in, l, "%s", msg)
			}
		}
		for e := 0; e < int(in.vec); e++ {
			p := mem[off+e*es : off+e*es+es]
			if load {
				var v uint64
				switch es {
				case 1:
					v = uint64(p[0])
				case 2:
					v = uint64(binary.LittleEndian.Uint16(p))
				case 4:
					v = uint64(binary.LittleEndian.Uint32(p))
				case 8:
					v = binary.LittleEndian.Uint64(p)
				}
				w.set(&in.dst[e], l, extend(v, in.typ))
			} else {
				v := w.val(&in.src[e], l)
				switch es {
				case 1:
					p[0] = byte(v)
				case 2:
					binary.LittleEndian.PutUint16(p, uint16(v))
				case 4:
					binary.LittleEndian.PutUint32(p, uint32(v))
				case 8:
					binary.LittleEndian.PutUint64(p, v)
				}
			}
		}
	}
	return nil
}

func (r *blockRun) tag(w *warp) uint32 { return w.vc[w.id]<<6 | uint32(w.id+1) }

// ordered reports whether a shared write stamped ws (clock<<6 | warp+1)
// is ordered before warp w's accesses: unwritten, written by w, by a
// completed bulk copy (whose bytes are ordered by its mbarrier), or by a
// warp whose clock at the write w has since joined through barriers.
func (r *blockRun) ordered(w *warp, ws uint32) bool {
	x := ws & 63
	return ws == 0 || x == asyncWriter || int(x) == w.id+1 || w.vc[x-1] >= ws>>6
}

// shRead checks a warp's load of shared bytes [off, off+n) and records it;
// it returns a description of the problem, or "".
func (r *blockRun) shRead(w *warp, off, n int) string {
	if !r.shadow {
		return ""
	}
	nw := len(r.warps)
	me := w.vc[w.id]
	for i := off; i < off+n; i++ {
		ws := r.wsh[i]
		if r.d.CheckRaces {
			if r.pend[i] {
				return fmt.Sprintf("load of shared offset %#x, which a cp.async has not completed (missing cp.async.wait_group?)", i)
			}
			if !r.ordered(w, ws) {
				return fmt.Sprintf("race: load of shared offset %#x written by warp %d since the last barrier", i, ws&63-1)
			}
			if a := r.aph[i]; a != 0 && w.seen[int(a>>32)] < a&0xffffffff {
				return fmt.Sprintf("load of shared offset %#x, which a bulk copy wrote, before this warp observed the completion of its mbarrier (shared offset %#x) phase %d (missing mbarrier.try_wait, or a bar.sync after another warp's)", i, a>>32, a&0xffffffff-1)
			}
			r.rclk[i*nw+w.id] = me
		}
		if r.d.CheckUninitShared && ws == 0 && !r.pend[i] {
			return fmt.Sprintf("load of shared offset %#x, which no thread of this block has written", i)
		}
	}
	return ""
}

// shWrite checks a warp's store to shared bytes [off, off+n) and records it.
func (r *blockRun) shWrite(w *warp, off, n int) string {
	if !r.shadow {
		return ""
	}
	t := r.tag(w)
	for i := off; i < off+n; i++ {
		if r.d.CheckRaces {
			if msg := r.raceOnWrite(w, i); msg != "" {
				return msg
			}
		}
		r.wsh[i] = t
		r.aph[i] = 0
	}
	return ""
}

func (r *blockRun) raceOnWrite(w *warp, i int) string {
	if r.pend[i] {
		return fmt.Sprintf("store to shared offset %#x, which a cp.async has not completed", i)
	}
	if ws := r.wsh[i]; !r.ordered(w, ws) {
		return fmt.Sprintf("race: store to shared offset %#x also written by warp %d since the last barrier", i, ws&63-1)
	}
	return r.readRace(w, i, "store to")
}

// readRace reports a read of shared byte i by another warp that is not
// ordered before warp w's write (what names the write).
func (r *blockRun) readRace(w *warp, i int, what string) string {
	nw := len(r.warps)
	for x, t := range r.rclk[i*nw : i*nw+nw] {
		if x != w.id && t != 0 && w.vc[x] < t {
			return fmt.Sprintf("race: %s shared offset %#x read by warp %d since the last barrier", what, i, x)
		}
	}
	return ""
}

// barrier runs warp w's bar.sync / bar.arrive (in): its whole warp
// arrives at named barrier a, which completes when b threads (whole warps)
// have arrived; b is every thread of the block when omitted. It reports
// whether the warp waits.
func (r *blockRun) barrier(w *warp, in *inst, active uint32) (bool, error) {
	l := bits.TrailingZeros32(active)
	uniform := func(o *operand) (uint64, error) {
		v := w.val(o, l)
		for m := active; m != 0; m &= m - 1 {
			if u := w.val(o, bits.TrailingZeros32(m)); u != v {
				return 0, r.errf(w, in, -1, "%s: the lanes of the warp give different operands (%d and %d)", opName(in), v, u)
			}
		}
		return v, nil
	}
	id, err := uniform(&in.src[0])
	if err != nil {
		return false, err
	}
	threads := r.block[0] * r.block[1] * r.block[2]
	all := 32 * len(r.warps)
	count := all
	if len(in.src) > 1 {
		c, err := uniform(&in.src[1])
		if err != nil {
			return false, err
		}
		count = int(min(c, 1<<31))
	}
	switch {
	case id > 15:
		return false, r.errf(w, in, -1, "barrier %d: named barriers are 0 to 15", id)
	case count == 0 || count%32 != 0:
		return false, r.errf(w, in, -1, "barrier %d: thread count %d is not a positive multiple of the warp size (32)", id, count)
	case count > all:
		return false, r.errf(w, in, -1, "barrier %d: thread count %d exceeds the block's %d threads", id, count, threads)
	}
	b := &r.bars[id]
	if b.count == 0 {
		b.count, b.first = count, in
		if b.join == nil {
			b.join = make([]uint32, len(r.warps))
		}
	} else if b.count != count {
		return false, r.errf(w, in, -1, "barrier %d: this warp arrives expecting %d threads, others (%s) expect %d", id, count, b.first.text, b.count)
	}
	b.arrived += 32
	for x, t := range w.vc {
		b.join[x] = max(b.join[x], t)
	}
	for off, ph := range w.seen {
		if b.seen == nil {
			b.seen = map[int]uint64{}
		}
		b.seen[off] = max(b.seen[off], ph)
	}
	w.vc[w.id]++ // the warp's later accesses are not covered by this arrival
	wait := in.sub == 0
	if wait {
		b.waiters = append(b.waiters, w)
		w.state, w.waitBar = wsBar, int(id)
	}
	if b.arrived < b.count {
		return wait, nil
	}
	r.st.Barriers++
	for _, x := range b.waiters {
		for i, t := range b.join {
			x.vc[i] = max(x.vc[i], t)
		}
		if len(b.seen) > 0 && x.seen == nil {
			x.seen = map[int]uint64{}
		}
		for off, ph := range b.seen {
			x.seen[off] = max(x.seen[off], ph)
		}
		x.state = wsRun
	}
	clear(b.join)
	*b = barState{join: b.join}
	// a waiting warp that completed the barrier yields, so that the
	// released warps resume in warp order
	return wait, nil
}

// stuck is the error of a block in which no warp can continue: a barrier
// that counts threads which have exited, or a deadlock.
func (r *blockRun) stuck() error {
	for id := range r.bars {
		b := &r.bars[id]
		if b.count == 0 || len(b.waiters) == 0 {
			continue
		}
		can := b.arrived
		for _, w := range r.warps {
			if w.state != wsExit && w.state != wsBar {
				can += 32
			}
		}
		for _, w := range r.warps {
			if w.state == wsExit || w.live != w.full {
				if can < b.count {
					x := b.waiters[0]
					return r.errf(x, &r.k.code[x.pc-1], -1, "barrier reached while thread(s) of warp %d have exited (a barrier must be reached by every thread it counts: %d of %d arrived)", w.id, b.arrived, b.count)
				}
			}
		}
	}
	return r.deadlock()
}

// cpAsync copies at issue; the bytes stay pending (unreadable) until the
// issuing thread waits for their group, and count as written by the issuing
// warp at that moment.
func (r *blockRun) cpAsync(w *warp, in *inst, active uint32) error {
	n := int(in.vec)
	for m := active; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		_, doff, err := r.resolve(w, in, l, spShared, w.addr(&in.dst[0], l), n, n)
		if err != nil {
			return err
		}
		srcN := n
		if in.flags&flZfill != 0 {
			s := w.val(&in.src[1], l) & 0xffffffff
			if s > uint64(n) {
				return r.errf(w, in, l, "cp.async src-size %d exceeds the copy size %d", s, n)
			}
			srcN = int(s)
		}
		sa := w.addr(&in.src[0], l)
		if sa%uint64(n) != 0 {
			return r.errf(w, in, l, "misaligned cp.async source %#x (needs %d-byte alignment)", sa, n)
		}
		soff := 0
		if srcN > 0 {
			_, soff, err = r.resolve(w, in, l, spGlobal, sa, srcN, 1)
			if err != nil {
				return err
			}
		}
		if r.shadow {
			for i := doff; i < doff+n; i++ {
				if r.d.CheckRaces {
					if r.pend[i] {
						return r.errf(w, in, l, "cp.async to shared offset %#x, which an earlier cp.async has not completed", i)
					}
					if msg := r.raceOnWrite(w, i); msg != "" {
						return r.errf(w, in, l, "%s", msg)
					}
				}
				r.pend[i] = true
			}
		}
		copy(r.sm[doff:doff+srcN], r.d.mem[soff:soff+srcN])
		clear(r.sm[doff+srcN : doff+n])
		a := &w.async[l]
		a.chunks = append(a.chunks, chunk{uint32(doff), uint32(n)})
	}
	return nil
}

func (r *blockRun) completeCopy(w *warp, c chunk) {
	if !r.shadow {
		return
	}
	t := r.tag(w)
	for i := int(c.off); i < int(c.off+c.n); i++ {
		r.pend[i] = false
		r.wsh[i] = t
		r.aph[i] = 0
	}
}

func (r *blockRun) shfl(w *warp, in *inst) error {
	var src [32]uint64
	var ok uint32
	for l := 0; l < 32; l++ {
		src[l] = w.val(&in.src[0], l)
	}
	for l := 0; l < 32; l++ {
		b := int(w.val(&in.src[1], l) & 31)
		c := int(w.val(&in.src[2], l))
		clampv, seg := c&31, c>>8&31
		maxLane := l&seg | clampv&^seg
		minLane := l & seg
		var j int
		var pval bool
		switch in.sub {
		case shflUp:
			j = l - b
			pval = j >= maxLane
		case shflDown:
			j = l + b
			pval = j <= maxLane
		case shflBfly:
			j = l ^ b
			pval = j <= maxLane
		case shflIdx:
			j = minLane | b&^seg
			pval = j <= maxLane
		}
		if !pval {
			j = l
		}
		r.tmp[l] = src[j]
		if pval {
			ok |= 1 << l
		}
	}
	for l := 0; l < 32; l++ {
		w.set(&in.dst[0], l, r.tmp[l])
	}
	if in.flags&flPair != 0 {
		w.setPred(in.dst[1].slot, ^uint32(0), ok)
	}
	return nil
}

func (r *blockRun) mma(w *warp, in *inst) error {
	for l := 0; l < 32; l++ {
		for i := 0; i < 4; i++ {
			r.ma[l*4+i] = uint32(w.val(&in.src[i], l))
			r.mc[l*4+i] = uint32(w.val(&in.src[6+i], l))
		}
		r.mb[l*2] = uint32(w.val(&in.src[4], l))
		r.mb[l*2+1] = uint32(w.val(&in.src[5], l))
	}
	mmaWarp(&r.ma, &r.mb, &r.mc, &r.md, in.flags&flF16 != 0)
	for l := 0; l < 32; l++ {
		for i := 0; i < 4; i++ {
			w.set(&in.dst[i], l, uint64(r.md[l*4+i]))
		}
	}
	return nil
}

// ldmatrix: lanes 8i..8i+7 give the row addresses of matrix i (16 bytes,
// 16-byte aligned, eight b16 elements). Without .trans lane l receives row
// l/4, elements 2(l%4) and 2(l%4)+1 (low half first); with .trans it
// receives column l/4, rows 2(l%4) and 2(l%4)+1.
func (r *blockRun) ldmatrix(w *warp, in *inst) error {
	nm := int(in.vec)
	ao := &in.src[0]
	used := uint32(1)<<(8*nm) - 1
	if nm == 4 {
		used = ^uint32(0)
	}
	if ao.base >= 0 {
		if m := w.def[ao.base] & used; m != used {
			return r.undefErr(w, in, r.k.regNames[ao.base], used&^m)
		}
	}
	var rows [4][8][8]uint16
	for i := 0; i < nm; i++ {
		for rr := 0; rr < 8; rr++ {
			l := 8*i + rr
			_, off, err := r.resolve(w, in, l, spShared, w.addr(ao, l), 16, 16)
			if err != nil {
				return err
			}
			if msg := r.shRead(w, off, 16); msg != "" {
				return r.errf(w, in, l, "%s", msg)
			}
			for e := 0; e < 8; e++ {
				rows[i][rr][e] = binary.LittleEndian.Uint16(r.sm[off+2*e:])
			}
		}
	}
	trans := in.flags&flTrans != 0
	for i := 0; i < nm; i++ {
		for l := 0; l < 32; l++ {
			var lo, hi uint16
			if trans {
				lo, hi = rows[i][2*(l%4)][l/4], rows[i][2*(l%4)+1][l/4]
			} else {
				lo, hi = rows[i][l/4][2*(l%4)], rows[i][l/4][2*(l%4)+1]
			}
			w.set(&in.dst[i], l, uint64(lo)|uint64(hi)<<16)
		}
	}
	return nil
}
