//go:build race

package commitlog

// raceEnabled turns on the single-writer check in race-detector builds
// (the tests'): see enterWriter.
const raceEnabled = true
