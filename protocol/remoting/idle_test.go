package remoting

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// idleConnBudget is the most memory, heap and goroutine stacks together,
// an idle server connection may hold.
const idleConnBudget = 16 << 10

// TestIdleConnectionMemory opens idleConns connections to a real server
// on loopback, makes one request/response round trip on each (so each
// has read and written a frame) and leaves them idle, then measures the
// live heap (HeapAlloc after runtime.GC) and the goroutine stacks
// (StackInuse) they hold, against a baseline taken before dialing. The
// client ends are plain net.Conns in this process, so their few hundred
// bytes each are counted too.
func TestIdleConnectionMemory(t *testing.T) {
	const idleConns = 500
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &Server{Handler: echo} // no logger: log lines would be counted
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	req := NewRequest(HeartBeat, map[string]string{"clientID": "c1"}, make([]byte, 1<<10))
	frame, err := AppendFrame(nil, req)
	require.NoError(t, err)
	resp := make([]byte, 4<<10)

	before := settledMem()
	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range idleConns {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = c.Write(frame)
		require.NoError(t, err)
		// One response frame: its length prefix, then that many bytes.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadFull(c, resp[:lenPrefixSize])
		require.NoError(t, err)
		n := int(binary.BigEndian.Uint32(resp))
		require.Less(t, n, len(resp))
		_, err = io.ReadFull(c, resp[:n])
		require.NoError(t, err)
	}
	// Wait until every response has been accounted as written, so that
	// each connection is idle: no request in flight, nothing queued.
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if len(srv.mu.conns) != idleConns {
			return false
		}
		for c := range srv.mu.conns {
			if c.l.acct.busy() || c.l.queuedLen() > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	after := settledMem()

	heap := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / idleConns
	stack := (int64(after.StackInuse) - int64(before.StackInuse)) / idleConns
	t.Logf("per idle connection: heap %d B, goroutine stacks %d B, together %d B (budget %d B)",
		heap, stack, heap+stack, idleConnBudget)
	require.LessOrEqual(t, heap+stack, int64(idleConnBudget),
		"an idle connection holds %d B of heap and %d B of stacks", heap, stack)
}

// settledMem returns the memory statistics after garbage collection has
// run to completion twice (sync.Pool keeps its contents for one cycle).
func settledMem() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// idleCheckReader is a chunkReader that fails the test if the frame
// reader holds its pooled buffer while it waits for a frame (a read into
// its idle buffer).
type idleCheckReader struct {
	chunkReader
	t      *testing.T
	fr     *frameReader
	waits  int
	bigRds int
}

func (r *idleCheckReader) Read(p []byte) (int, error) {
	if len(p) == idleReadSize && &p[0] == &r.fr.idle[0] {
		r.waits++
		require.True(r.t, r.fr.buf == nil, "the read buffer is held while waiting for a frame")
	} else if len(p) >= readBufferSize {
		r.bigRds++
	}
	return r.chunkReader.Read(p)
}

// Frames of every size (in the idle buffer, across it, larger than the
// pooled buffer) arrive in pieces through the frame reader exactly as
// sent, whether they start in the idle buffer or in the pooled one; and
// between frames, once every buffered byte is consumed, the reader waits
// without its pooled buffer.
func TestFrameReaderReleasesBufferBetweenFrames(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	var stream []byte
	var want [][]byte
	for _, size := range []int{0, 10, idleReadSize - 30, idleReadSize, idleReadSize + 1, 5000, readBufferSize + 7, 100 << 10, 3} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(rnd.Uint32())
		}
		frame, err := AppendFrame(nil, NewRequest(SendMessage, map[string]string{"n": strconv.Itoa(size)}, body))
		require.NoError(t, err)
		stream = append(stream, frame...)
		want = append(want, frame[lenPrefixSize:])
	}
	for _, maxChunk := range []int{7, 700, 70000} {
		var pools bufPools
		src := &idleCheckReader{t: t}
		fr := &frameReader{src: src, pools: &pools}
		src.fr = fr
		src.chunkReader = chunkReader{b: stream, rnd: rnd}
		src.chunkReader.max = maxChunk
		for i, w := range want {
			require.NoError(t, fr.waitFrame(), "frame %d", i)
			require.True(t, fr.buf != nil, "a frame has started: the reader has its buffer")
			var prefix [lenPrefixSize]byte
			_, err := io.ReadFull(fr, prefix[:])
			require.NoError(t, err)
			n := int(binary.BigEndian.Uint32(prefix[:]))
			got, err := readBody(fr, n, nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(w, got), "chunks of up to %d: frame %d differs", maxChunk, i)
		}
		require.ErrorIs(t, fr.waitFrame(), io.EOF)
		require.True(t, fr.buf == nil, "the buffer went back at the end")
		require.Positive(t, src.waits)
		require.Positive(t, src.bigRds, "a large body is read past the buffer")
	}
}
