//go:build !mutant

package commitlog

// Stubs of the failpoints in failpoints_mutant.go: the default build never
// calls them (failpoint.On is constant false there).

func crcUnchecked(bool) bool { panic("failpoint crc-unchecked: built without -tags mutant") }
