// Package cudamock holds what the tests that drive the CUDA binding's mock
// driver (cuda/testdata/mock_cuda.c, a libcuda that loads modules, checks
// and records launches, but runs no kernel) share: the Go mirror of its
// launch record. It is for tests only; see docs/gpu.md for how the mock
// is used.
package cudamock
