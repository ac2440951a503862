package cuda

import (
	"runtime"
	"sync"
)

// Context is a device's primary context, retained by [Device.PrimaryContext]
// and released by [Context.Release]. Modules, buffers and events belong to it
// and die with it when its last retain is released.
//
// CUDA makes a context current per OS thread. Every method that needs the
// context locks the calling goroutine to its thread for the length of the call
// and makes the context current first, so a Context may be used from any
// goroutine. Code that calls the driver by other means must lock the goroutine
// with runtime.LockOSThread and call [Context.MakeCurrent] itself.
type Context struct {
	drv    *Driver
	dev    *Device
	mu     sync.Mutex
	handle uintptr // CUcontext; 0 once released
}

// PrimaryContext retains the device's primary context (cuDevicePrimaryCtxRetain),
// the one the CUDA runtime and PyTorch share. Release it when done.
func (dev *Device) PrimaryContext() (*Context, error) {
	if err := dev.usable("Device.PrimaryContext"); err != nil {
		return nil, err
	}
	var h uintptr
	if err := dev.drv.check("cuDevicePrimaryCtxRetain", dev.drv.cuDevicePrimaryCtxRetain(&h, dev.handle)); err != nil {
		return nil, err
	}
	return &Context{drv: dev.drv, dev: dev, handle: h}, nil
}

// Device is the device the context belongs to (nil for a nil Context).
func (c *Context) Device() *Device {
	if c == nil {
		return nil
	}
	return c.dev
}

// Driver is the driver the context was made by (nil for a nil Context).
func (c *Context) Driver() *Driver {
	if c == nil {
		return nil
	}
	return c.drv
}

// usable returns nil for a Context made by Device.PrimaryContext (released
// or not), else the error of method called on it.
func (c *Context) usable(method string) error {
	if c == nil || c.dev.usable(method) != nil || c.drv != c.dev.drv {
		return zeroValue(method, "*Context", "Device.PrimaryContext")
	}
	return nil
}

// Release drops this retain of the primary context
// (cuDevicePrimaryCtxRelease). When no retain is left the driver destroys the
// context and everything allocated in it. Releasing twice is a no-op.
func (c *Context) Release() error {
	if err := c.usable("Context.Release"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handle == 0 {
		return nil
	}
	c.handle = 0
	return c.drv.check("cuDevicePrimaryCtxRelease", c.drv.cuDevicePrimaryCtxRelease(c.dev.handle))
}

// MakeCurrent makes the context current on the calling OS thread
// (cuCtxSetCurrent). It is only useful to a caller that has locked its
// goroutine to the thread with runtime.LockOSThread; the methods of this
// package do it themselves.
func (c *Context) MakeCurrent() error {
	if err := c.usable("Context.MakeCurrent"); err != nil {
		return err
	}
	c.mu.Lock()
	h := c.handle
	c.mu.Unlock()
	if h == 0 {
		return errNilHandle
	}
	return c.drv.check("cuCtxSetCurrent", c.drv.cuCtxSetCurrent(h))
}

// do runs one driver call with the context current on a locked thread and
// turns its result into an error named after fn.
func (c *Context) do(fn string, call func() Result) error {
	if err := c.usable(fn); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.MakeCurrent(); err != nil {
		return err
	}
	return c.drv.check(fn, call())
}

// Synchronize waits for all work in the context to finish (cuCtxSynchronize).
// An error from an earlier asynchronous launch surfaces here.
func (c *Context) Synchronize() error {
	if err := c.usable("Context.Synchronize"); err != nil {
		return err
	}
	return c.do("cuCtxSynchronize", func() Result { return c.drv.cuCtxSynchronize() })
}
