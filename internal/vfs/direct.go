package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// DirectAlign is the alignment direct I/O needs here: the file offset, the
// length and the memory address of every transfer are multiples of it. 4 KiB
// covers devices with 512-byte and with 4 KiB logical blocks.
const DirectAlign = 4096

// ErrDirectUnsupported is returned (wrapped) by OpenDirect when the file
// system cannot do direct I/O on the file (tmpfs, some overlay file
// systems), or when the FS has no direct I/O at all.
var ErrDirectUnsupported = errors.New("vfs: direct I/O not supported")

// DirectFS is implemented by file systems that can open a file for direct
// I/O: writes go from the caller's buffer to the device without passing
// through the page cache (O_DIRECT on Linux). A write through such a handle
// is coherent with buffered reads and mappings of the same file (the
// kernel drops the page-cache copies of the range it writes) but it is not
// durable before Sync: the device may still hold it in its volatile cache.
//
// Every WriteAt and ReadAt on the returned File must use a buffer from
// AlignedBuffer and an offset and length that are multiples of DirectAlign;
// anything else fails with EINVAL.
type DirectFS interface {
	OpenDirect(name string) (File, error)
}

// OpenDirect opens name for direct I/O through fs if fs offers it, and
// fails with ErrDirectUnsupported otherwise.
func OpenDirect(fs FS, name string) (File, error) {
	d, ok := fs.(DirectFS)
	if !ok {
		return nil, fmt.Errorf("%w by %T", ErrDirectUnsupported, fs)
	}
	return d.OpenDirect(name)
}

// AlignedBuffer returns a zeroed n-byte slice whose first byte sits at a
// multiple of DirectAlign in memory, as direct I/O requires.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % DirectAlign); r != 0 {
		skip = DirectAlign - r
	}
	return b[skip : skip+n : skip+n]
}

// OpenDirect opens name read-write with O_DIRECT. The file must exist.
func (osFS) OpenDirect(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) {
			return nil, fmt.Errorf("%w: %w", ErrDirectUnsupported, err)
		}
		return nil, err
	}
	return osFile{f}, nil
}
