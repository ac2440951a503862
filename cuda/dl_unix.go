//go:build darwin || freebsd || linux || netbsd

package cuda

import "github.com/ebitengine/purego"

// dlopen loads the shared library at path.
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// dlsym returns the address of name in lib, or 0.
func dlsym(lib uintptr, name string) uintptr {
	addr, err := purego.Dlsym(lib, name)
	if err != nil {
		return 0
	}
	return addr
}

// register makes the Go function *fptr call the C function at addr.
func register(fptr any, addr uintptr) { purego.RegisterFunc(fptr, addr) }
