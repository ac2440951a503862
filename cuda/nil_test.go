package cuda

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// noPanic runs f and turns a panic into an error naming it.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}

// TestNilAndZeroValues calls every exported function and method of the
// package that returns an error on nil pointers and zero values (no driver
// is needed): each must return an error wrapping ErrZeroValue, never panic.
func TestNilAndZeroValues(t *testing.T) {
	var (
		nd  *Driver
		ndv *Device
		nc  *Context
		ne  *Event
		nb  *Buffer
		nm  *Module
		nf  *Function
	)
	zd, zdv, zc, ze, zb, zm, zf := &Driver{}, &Device{}, &Context{}, &Event{}, &Buffer{}, &Module{}, &Function{}
	// Values whose own fields are set but that hang off a zero value.
	dvOfZero := &Device{drv: zd, Name: "x"}
	cOfZero := &Context{drv: zd, dev: dvOfZero, handle: 1}
	eOfZero := &Event{ctx: cOfZero, handle: 1}
	bOfZero := &Buffer{ctx: cOfZero, ptr: 1, size: 8}
	mOfZero := &Module{ctx: cOfZero, handle: 1}
	fOfZero := &Function{ctx: cOfZero, mod: mOfZero, handle: 1, Name: "k"}
	fNoMod := &Function{ctx: cOfZero, handle: 1, Name: "k"}
	p := unsafe.Pointer(new(uint64))
	g := [3]uint32{1, 1, 1}
	work := func() error { return nil }

	type call struct {
		name string
		f    func() error
	}
	var calls []call
	add := func(name string, f func() error) { calls = append(calls, call{name, f}) }
	for _, d := range []struct {
		what string
		d    *Driver
	}{{"nil", nd}, {"zero", zd}} {
		add(d.what+" Driver.DeviceCount", func() error { _, err := d.d.DeviceCount(); return err })
		add(d.what+" Driver.Device", func() error { _, err := d.d.Device(0); return err })
	}
	for _, d := range []struct {
		what string
		d    *Device
	}{{"nil", ndv}, {"zero", zdv}, {"of a zero Driver", dvOfZero}} {
		add(d.what+" Device.Attribute", func() error { _, err := d.d.Attribute(AttrWarpSize); return err })
		add(d.what+" Device.PrimaryContext", func() error { _, err := d.d.PrimaryContext(); return err })
	}
	for _, c := range []struct {
		what string
		c    *Context
	}{{"nil", nc}, {"zero", zc}, {"of a zero Driver", cOfZero}} {
		add(c.what+" Context.Release", func() error { return c.c.Release() })
		add(c.what+" Context.MakeCurrent", func() error { return c.c.MakeCurrent() })
		add(c.what+" Context.Synchronize", func() error { return c.c.Synchronize() })
		add(c.what+" Context.NewEvent", func() error { _, err := c.c.NewEvent(); return err })
		add(c.what+" Context.Time", func() error { _, err := c.c.Time(work); return err })
		add(c.what+" Context.Alloc", func() error { _, err := c.c.Alloc(16); return err })
		add(c.what+" Context.AllocFloat32", func() error { _, err := c.c.AllocFloat32(4); return err })
		add(c.what+" Context.AllocUint16", func() error { _, err := c.c.AllocUint16(4); return err })
		add(c.what+" Context.UploadFloat32", func() error { _, err := c.c.UploadFloat32([]float32{1}); return err })
		add(c.what+" Context.UploadUint16", func() error { _, err := c.c.UploadUint16([]uint16{1}); return err })
		add(c.what+" Context.LoadModule", func() error { _, err := c.c.LoadModule([]byte(goodPTX)); return err })
		add(c.what+" Context.EncodeTensorMapTiled", func() error { _, err := c.c.EncodeTensorMapTiled(TensorMapTiled{}); return err })
	}
	for _, e := range []struct {
		what string
		e    *Event
	}{{"nil", ne}, {"zero", ze}, {"of a zero Driver", eOfZero}} {
		add(e.what+" Event.Record", func() error { return e.e.Record() })
		add(e.what+" Event.Synchronize", func() error { return e.e.Synchronize() })
		add(e.what+" Event.Elapsed", func() error { _, err := e.e.Elapsed(eOfZero); return err })
		add(e.what+" Event.Elapsed(self)", func() error { _, err := e.e.Elapsed(e.e); return err })
		add(e.what+" Event.Destroy", func() error { return e.e.Destroy() })
	}
	for _, b := range []struct {
		what string
		b    *Buffer
	}{{"nil", nb}, {"zero", zb}, {"of a zero Driver", bOfZero}} {
		add(b.what+" Buffer.Free", func() error { return b.b.Free() })
		add(b.what+" Buffer.Memset", func() error { return b.b.Memset(0) })
		add(b.what+" Buffer.Write", func() error { return b.b.Write([]byte{1}) })
		add(b.what+" Buffer.Read", func() error { return b.b.Read(make([]byte, 1)) })
		add(b.what+" Buffer.WriteFloat32", func() error { return b.b.WriteFloat32([]float32{1}) })
		add(b.what+" Buffer.ReadFloat32", func() error { return b.b.ReadFloat32(make([]float32, 1)) })
		add(b.what+" Buffer.WriteUint16", func() error { return b.b.WriteUint16([]uint16{1}) })
		add(b.what+" Buffer.ReadUint16", func() error { return b.b.ReadUint16(make([]uint16, 1)) })
		add(b.what+" Buffer.Write(empty)", func() error { return b.b.Write(nil) })
	}
	for _, m := range []struct {
		what string
		m    *Module
	}{{"nil", nm}, {"zero", zm}, {"of a zero Driver", mOfZero}} {
		add(m.what+" Module.Unload", func() error { return m.m.Unload() })
		add(m.what+" Module.Function", func() error { _, err := m.m.Function("k"); return err })
	}
	for _, f := range []struct {
		what string
		f    *Function
	}{{"nil", nf}, {"zero", zf}, {"of a zero Driver", fOfZero}, {"without a module", fNoMod}} {
		add(f.what+" Function.Attribute", func() error { _, err := f.f.Attribute(FuncNumRegs); return err })
		add(f.what+" Function.SetAttribute", func() error { return f.f.SetAttribute(FuncMaxDynamicSharedSizeBytes, 1) })
		add(f.what+" Function.SetMaxDynamicSharedMemory", func() error { return f.f.SetMaxDynamicSharedMemory(1) })
		add(f.what+" Function.NumRegs", func() error { _, err := f.f.NumRegs(); return err })
		add(f.what+" Function.LocalBytes", func() error { _, err := f.f.LocalBytes(); return err })
		add(f.what+" Function.LaunchParams", func() error { return f.f.LaunchParams(g, g, 0, []unsafe.Pointer{p}) })
		add(f.what+" Function.LaunchParams(no params)", func() error { return f.f.LaunchParams(g, g, 0, nil) })
		add(f.what+" Launch", func() error { return Launch(f.f, g, g, 0, uint32(1)) })
		add(f.what+" Launch(bad argument)", func() error { return Launch(f.f, g, g, 0, 7) })
		add(f.what+" Launch(nil buffer)", func() error { return Launch(f.f, g, g, 0, nb) })
	}
	add("Launch(untyped nil function)", func() error { return Launch(nil, g, g, 0) })

	for _, c := range calls {
		err := noPanic(c.f)
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case strings.HasPrefix(err.Error(), "panic: "):
			t.Errorf("%s: %v", c.name, err)
		case !errors.Is(err, ErrZeroValue):
			t.Errorf("%s: error %q does not wrap ErrZeroValue", c.name, err)
		case !strings.HasPrefix(err.Error(), "cuda: "):
			t.Errorf("%s: error %q does not say it comes from package cuda", c.name, err)
		}
	}
}

