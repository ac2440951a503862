//go:build !race

package generated_test

// raceEnabled: the race detector allocates, so allocation counts are not
// checked under it.
const raceEnabled = false
