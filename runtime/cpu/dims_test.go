package cpu

// testDims are the head dimensions a kernel test runs for variant k:
// every entry of its table (the pure-Go kernel, which has none: the
// square dims 32, 64, 80, 96, 128, 192, 256 and (192, 128)).
func testDims(k *kernels) []dims {
	if len(k.byDims) == 0 {
		return []dims{square(32), square(64), square(80), square(96), square(128), square(192), square(256), {192, 128}}
	}
	ds := make([]dims, len(k.byDims))
	for i, x := range k.byDims {
		ds[i] = x.dims
	}
	return ds
}
