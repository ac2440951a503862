package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Launch launches fn on the default stream (cuLaunchKernel) with a grid of
// grid blocks of block threads and sharedBytes of dynamic shared memory. The
// launch is asynchronous: errors of the kernel itself surface at the next
// synchronizing call ([Context.Synchronize], a copy, [Event.Synchronize]).
//
// args are the kernel's parameters in order. Each must have the size of the
// PTX parameter it fills: *Buffer and DevicePtr (a .u64 address), int32,
// uint32, float32 (.s32/.u32/.b32/.f32), int64, uint64, float64 (.64 types).
// Go's int, being of no fixed C size, is refused.
func Launch(fn *Function, grid, block [3]uint32, sharedBytes uint32, args ...any) error {
	if err := fn.usable("Launch"); err != nil {
		return err
	}
	// One 8-byte slot per argument, each value in the slot's first bytes, and
	// an array of pointers to the slots: the void** kernelParams.
	slots := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		p := unsafe.Pointer(&slots[i])
		switch v := a.(type) {
		case *Buffer:
			if v == nil || v.ptr == 0 {
				return fmt.Errorf("cuda: launch %s: argument %d: nil or freed buffer", fn.Name, i)
			}
			*(*uint64)(p) = uint64(v.ptr)
		case DevicePtr:
			*(*uint64)(p) = uint64(v)
		case int32:
			*(*int32)(p) = v
		case uint32:
			*(*uint32)(p) = v
		case float32:
			*(*uint32)(p) = math.Float32bits(v)
		case int64:
			*(*int64)(p) = v
		case uint64:
			*(*uint64)(p) = v
		case float64:
			*(*uint64)(p) = math.Float64bits(v)
		default:
			return fmt.Errorf("cuda: launch %s: argument %d: unsupported type %T (want *Buffer, DevicePtr, int32, uint32, float32, int64, uint64 or float64)", fn.Name, i, a)
		}
		params[i] = p
	}
	return fn.LaunchParams(grid, block, sharedBytes, params)
}

// LaunchParams is [Launch] with the kernel parameters given the driver's way:
// params[i] points at the value of parameter i, which must stay unchanged
// until LaunchParams returns (the driver copies the values during the call).
func (f *Function) LaunchParams(grid, block [3]uint32, sharedBytes uint32, params []unsafe.Pointer) error {
	if err := f.usable("Function.LaunchParams"); err != nil {
		return err
	}
	if f.mod.handle == 0 {
		return errNilHandle
	}
	// params is Go memory holding Go pointers that the driver dereferences:
	// pin what they point at (a no-op for non-Go memory) for the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	var kp *unsafe.Pointer
	if len(params) > 0 {
		for _, p := range params {
			if p == nil {
				return fmt.Errorf("cuda: launch %s: nil kernel parameter pointer", f.Name)
			}
			pin.Pin(p)
		}
		kp = &params[0]
	}
	err := f.ctx.do("cuLaunchKernel", func() Result {
		return f.ctx.drv.cuLaunchKernel(f.handle,
			grid[0], grid[1], grid[2], block[0], block[1], block[2],
			sharedBytes, 0, kp, nil)
	})
	runtime.KeepAlive(params)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Func = fmt.Sprintf("cuLaunchKernel(%s, grid %v, block %v, shared %d)", f.Name, grid, block, sharedBytes)
		}
	}
	return err
}
