package cuda

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// mockTensorMap mirrors struct mock_tensormap in mock_cuda.c.
type mockTensorMap struct {
	Global                     uint64
	Dims                       [5]uint64
	Strides                    [5]uint64
	Box                        [5]uint32
	ElemStrides                [5]uint32
	DType                      int32
	Rank                       uint32
	Interleave, Swizzle, L2, O int32
	Calls                      uint64
}

// TestEncodeTensorMapTiled: every argument reaches the driver (the mock
// records them; half of them travel on the stack on amd64), the map comes
// back, the lengths are checked before the call, and a driver error is
// returned as one.
func TestEncodeTensorMapTiled(t *testing.T) {
	path := mockLibrary(t, "")
	_, ctx, _ := openMock(t)
	lib, err := dlopen(path)
	if err != nil {
		t.Fatal(err)
	}
	var last func(*mockTensorMap) int32
	register(&last, dlsym(lib, "mock_last_tensormap"))
	m := TensorMapTiled{
		DataType: TensorMapUint16,
		Global:   0x7000_1234_5600,
		Dims:     []uint64{64, 40},
		Strides:  []uint64{160},
		Box:      []uint32{64, 32},
		Swizzle:  TensorMapSwizzle128B,
	}
	tm, err := ctx.EncodeTensorMapTiled(m)
	if err != nil {
		t.Fatal(err)
	}
	var got mockTensorMap
	last(&got)
	want := mockTensorMap{Global: 0x7000_1234_5600, Dims: [5]uint64{64, 40}, Strides: [5]uint64{160}, Box: [5]uint32{64, 32},
		ElemStrides: [5]uint32{1, 1}, DType: 1, Rank: 2, Swizzle: 3, Calls: got.Calls}
	if got != want || got.Calls == 0 {
		t.Errorf("driver received %+v, want %+v", got, want)
	}
	if g := binary.LittleEndian.Uint64(tm[0:]); g != 0x7000_1234_5600 {
		t.Errorf("encoded map starts with %#x, want the mock's copy of the global address", g)
	}
	if d := binary.LittleEndian.Uint64(tm[8+8:]); d != 40 {
		t.Errorf("encoded map's second dimension %d, want 40", d)
	}

	m3 := m
	m3.Dims, m3.Strides, m3.Box, m3.ElementStrides = []uint64{8, 4, 3}, []uint64{16, 64}, []uint32{8, 2, 1}, []uint32{1, 2, 1}
	m3.Swizzle, m3.DataType = TensorMapSwizzle32B, TensorMapFloat32
	if _, err := ctx.EncodeTensorMapTiled(m3); err != nil {
		t.Fatal(err)
	}
	last(&got)
	if got.Rank != 3 || got.Strides != [5]uint64{16, 64} || got.ElemStrides != [5]uint32{1, 2, 1} || got.Swizzle != 1 || got.DType != 7 || got.Box != [5]uint32{8, 2, 1} {
		t.Errorf("rank-3 map: driver received %+v", got)
	}

	for _, bad := range []struct {
		name string
		m    TensorMapTiled
		want string
	}{
		{"no strides", TensorMapTiled{DataType: TensorMapUint16, Dims: []uint64{8, 8}, Box: []uint32{8, 8}}, "strides"},
		{"rank 6", TensorMapTiled{DataType: TensorMapUint16, Dims: make([]uint64, 6), Strides: make([]uint64, 5), Box: make([]uint32, 6)}, "rank 6"},
		{"data type", TensorMapTiled{DataType: 42, Dims: []uint64{8}, Box: []uint32{8}}, "data type"},
		{"swizzle", TensorMapTiled{DataType: TensorMapUint8, Dims: []uint64{8}, Box: []uint32{8}, Swizzle: 4}, "swizzle"},
		{"element strides", TensorMapTiled{DataType: TensorMapUint8, Dims: []uint64{8}, Box: []uint32{8}, ElementStrides: []uint32{1, 1}}, "element strides"},
	} {
		before := got.Calls
		if _, err := ctx.EncodeTensorMapTiled(bad.m); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error containing %q", bad.name, err, bad.want)
		}
		last(&got)
		if got.Calls != before {
			t.Errorf("%s: the driver was called", bad.name)
		}
	}
	mock := bindMock(t, path)
	mock.failNext("cuTensorMapEncodeTiled", 1)
	var e *Error
	if _, err := ctx.EncodeTensorMapTiled(m); !errors.As(err, &e) || e.Code != 1 {
		t.Errorf("driver failure: %v, want an *Error with code 1", err)
	}
}

// TestEncodeTensorMapAbsent: a driver without cuTensorMapEncodeTiled opens
// and works; only the encode fails, with an error wrapping ErrMissingSymbol.
func TestEncodeTensorMapAbsent(t *testing.T) {
	drv, err := OpenLibrary(mockLibrary(t, "notmap"))
	if err != nil {
		t.Fatalf("a driver without cuTensorMapEncodeTiled must still open: %v", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	if b, err := ctx.AllocFloat32(4); err != nil {
		t.Errorf("Alloc on the driver without tensor maps: %v", err)
	} else {
		b.Free()
	}
	var tm TensorMap
	err = noPanic(func() error {
		var err error
		tm, err = ctx.EncodeTensorMapTiled(TensorMapTiled{DataType: TensorMapUint16, Dims: []uint64{8, 8}, Strides: []uint64{16}, Box: []uint32{8, 8}})
		return err
	})
	if !errors.Is(err, ErrMissingSymbol) || !strings.Contains(err.Error(), "cuTensorMapEncodeTiled") {
		t.Errorf("EncodeTensorMapTiled without the symbol: %v, want an error naming it and wrapping ErrMissingSymbol", err)
	}
	if tm != (TensorMap{}) {
		t.Error("a failed encode returned a non-zero map")
	}
}