// TestNilAndZeroAccessors: the accessors, which return no error, return
// zero results on nil and zero values instead of panicking.
func TestNilAndZeroAccessors(t *testing.T) {
	var (
		nd  *Driver
		ndv *Device
		nc  *Context
		nb  *Buffer
		nf  *Function
		ner *Error
	)
	cases := []struct {
		name      string
		got, zero any
	}{
		{"nil Driver.Path", func() any { return nd.Path() }, ""},
		{"nil Driver.Version", func() any { return nd.Version() }, 0},
		{"zero Driver.Path", func() any { return (&Driver{}).Path() }, ""},
		{"nil Device.Arch", func() any { return ndv.Arch() }, ""},
		{"nil Context.Device", func() any { return nc.Device() }, (*Device)(nil)},
		{"nil Context.Driver", func() any { return nc.Driver() }, (*Driver)(nil)},
		{"nil Buffer.Ptr", func() any { return nb.Ptr() }, DevicePtr(0)},
		{"nil Buffer.Len", func() any { return nb.Len() }, 0},
		{"nil Function.Context", func() any { return nf.Context() }, (*Context)(nil)},
		{"nil Error.Unwrap", func() any { return ner.Unwrap() }, error(nil)},
	}
	for _, c := range cases {
		var got any
		if err := noPanic(func() error { got = c.got.(func() any)(); return nil }); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.zero {
			t.Errorf("%s = %#v, want %#v", c.name, got, c.zero)
		}
	}
	for _, c := range []struct {
		name string
		f    func() string
	}{
		{"nil Device.String", ndv.String},
		{"zero Device.String", (&Device{}).String},
		{"nil Error.Error", ner.Error},
	} {
		var s string
		if err := noPanic(func() error { s = c.f(); return nil }); err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if !strings.Contains(s, "nil") && !strings.Contains(s, "zero") && c.name != "zero Device.String" {
			t.Errorf("%s = %q, want it to say nil", c.name, s)
		}
	}
}

