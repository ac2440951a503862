package cpu

// tileFor returns the microkernel of a variant, if this build and machine
// can run it.
func tileFor(v Variant) (tileFunc, bool) {
	if v == PureGo {
		return tileGo, true
	}
	return tileAsm(v)
}
