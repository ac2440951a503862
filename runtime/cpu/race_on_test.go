//go:build race

package cpu_test

// raceEnabled: the race detector allocates, so allocation counts are not
// checked under it.
const raceEnabled = true
