//go:build mutant

package commitlog

// The failpoints of the commit log (internal/failpoint), compiled only with
// -tags mutant; their hooks are in log.go and recover.go.

// crcUnchecked is the crc-unchecked failpoint: whether to verify entry
// checksums is answered "no" whatever the caller asked (verify), on
// recovery and on reads, so silent corruption is served as data.
func crcUnchecked(verify bool) bool { return false }
