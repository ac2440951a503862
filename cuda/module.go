package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"
)

// CUjit_option values (cuda.h) passed to cuModuleLoadDataEx.
const (
	jitInfoLogBuffer           int32 = 3
	jitInfoLogBufferSizeBytes  int32 = 4
	jitErrorLogBuffer          int32 = 5
	jitErrorLogBufferSizeBytes int32 = 6
)

// jitLogSize is the size of each JIT log buffer handed to the driver.
const jitLogSize = 64 << 10

// Module is a loaded PTX (or cubin) image.
type Module struct {
	ctx    *Context
	handle uintptr // CUmodule; 0 once unloaded

	// InfoLog is the JIT compiler's informational log of the load (ptxas
	// -v style output where the driver gives one); often empty.
	InfoLog string
}

// LoadModule JIT-compiles and loads a module image (cuModuleLoadDataEx): PTX
// text, a cubin or a fatbin. PTX need not be NUL-terminated. A compile failure
// returns an [*Error] whose Log holds the JIT error log (ptxas messages with
// line numbers), and whose message includes it.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if err := c.usable("Context.LoadModule"); err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, errors.New("cuda: LoadModule: empty image")
	}
	img := image
	if img[len(img)-1] != 0 {
		img = make([]byte, len(image)+1)
		copy(img, image)
	}
	// The driver writes the logs through addresses kept in an array of
	// integers, which the garbage collector does not see: pin the buffers so
	// they are on the heap and stay put.
	errLog := make([]byte, jitLogSize)
	infoLog := make([]byte, jitLogSize)
	var pin runtime.Pinner
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	defer pin.Unpin()
	opts := []int32{jitInfoLogBuffer, jitInfoLogBufferSizeBytes, jitErrorLogBuffer, jitErrorLogBufferSizeBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&infoLog[0])), jitLogSize, uintptr(unsafe.Pointer(&errLog[0])), jitLogSize}
	var h uintptr
	err := c.do("cuModuleLoadDataEx", func() Result {
		return c.drv.cuModuleLoadDataEx(&h, &img[0], uint32(len(opts)), &opts[0], &vals[0])
	})
	runtime.KeepAlive(img)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Log = logText(errLog)
			if e.Log == "" {
				e.Log = logText(infoLog)
			}
		}
		return nil, err
	}
	return &Module{ctx: c, handle: h, InfoLog: logText(infoLog)}, nil
}

// logText is the NUL-terminated text at the start of a log buffer.
func logText(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.TrimRight(b, "\n"))
}

// usable returns nil for a Module made by Context.LoadModule (unloaded or
// not), else the error of method called on it.
func (m *Module) usable(method string) error {
	if m == nil || m.ctx.usable(method) != nil {
		return zeroValue(method, "*Module", "Context.LoadModule")
	}
	return nil
}

// Unload unloads the module (cuModuleUnload); its functions become invalid.
// Unloading twice is a no-op.
func (m *Module) Unload() error {
	if err := m.usable("Module.Unload"); err != nil {
		return err
	}
	if m.handle == 0 {
		return nil
	}
	h := m.handle
	m.handle = 0
	return m.ctx.do("cuModuleUnload", func() Result { return m.ctx.drv.cuModuleUnload(h) })
}

// Function looks up a kernel (a PTX .entry) by name (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
	if err := m.usable("Module.Function"); err != nil {
		return nil, err
	}
	switch {
	case name == "":
		return nil, errors.New("cuda: Module.Function: empty kernel name")
	case strings.IndexByte(name, 0) >= 0:
		return nil, fmt.Errorf("cuda: Module.Function(%q): the name contains a NUL byte", name)
	}
	if m.handle == 0 {
		return nil, errNilHandle
	}
	cname := cString(name)
	var h uintptr
	err := m.ctx.do("cuModuleGetFunction", func() Result {
		return m.ctx.drv.cuModuleGetFunction(&h, m.handle, &cname[0])
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Func += "(" + name + ")"
		}
		return nil, err
	}
	return &Function{ctx: m.ctx, mod: m, handle: h, Name: name}, nil
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// CUfunction_attribute values (cuda.h).
const (
	FuncMaxThreadsPerBlock        FuncAttribute = 0
	FuncSharedSizeBytes           FuncAttribute = 1 // static shared memory
	FuncConstSizeBytes            FuncAttribute = 2
	FuncLocalSizeBytes            FuncAttribute = 3 // local memory (spills) per thread
	FuncNumRegs                   FuncAttribute = 4 // registers per thread
	FuncPTXVersion                FuncAttribute = 5
	FuncBinaryVersion             FuncAttribute = 6
	FuncMaxDynamicSharedSizeBytes FuncAttribute = 8
)

// Function is a kernel in a loaded [Module].
type Function struct {
	ctx    *Context
	mod    *Module
	handle uintptr // CUfunction
	Name   string
}

// Context is the context the function's module was loaded in (nil for a
// nil Function).
func (f *Function) Context() *Context {
	if f == nil {
		return nil
	}
	return f.ctx
}

// usable returns nil for a Function made by Module.Function (its module
// unloaded or not), else the error of method called on it.
func (f *Function) usable(method string) error {
	if f == nil || f.handle == 0 || f.mod.usable(method) != nil || f.ctx != f.mod.ctx {
		return zeroValue(method, "*Function", "Module.Function")
	}
	return nil
}

// Attribute reads a function attribute (cuFuncGetAttribute).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	if err := f.usable("Function.Attribute"); err != nil {
		return 0, err
	}
	if f.mod.handle == 0 {
		return 0, errNilHandle
	}
	var v int32
	err := f.ctx.do("cuFuncGetAttribute", func() Result { return f.ctx.drv.cuFuncGetAttribute(&v, int32(a), f.handle) })
	return int(v), err
}

// SetAttribute sets a function attribute (cuFuncSetAttribute).
func (f *Function) SetAttribute(a FuncAttribute, v int) error {
	if err := f.usable("Function.SetAttribute"); err != nil {
		return err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return fmt.Errorf("cuda: Function.SetAttribute(%d, %d): value out of range of a C int", a, v)
	}
	if f.mod.handle == 0 {
		return errNilHandle
	}
	return f.ctx.do("cuFuncSetAttribute", func() Result { return f.ctx.drv.cuFuncSetAttribute(f.handle, int32(a), int32(v)) })
}

// SetMaxDynamicSharedMemory allows launches of f with up to bytes of dynamic
// shared memory (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). Without it
// a launch asking for more than 48 KiB fails; the ceiling is the device's
// SharedPerBlockOptin less the kernel's static shared memory.
func (f *Function) SetMaxDynamicSharedMemory(bytes int) error {
	if err := f.usable("Function.SetMaxDynamicSharedMemory"); err != nil {
		return err
	}
	if bytes < 0 || bytes > math.MaxInt32 {
		return fmt.Errorf("cuda: Function.SetMaxDynamicSharedMemory(%d): out of range (0 to %d)", bytes, math.MaxInt32)
	}
	return f.SetAttribute(FuncMaxDynamicSharedSizeBytes, bytes)
}

// NumRegs is the number of registers per thread the kernel was compiled to.
func (f *Function) NumRegs() (int, error) {
	if err := f.usable("Function.NumRegs"); err != nil {
		return 0, err
	}
	return f.Attribute(FuncNumRegs)
}

// LocalBytes is the local memory per thread (register spills, local arrays).
func (f *Function) LocalBytes() (int, error) {
	if err := f.usable("Function.LocalBytes"); err != nil {
		return 0, err
	}
	return f.Attribute(FuncLocalSizeBytes)
}
