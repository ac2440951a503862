// Package cuda is attngen's binding of the CUDA driver API: it loads
// libcuda.so.1 at run time, owns the driver's function table, and offers a small
// Go API over it (devices, the primary context, PTX modules with the JIT error
// log, kernel functions, device buffers, kernel launches and event timing).
//
// # Why it is here
//
// The package sits at the top level of the module, next to spec/ and gen/,
// because two kinds of code need it at run time: the packages attngen
// generates (their CUDA entry points load the embedded PTX and launch it), and
// attngen's own GPU runner (verify/ and cmd/attngen bench). Neither may depend
// on the other, so the binding is its own small runtime package.
//
// # Why purego
//
// The driver is reached through github.com/ebitengine/purego, not cgo and not
// gorgonia.org/cu (see design/ARCHITECTURE.md, "Decisions already taken").
// The package builds with CGO_ENABLED=0 and needs no CUDA headers; where there is
// no driver, [Open] returns an error wrapping [ErrNoDriver] and nothing panics
// or exits, so test binaries that import it run on GPU-less CI machines and
// skip. Set ATTNGEN_LIBCUDA to load another library instead of libcuda.so.1
// (the tests use this to load a mock driver built from testdata/mock_cuda.c).
//
// # Errors, not panics
//
// Every function and method that can fail returns an error instead of
// panicking. Handles ([Driver], [Device], [Context], [Module], [Function],
// [Buffer], [Event]) are only usable as this package returns them: a nil
// pointer or a zero value, or one that hangs off such a value, makes every
// method return an error wrapping [ErrZeroValue] (the accessors without an
// error result, such as [Driver.Path] or [Buffer.Len], return zero values).
// A handle that was released, freed, destroyed or unloaded gives an error on
// use, and releasing it again is a no-op. Arguments a C call would truncate
// (a device ordinal or attribute value outside int32, an allocation whose
// size in bytes overflows, a name with a NUL byte) are errors too.
//
// # Threading
//
// A CUDA context is current per OS thread, and Go moves goroutines between
// threads. Every method here that needs a context therefore locks the calling
// goroutine to its thread for the duration of the call (runtime.LockOSThread)
// and makes its [Context] current first (cuCtxSetCurrent, a cheap thread-local
// store), so callers need not manage threads. Code that calls the driver by
// other means must follow the same rule: lock the goroutine with
// runtime.LockOSThread and set the context current before each call, or keep
// all CUDA work on one locked goroutine. The methods are safe to call from
// several goroutines; the driver itself serializes work on the default stream.
//
// # Typical use
//
//	drv, err := cuda.Open()
//	if cuda.Unavailable(err) {
//		t.Skip(err) // no driver, stub driver, or no device
//	}
//	dev, err := drv.Device(0)
//	ctx, err := dev.PrimaryContext()
//	defer ctx.Release()
//	mod, err := ctx.LoadModule(ptx) // a PTX error carries the JIT log
//	fn, err := mod.Function("attn_fwd")
//	err = fn.SetMaxDynamicSharedMemory(160 << 10)
//	q, err := ctx.AllocFloat32(n)
//	err = cuda.Launch(fn, [3]uint32{64, 1, 1}, [3]uint32{128, 1, 1}, 160<<10, q, int32(n))
//	err = ctx.Synchronize()
//
// For cp.async.bulk.tensor, [Context.EncodeTensorMapTiled] encodes a
// CUtensorMap (cuTensorMapEncodeTiled, CUDA 12.0 and later; on an older
// driver it returns an error wrapping [ErrMissingSymbol] and everything
// else works).
package cuda
