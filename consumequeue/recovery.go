package consumequeue

import (
	"errors"
	"fmt"
	"io"
)

// Recovery reads the files with ReadAt, never through their mappings. A
// file grows by extension (growLocked), so past its written units it is
// sparse, and on tmpfs a read of a hole through a shared mapping allocates
// a page: on a full device that is a SIGBUS, which would stop every
// restart until space is freed. ReadAt reads a hole as zeros without
// allocating anything. Everything else reads through the mapping only
// below the end of the written units (Get, Read, DeleteBefore's search),
// where every page was written.

// recoveryChunk is the size of one read of a sequential recovery scan: a
// multiple of UnitSize just under 64 KiB.
const recoveryChunk = 3276 * UnitSize

// readAt fills b from the file at off; bytes past the end of the file read
// as zero.
func (h *handle) readAt(b []byte, off int64) error {
	n, err := h.f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		clear(b[n:])
		err = nil
	}
	if err != nil {
		return fmt.Errorf("read %s at %d: %w", h.q.path(h.s), off, err)
	}
	return nil
}

// readUnit reads the i-th unit of the file with ReadAt; units beyond the
// end of the file read as zero (an empty unit), as they would once the file
// grows.
func (h *handle) readUnit(i int64) (rawUnit, error) {
	if i < 0 || (i+1)*UnitSize > int64(len(h.data)) {
		return rawUnit{}, nil
	}
	var b [UnitSize]byte
	if err := h.readAt(b[:], i*UnitSize); err != nil {
		return rawUnit{}, err
	}
	u, _ := decodeUnit(b[:])
	return u, nil
}

// recoveryReader reads the units of one file in order, recoveryChunk bytes
// per ReadAt.
type recoveryReader struct {
	h   *handle
	buf []byte
	off int64 // file offset of buf[0]
}

func newRecoveryReader(h *handle) *recoveryReader { return &recoveryReader{h: h} }

// unit returns the i-th unit of the file; units beyond its end are empty.
func (r *recoveryReader) unit(i int64) (rawUnit, error) {
	size := int64(len(r.h.data))
	pos := i * UnitSize
	if i < 0 || pos+UnitSize > size {
		return rawUnit{}, nil
	}
	if pos < r.off || pos+UnitSize > r.off+int64(len(r.buf)) {
		n := min(size-pos, recoveryChunk)
		n -= n % UnitSize
		if cap(r.buf) < int(n) {
			r.buf = make([]byte, n)
		}
		r.buf, r.off = r.buf[:n], pos
		if err := r.h.readAt(r.buf, pos); err != nil {
			r.buf = r.buf[:0]
			return rawUnit{}, err
		}
	}
	u, _ := decodeUnit(r.buf[pos-r.off:])
	return u, nil
}
