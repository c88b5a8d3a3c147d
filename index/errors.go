package index

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every error that reports an index
// file whose bytes are inconsistent: a bad header field, a broken chain, an
// entry that contradicts its neighbours, a file of the wrong size. The
// concrete error is a *CorruptError naming the file and offset.
var ErrCorrupt = errors.New("index: corrupt file")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("index: closed")

// ErrNeedsRecover is matched (errors.Is) by the error Put, Sync,
// DeleteBefore and Query return when Open found files left incomplete by a
// crash (an all-zero header or a short size) and Recover has not run yet. The
// same error also matches ErrCorrupt: without a checkpoint the index cannot
// tell crash debris from damage.
var ErrNeedsRecover = errors.New("index: recovery required")

// CorruptError describes an inconsistency in one index file.
type CorruptError struct {
	File   string // path of the file
	Offset int64  // byte offset of the offending field in the file
	Reason string
	// needsRecover marks crash debris that Recover may clear.
	needsRecover bool
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("index: corrupt file %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt, or ErrNeedsRecover for crash
// debris.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || (e.needsRecover && target == ErrNeedsRecover)
}

func corruptf(file string, off int64, format string, args ...any) *CorruptError {
	return &CorruptError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