// TestBadArguments: arguments that would be truncated, overflow or name
// nothing are errors before the driver is called. The driver-free cases
// always run; those needing a live context use the mock driver.
func TestBadArguments(t *testing.T) {
	for _, path := range []string{"", "libcuda.so.1\x00evil"} {
		err := noPanic(func() error { _, err := OpenLibrary(path); return err })
		if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "path") {
			t.Errorf("OpenLibrary(%q): %v, want an error about the path wrapping ErrNoDriver", path, err)
		}
	}
	drv, ctx, _ := openMock(t)
	fn := function(t, loadGood(t, ctx), "attn_fwd")
	mod := loadGood(t, ctx)
	ev, err := ctx.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Destroy()
	cases := []struct {
		name string
		f    func() error
		want string
	}{
		{"Device(-1)", func() error { _, err := drv.Device(-1); return err }, "ordinal -1"},
		{"Device(1<<32)", func() error { _, err := drv.Device(1 << 32); return err }, "ordinal 4294967296"},
		{"AllocFloat32 overflow", func() error { _, err := ctx.AllocFloat32(math.MaxInt/4 + 2); return err }, "overflows"},
		{"AllocUint16 overflow", func() error { _, err := ctx.AllocUint16(math.MaxInt/2 + 1); return err }, "overflows"},
		{"AllocFloat32 wrapping to 4 bytes", func() error { _, err := ctx.AllocFloat32(1<<62 + 1); return err }, "overflows"},
		{"AllocFloat32(0)", func() error { _, err := ctx.AllocFloat32(0); return err }, "must be positive"},
		{"Time(nil)", func() error { _, err := ctx.Time(nil); return err }, "nil work"},
		{"Elapsed(nil)", func() error { _, err := ev.Elapsed(nil); return err }, "end event"},
		{"SetAttribute(MaxInt32+1)", func() error { return fn.SetAttribute(FuncMaxDynamicSharedSizeBytes, math.MaxInt32+1) }, "out of range"},
		{"SetAttribute(1<<32+1024)", func() error { return fn.SetAttribute(FuncMaxDynamicSharedSizeBytes, 1<<32+1024) }, "out of range"},
		{"SetMaxDynamicSharedMemory(1<<32)", func() error { return fn.SetMaxDynamicSharedMemory(1 << 32) }, "out of range"},
		{"SetMaxDynamicSharedMemory(-1)", func() error { return fn.SetMaxDynamicSharedMemory(-1) }, "out of range"},
		{"Function(name with NUL)", func() error { _, err := mod.Function("attn_fwd\x00x"); return err }, "NUL"},
		{"Function(\"\")", func() error { _, err := mod.Function(""); return err }, "empty"},
	}
	for _, c := range cases {
		err := noPanic(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := ctx.Time(func() error { time.Sleep(0); return nil }); err != nil {
		t.Errorf("Time with work: %v", err)
	}
}
