package cuda

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoDriver is wrapped by the error [Open] returns when the driver library
// cannot be loaded (no NVIDIA driver installed, or ATTNGEN_LIBCUDA names a file
// that does not exist). Test with errors.Is, or with [Unavailable].
var ErrNoDriver = errors.New("no CUDA driver: libcuda.so.1 not found")

// ErrMissingSymbol is wrapped by the error [Open] returns when the library
// loads but lacks a driver function this package binds (a driver older than
// CUDA 11, or a library that is not the CUDA driver), and by the error of a
// method whose optional driver function the library lacks
// ([Context.EncodeTensorMapTiled] before CUDA 12.0).
var ErrMissingSymbol = errors.New("CUDA driver lacks a required function")

// Result is a CUresult, the status code every driver function returns. It is
// an error, so a driver failure can be matched with errors.Is(err, ErrInvalidPTX).
type Result int32

// CUresult values (cuda.h, enum cudaError_enum). Only the ones attngen meets
// are named; any other value prints as its number.
const (
	Success                     Result = 0
	ErrInvalidValue             Result = 1
	ErrOutOfMemory              Result = 2
	ErrNotInitialized           Result = 3
	ErrDeinitialized            Result = 4
	ErrStubLibrary              Result = 34
	ErrInsufficientDriver       Result = 35
	ErrDeviceUnavailable        Result = 46
	ErrNoDevice                 Result = 100
	ErrInvalidDevice            Result = 101
	ErrInvalidImage             Result = 200
	ErrInvalidContext           Result = 201
	ErrNoBinaryForGPU           Result = 209
	ErrInvalidPTX               Result = 218
	ErrJITCompilerNotFound      Result = 221
	ErrUnsupportedPTXVersion    Result = 222
	ErrInvalidHandle            Result = 400
	ErrNotFound                 Result = 500
	ErrNotReady                 Result = 600
	ErrIllegalAddress           Result = 700
	ErrLaunchOutOfResources     Result = 701
	ErrLaunchTimeout            Result = 702
	ErrContextIsDestroyed       Result = 709
	ErrAssert                   Result = 710
	ErrIllegalInstruction       Result = 715
	ErrMisalignedAddress        Result = 716
	ErrLaunchFailed             Result = 719
	ErrNotPermitted             Result = 800
	ErrNotSupported             Result = 801
	ErrSystemDriverMismatch     Result = 803
	ErrCompatNotSupportedDevice Result = 804
	ErrUnknown                  Result = 999
)

var resultNames = map[Result]string{
	Success:                     "CUDA_SUCCESS",
	ErrInvalidValue:             "CUDA_ERROR_INVALID_VALUE",
	ErrOutOfMemory:              "CUDA_ERROR_OUT_OF_MEMORY",
	ErrNotInitialized:           "CUDA_ERROR_NOT_INITIALIZED",
	ErrDeinitialized:            "CUDA_ERROR_DEINITIALIZED",
	ErrStubLibrary:              "CUDA_ERROR_STUB_LIBRARY",
	ErrInsufficientDriver:       "CUDA_ERROR_INSUFFICIENT_DRIVER",
	ErrDeviceUnavailable:        "CUDA_ERROR_DEVICE_UNAVAILABLE",
	ErrNoDevice:                 "CUDA_ERROR_NO_DEVICE",
	ErrInvalidDevice:            "CUDA_ERROR_INVALID_DEVICE",
	ErrInvalidImage:             "CUDA_ERROR_INVALID_IMAGE",
	ErrInvalidContext:           "CUDA_ERROR_INVALID_CONTEXT",
	ErrNoBinaryForGPU:           "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrInvalidPTX:               "CUDA_ERROR_INVALID_PTX",
	ErrJITCompilerNotFound:      "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	ErrUnsupportedPTXVersion:    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	ErrInvalidHandle:            "CUDA_ERROR_INVALID_HANDLE",
	ErrNotFound:                 "CUDA_ERROR_NOT_FOUND",
	ErrNotReady:                 "CUDA_ERROR_NOT_READY",
	ErrIllegalAddress:           "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrLaunchOutOfResources:     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrLaunchTimeout:            "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrContextIsDestroyed:       "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	ErrAssert:                   "CUDA_ERROR_ASSERT",
	ErrIllegalInstruction:       "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrMisalignedAddress:        "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrLaunchFailed:             "CUDA_ERROR_LAUNCH_FAILED",
	ErrNotPermitted:             "CUDA_ERROR_NOT_PERMITTED",
	ErrNotSupported:             "CUDA_ERROR_NOT_SUPPORTED",
	ErrSystemDriverMismatch:     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	ErrCompatNotSupportedDevice: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	ErrUnknown:                  "CUDA_ERROR_UNKNOWN",
}

// Name is the CUresult's enumerator name from a table built into this package
// (the driver's own cuGetErrorName is used for [Error] values).
func (r Result) Name() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

func (r Result) Error() string { return r.Name() }

// Error is a failed driver call. Name and Desc come from the driver
// (cuGetErrorName, cuGetErrorString); Log is the JIT error log of a failed
// module load, empty otherwise.
type Error struct {
	Func string // the driver function, e.g. "cuModuleLoadDataEx"
	Code Result
	Name string // e.g. "CUDA_ERROR_INVALID_PTX"
	Desc string // e.g. "a PTX JIT compilation failed"
	Log  string // JIT error log (module loads only)
}

func (e *Error) Error() string {
	if e == nil {
		return "cuda: <nil *cuda.Error>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cuda: %s: %s (%d)", e.Func, e.Name, int(e.Code))
	if e.Desc != "" {
		b.WriteString(": ")
		b.WriteString(e.Desc)
	}
	if log := strings.TrimSpace(e.Log); log != "" {
		b.WriteString("\nJIT error log:\n")
		b.WriteString(log)
	}
	return b.String()
}

// Unwrap returns the Result, so errors.Is(err, ErrInvalidPTX) and
// errors.As(err, &r) see it.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Code
}

// Unavailable reports whether err says that CUDA cannot be used on this
// machine at all, as opposed to a failure of a particular call: no driver
// library, a driver lacking functions, the toolkit's stub library, a driver too
// old for the installed runtime, or no usable device. Callers (tests, the GPU
// runner) skip on Unavailable and fail on anything else.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrMissingSymbol) {
		return true
	}
	for _, r := range []Result{ErrNoDevice, ErrStubLibrary, ErrInsufficientDriver,
		ErrDeviceUnavailable, ErrSystemDriverMismatch, ErrCompatNotSupportedDevice} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// ErrZeroValue is wrapped by the error a method or function returns when
// its receiver or a handle argument is nil or a zero value instead of one
// this package made: a [Driver] not from [Open], a [Device] not from
// [Driver.Device], a [Function] not from [Module.Function], and so on.
var ErrZeroValue = errors.New("nil or zero-value handle")

// zeroValue is the error of method called on a nil or zero value of typ,
// which only from makes.
func zeroValue(method, typ, from string) error {
	return fmt.Errorf("cuda: %s: %w: a %s comes from %s", method, ErrZeroValue, typ, from)
}
