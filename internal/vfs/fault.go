package vfs

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFault is returned (wrapped) by CatchFault when reading a mapping
// faulted: a page of the mapped file could not be read or allocated, as
// for a hole of a sparse file on a full tmpfs (reading a hole through a
// shared mapping allocates a page there) or an I/O error.
var ErrFault = errors.New("vfs: memory fault reading a mapped file")

// CatchFault runs fn, turning a memory fault in it (on this goroutine)
// into an error wrapping ErrFault instead of a crash (SIGBUS). For tools
// that read files they do not control through mappings, such as store
// inspection; fn must not leave shared state half-changed when it faults.
func CatchFault(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			a, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w at address %#x (a sparse or truncated file on a full or failing device?)", ErrFault, a.Addr())
		}
	}()
	return fn()
}
