//go:build !race

package commitlog

// raceEnabled is false outside race-detector builds: the single-writer
// check costs the product nothing.
const raceEnabled = false
