package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr). As a kernel argument it is a
// .u64 parameter.
type DevicePtr uint64

// Buffer is device memory allocated in a [Context].
type Buffer struct {
	ctx  *Context
	ptr  DevicePtr // 0 once freed
	size int
}

// Alloc allocates bytes of device memory (cuMemAlloc_v2). The contents are
// undefined; see [Buffer.Memset].
func (c *Context) Alloc(bytes int) (*Buffer, error) {
	if err := c.usable("Context.Alloc"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: Alloc(%d): size must be positive", bytes)
	}
	var p DevicePtr
	if err := c.do("cuMemAlloc_v2", func() Result { return c.drv.cuMemAlloc(&p, uintptr(bytes)) }); err != nil {
		return nil, err
	}
	return &Buffer{ctx: c, ptr: p, size: bytes}, nil
}

// AllocFloat32 allocates room for n float32 values.
func (c *Context) AllocFloat32(n int) (*Buffer, error) { return c.allocN("Context.AllocFloat32", n, 4) }

// AllocUint16 allocates room for n 16-bit values (bf16 or fp16 bit patterns).
func (c *Context) AllocUint16(n int) (*Buffer, error) { return c.allocN("Context.AllocUint16", n, 2) }

// allocN allocates n elements of size bytes each, refusing a byte count
// that overflows an int.
func (c *Context) allocN(method string, n, size int) (*Buffer, error) {
	if err := c.usable(method); err != nil {
		return nil, err
	}
	if n > math.MaxInt/size {
		return nil, fmt.Errorf("cuda: %s(%d): %d-byte elements: the size in bytes overflows", method, n, size)
	}
	return c.Alloc(size * n)
}

// UploadFloat32 allocates a buffer holding a copy of src.
func (c *Context) UploadFloat32(src []float32) (*Buffer, error) {
	if err := c.usable("Context.UploadFloat32"); err != nil {
		return nil, err
	}
	b, err := c.AllocFloat32(len(src))
	if err != nil {
		return nil, err
	}
	if err := b.WriteFloat32(src); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// UploadUint16 allocates a buffer holding a copy of src.
func (c *Context) UploadUint16(src []uint16) (*Buffer, error) {
	if err := c.usable("Context.UploadUint16"); err != nil {
		return nil, err
	}
	b, err := c.AllocUint16(len(src))
	if err != nil {
		return nil, err
	}
	if err := b.WriteUint16(src); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// usable returns nil for a Buffer made by this package (freed or not),
// else the error of method called on it.
func (b *Buffer) usable(method string) error {
	if b == nil || b.ctx.usable(method) != nil {
		return zeroValue(method, "*Buffer", "Context.Alloc or an Upload method")
	}
	return nil
}

// Ptr is the device address of the buffer, 0 once freed (and for a nil
// Buffer).
func (b *Buffer) Ptr() DevicePtr {
	if b == nil {
		return 0
	}
	return b.ptr
}

// Len is the size of the buffer in bytes (0 for a nil Buffer).
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.size
}

// Free frees the buffer (cuMemFree_v2). Freeing twice is a no-op.
func (b *Buffer) Free() error {
	if err := b.usable("Buffer.Free"); err != nil {
		return err
	}
	if b.ptr == 0 {
		return nil
	}
	p := b.ptr
	b.ptr = 0
	return b.ctx.do("cuMemFree_v2", func() Result { return b.ctx.drv.cuMemFree(p) })
}

// Memset sets every byte of the buffer to v (cuMemsetD8_v2).
func (b *Buffer) Memset(v byte) error {
	if err := b.usable("Buffer.Memset"); err != nil {
		return err
	}
	if b.ptr == 0 {
		return errNilHandle
	}
	return b.ctx.do("cuMemsetD8_v2", func() Result { return b.ctx.drv.cuMemsetD8(b.ptr, v, uintptr(b.size)) })
}

// write copies n bytes at src to the start of the buffer (cuMemcpyHtoD_v2);
// method names the caller in errors.
func (b *Buffer) write(method string, src unsafe.Pointer, n int) error {
	if err := b.usable(method); err != nil {
		return err
	}
	if b.ptr == 0 {
		return errNilHandle
	}
	if n > b.size {
		return fmt.Errorf("cuda: write of %d bytes into a %d-byte buffer", n, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.ctx.do("cuMemcpyHtoD_v2", func() Result { return b.ctx.drv.cuMemcpyHtoD(b.ptr, src, uintptr(n)) })
}

// read copies n bytes from the start of the buffer to dst (cuMemcpyDtoH_v2);
// method names the caller in errors.
func (b *Buffer) read(method string, dst unsafe.Pointer, n int) error {
	if err := b.usable(method); err != nil {
		return err
	}
	if b.ptr == 0 {
		return errNilHandle
	}
	if n > b.size {
		return fmt.Errorf("cuda: read of %d bytes from a %d-byte buffer", n, b.size)
	}
	if n == 0 {
		return nil
	}
	return b.ctx.do("cuMemcpyDtoH_v2", func() Result { return b.ctx.drv.cuMemcpyDtoH(dst, b.ptr, uintptr(n)) })
}

// Write copies src to the start of the buffer.
func (b *Buffer) Write(src []byte) error {
	return b.write("Buffer.Write", unsafe.Pointer(unsafe.SliceData(src)), len(src))
}

// Read copies the start of the buffer into dst.
func (b *Buffer) Read(dst []byte) error {
	return b.read("Buffer.Read", unsafe.Pointer(unsafe.SliceData(dst)), len(dst))
}

// WriteFloat32 copies src to the start of the buffer.
func (b *Buffer) WriteFloat32(src []float32) error {
	return b.write("Buffer.WriteFloat32", unsafe.Pointer(unsafe.SliceData(src)), 4*len(src))
}

// ReadFloat32 copies the start of the buffer into dst.
func (b *Buffer) ReadFloat32(dst []float32) error {
	return b.read("Buffer.ReadFloat32", unsafe.Pointer(unsafe.SliceData(dst)), 4*len(dst))
}

// WriteUint16 copies src (bf16 or fp16 bit patterns) to the start of the buffer.
func (b *Buffer) WriteUint16(src []uint16) error {
	return b.write("Buffer.WriteUint16", unsafe.Pointer(unsafe.SliceData(src)), 2*len(src))
}

// ReadUint16 copies the start of the buffer into dst.
func (b *Buffer) ReadUint16(dst []uint16) error {
	return b.read("Buffer.ReadUint16", unsafe.Pointer(unsafe.SliceData(dst)), 2*len(dst))
}
