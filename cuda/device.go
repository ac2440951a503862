package cuda

import (
	"fmt"
	"math"
)

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// CUdevice_attribute values (cuda.h) that attngen uses.
const (
	AttrMaxThreadsPerBlock           DeviceAttribute = 1
	AttrMaxSharedMemoryPerBlock      DeviceAttribute = 8
	AttrWarpSize                     DeviceAttribute = 10
	AttrMaxRegistersPerBlock         DeviceAttribute = 12
	AttrMultiprocessorCount          DeviceAttribute = 16
	AttrComputeCapabilityMajor       DeviceAttribute = 75
	AttrComputeCapabilityMinor       DeviceAttribute = 76
	AttrMaxSharedMemoryPerSM         DeviceAttribute = 81
	AttrMaxSharedMemoryPerBlockOptin DeviceAttribute = 97
)

// Device is one GPU. Its fields are read from the driver when the Device is
// looked up with [Driver.Device]; [Device.Attribute] reads any other.
type Device struct {
	drv    *Driver
	handle int32 // CUdevice

	Ordinal      int
	Name         string
	Major, Minor int // compute capability, e.g. 9, 0 for sm_90
	SMs          int // streaming multiprocessors
	MaxThreads   int // threads per block
	WarpSize     int

	// SharedPerBlock is the shared memory a block may use without opting in
	// (48 KiB); SharedPerBlockOptin is the most a kernel may use after
	// [Function.SetMaxDynamicSharedMemory] (227 KiB on an H100/H200);
	// SharedPerSM is the shared memory of one multiprocessor.
	SharedPerBlock      int
	SharedPerBlockOptin int
	SharedPerSM         int
}

// DeviceCount is the number of CUDA devices (cuDeviceGetCount).
func (d *Driver) DeviceCount() (int, error) {
	if err := d.usable("Driver.DeviceCount"); err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device looks up device ordinal and reads its name and properties.
func (d *Driver) Device(ordinal int) (*Device, error) {
	if err := d.usable("Driver.Device"); err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: Driver.Device: ordinal %d is out of range (0 to %d)", ordinal, math.MaxInt32)
	}
	var h int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&h, int32(ordinal))); err != nil {
		return nil, err
	}
	dev := &Device{drv: d, handle: h, Ordinal: ordinal}
	var name [256]byte
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), h)); err != nil {
		return nil, err
	}
	name[len(name)-1] = 0
	dev.Name = goString(&name[0])
	for _, f := range []struct {
		dst  *int
		attr DeviceAttribute
	}{
		{&dev.Major, AttrComputeCapabilityMajor},
		{&dev.Minor, AttrComputeCapabilityMinor},
		{&dev.SMs, AttrMultiprocessorCount},
		{&dev.MaxThreads, AttrMaxThreadsPerBlock},
		{&dev.WarpSize, AttrWarpSize},
		{&dev.SharedPerBlock, AttrMaxSharedMemoryPerBlock},
		{&dev.SharedPerBlockOptin, AttrMaxSharedMemoryPerBlockOptin},
		{&dev.SharedPerSM, AttrMaxSharedMemoryPerSM},
	} {
		v, err := dev.Attribute(f.attr)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	return dev, nil
}

// Attribute reads one device attribute (cuDeviceGetAttribute).
func (dev *Device) Attribute(a DeviceAttribute) (int, error) {
	if err := dev.usable("Device.Attribute"); err != nil {
		return 0, err
	}
	var v int32
	if err := dev.drv.check("cuDeviceGetAttribute", dev.drv.cuDeviceGetAttribute(&v, int32(a), dev.handle)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// usable returns nil for a Device made by Driver.Device, else the error of
// method called on it. (Device 0's handle is 0: only the driver tells.)
func (dev *Device) usable(method string) error {
	if dev == nil || dev.drv.usable(method) != nil {
		return zeroValue(method, "*Device", "Driver.Device")
	}
	return nil
}

// Arch is the PTX target of the device's compute capability, e.g. "sm_90"
// ("" for a nil Device).
func (dev *Device) Arch() string {
	if dev == nil {
		return ""
	}
	return fmt.Sprintf("sm_%d%d", dev.Major, dev.Minor)
}

func (dev *Device) String() string {
	if dev == nil {
		return "<nil *cuda.Device>"
	}
	return fmt.Sprintf("%s (%s, %d SMs, %d KiB shared/block opt-in)",
		dev.Name, dev.Arch(), dev.SMs, dev.SharedPerBlockOptin>>10)
}
