//go:build !(darwin || freebsd || linux || netbsd)

package cuda

import (
	"errors"
	"runtime"
)

func dlopen(string) (uintptr, error) {
	return 0, errors.New("loading libcuda is not implemented on " + runtime.GOOS)
}

func dlsym(uintptr, string) uintptr { return 0 }

func register(any, uintptr) { panic("BUG: cuda: register without a library") }
