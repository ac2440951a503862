package cuda

import (
	"errors"
	"time"
)

// Event is a CUDA event, used here to time GPU work.
type Event struct {
	ctx    *Context
	handle uintptr // CUevent; 0 once destroyed
}

// NewEvent creates an event with timing enabled (cuEventCreate, flags 0).
func (c *Context) NewEvent() (*Event, error) {
	if err := c.usable("Context.NewEvent"); err != nil {
		return nil, err
	}
	var h uintptr
	if err := c.do("cuEventCreate", func() Result { return c.drv.cuEventCreate(&h, 0) }); err != nil {
		return nil, err
	}
	return &Event{ctx: c, handle: h}, nil
}

// usable returns nil for an Event made by Context.NewEvent (destroyed or
// not), else the error of method called on it.
func (e *Event) usable(method string) error {
	if e == nil || e.ctx.usable(method) != nil {
		return zeroValue(method, "*Event", "Context.NewEvent")
	}
	return nil
}

// Record records the event on the default stream (cuEventRecord).
func (e *Event) Record() error {
	if err := e.usable("Event.Record"); err != nil {
		return err
	}
	if e.handle == 0 {
		return errNilHandle
	}
	return e.ctx.do("cuEventRecord", func() Result { return e.ctx.drv.cuEventRecord(e.handle, 0) })
}

// Synchronize waits until the work before the event's record has finished
// (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if err := e.usable("Event.Synchronize"); err != nil {
		return err
	}
	if e.handle == 0 {
		return errNilHandle
	}
	return e.ctx.do("cuEventSynchronize", func() Result { return e.ctx.drv.cuEventSynchronize(e.handle) })
}

// Elapsed is the GPU time from e's record to end's (cuEventElapsedTime, whose
// resolution is about half a microsecond). Both must have completed.
func (e *Event) Elapsed(end *Event) (time.Duration, error) {
	if err := e.usable("Event.Elapsed"); err != nil {
		return 0, err
	}
	if err := end.usable("Event.Elapsed (end event)"); err != nil {
		return 0, err
	}
	if e.handle == 0 || end.handle == 0 {
		return 0, errNilHandle
	}
	var ms float32
	if err := e.ctx.do("cuEventElapsedTime", func() Result { return e.ctx.drv.cuEventElapsedTime(&ms, e.handle, end.handle) }); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event (cuEventDestroy_v2). Destroying twice is a no-op.
func (e *Event) Destroy() error {
	if err := e.usable("Event.Destroy"); err != nil {
		return err
	}
	if e.handle == 0 {
		return nil
	}
	h := e.handle
	e.handle = 0
	return e.ctx.do("cuEventDestroy_v2", func() Result { return e.ctx.drv.cuEventDestroy(h) })
}

// Time runs work between two recorded events and returns the GPU time it
// took, waiting for it to finish. work typically launches kernels.
func (c *Context) Time(work func() error) (time.Duration, error) {
	if err := c.usable("Context.Time"); err != nil {
		return 0, err
	}
	if work == nil {
		return 0, errors.New("cuda: Context.Time: nil work function")
	}
	start, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	if err := start.Record(); err != nil {
		return 0, err
	}
	if err := work(); err != nil {
		return 0, err
	}
	if err := end.Record(); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	return start.Elapsed(end)
}
