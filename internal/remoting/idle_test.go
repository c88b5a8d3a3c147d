package remoting

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
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
