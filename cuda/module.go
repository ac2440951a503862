package cuda

import (
	"bytes"
	"errors"
	"runtime"
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

// Unload unloads the module (cuModuleUnload); its functions become invalid.
// Unloading twice is a no-op.
func (m *Module) Unload() error {
	if m.handle == 0 {
		return nil
	}
	h := m.handle
	m.handle = 0
	return m.ctx.do("cuModuleUnload", func() Result { return m.ctx.drv.cuModuleUnload(h) })
}

// Function looks up a kernel (a PTX .entry) by name (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
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

// Context is the context the function's module was loaded in.
func (f *Function) Context() *Context { return f.ctx }

// Attribute reads a function attribute (cuFuncGetAttribute).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	if f.mod.handle == 0 {
		return 0, errNilHandle
	}
	var v int32
	err := f.ctx.do("cuFuncGetAttribute", func() Result { return f.ctx.drv.cuFuncGetAttribute(&v, int32(a), f.handle) })
	return int(v), err
}

// SetAttribute sets a function attribute (cuFuncSetAttribute).
func (f *Function) SetAttribute(a FuncAttribute, v int) error {
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
	return f.SetAttribute(FuncMaxDynamicSharedSizeBytes, bytes)
}

// NumRegs is the number of registers per thread the kernel was compiled to.
func (f *Function) NumRegs() (int, error) { return f.Attribute(FuncNumRegs) }

// LocalBytes is the local memory per thread (register spills, local arrays).
func (f *Function) LocalBytes() (int, error) { return f.Attribute(FuncLocalSizeBytes) }
