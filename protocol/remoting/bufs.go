package remoting

import (
	"bufio"
	"io"
	"sync"
)

// Connection buffers. An idle connection holds none of the buffers below:
// the reader takes its buffer when a frame starts to arrive and gives it
// back when it has consumed every byte it buffered; the writer takes its
// buffer when a frame is queued and gives it back after the flush that
// empties the queue. See "Memory of a connection" in the package
// documentation.
const (
	// readBufferSize and writeBufferSize size a connection's read buffer
	// and bufio.Writer while it has one. Larger reads bypass the read
	// buffer.
	readBufferSize  = 32 << 10
	writeBufferSize = 32 << 10
	// idleReadSize is how many bytes an idle connection's reader asks the
	// socket for, into a buffer of its own, while it waits for the next
	// frame: a frame up to this size (a heartbeat, a pull, an offset
	// update) arrives in one read; a longer one needs one more read, into
	// the pooled buffer.
	idleReadSize = 512
	// maxIdleQueueCap is the largest capacity of the writer's queue slices
	// kept while the writer is idle.
	maxIdleQueueCap = 32
)

// bufPools are the buffers that connections take while they read or
// write and return when idle. A Server shares one between its connections;
// a client Conn has its own.
type bufPools struct {
	frames  sync.Pool // of *frameBuf
	readers sync.Pool // of *[readBufferSize]byte
	writers sync.Pool // of *bufio.Writer, reset to write to nil
}

// getWriter returns a bufio.Writer writing to w.
func (p *bufPools) getWriter(w io.Writer) *bufio.Writer {
	bw, _ := p.writers.Get().(*bufio.Writer)
	if bw == nil {
		return bufio.NewWriterSize(w, writeBufferSize)
	}
	bw.Reset(w)
	return bw
}

// putWriter returns bw, whose contents are flushed or abandoned.
func (p *bufPools) putWriter(bw *bufio.Writer) {
	bw.Reset(nil) // drop the connection and any write error
	p.writers.Put(bw)
}

// frameReader is a connection's read buffer: a bufio.Reader that can give
// its buffer back. Between frames, waitFrame returns the buffer to the
// pool if it holds no bytes and waits for the next frame's first bytes in
// a small buffer of its own. It is used by the reader goroutine only.
type frameReader struct {
	src   io.Reader
	pools *bufPools
	buf   *[readBufferSize]byte // nil while idle
	// Invariant: 0 <= r <= w <= len(buf); r == w == 0 while buf is nil.
	r, w int
	idle [idleReadSize]byte
}

// Buffered returns how many bytes can be read without reading src; readBody
// uses it to size a frame body.
func (f *frameReader) Buffered() int { return f.w - f.r }

// waitFrame returns once a byte of the next frame is buffered (at once, if
// one is). With nothing buffered it returns the buffer to the pool while
// it waits.
func (f *frameReader) waitFrame() error {
	if f.r < f.w {
		return nil
	}
	f.release()
	n, err := readSome(f.src, f.idle[:])
	if n == 0 {
		return err
	}
	f.take()
	f.w = copy(f.buf[:], f.idle[:n])
	return nil // a read error comes back on the next read
}

// release returns the buffer, which holds nothing, to the pool.
func (f *frameReader) release() {
	if f.buf != nil {
		f.pools.readers.Put(f.buf)
		f.buf, f.r, f.w = nil, 0, 0
	}
}

// take gets a buffer from the pool.
func (f *frameReader) take() {
	f.buf, _ = f.pools.readers.Get().(*[readBufferSize]byte)
	if f.buf == nil {
		f.buf = new([readBufferSize]byte)
	}
	f.r, f.w = 0, 0
}

// Read reads as bufio.Reader.Read does: from the buffer if it holds
// bytes, else with one read of src, straight into p if p is at least as
// large as the buffer.
func (f *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if f.r == f.w {
		if len(p) >= readBufferSize {
			return readSome(f.src, p)
		}
		if f.buf == nil {
			f.take()
		}
		n, err := readSome(f.src, f.buf[:])
		if n == 0 {
			return 0, err
		}
		f.r, f.w = 0, n
	}
	n := copy(p, f.buf[f.r:f.w])
	f.r += n
	return n, nil
}

// readSome reads into p until it gets a byte or an error, as bufio does
// (a reader may return 0, nil).
func readSome(r io.Reader, p []byte) (int, error) {
	for range 100 {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}
