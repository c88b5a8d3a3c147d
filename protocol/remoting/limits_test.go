package remoting

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chunkReader hands out its bytes a few at a time, as a slow network does.
type chunkReader struct {
	b   []byte
	rnd *rand.Rand
	max int // largest piece; 0 means 7
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rnd.IntN(cmp.Or(r.max, 7)))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// A frame delivered in pieces of 1 to 7 bytes, through a bufio reader as
// the connection reads and without, decodes to exactly the command sent,
// for bodies below, at and above each growth step of the buffer.
func TestReadBodyIncremental(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, minBodyChunk - 40, minBodyChunk, minBodyChunk + 1, 3*minBodyChunk + 5, 200 << 10} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(rnd.Uint32())
		}
		req := NewRequest(SendMessage, map[string]string{"topic": "T", "n": strconv.Itoa(size)}, body)
		req.Opaque = 7
		frame, err := AppendFrame(nil, req)
		require.NoError(t, err)

		got, err := ReadFrame(&chunkReader{b: frame, rnd: rnd}, 0)
		require.NoError(t, err)
		require.Equal(t, frame[lenPrefixSize:], got, "size %d", size)

		// The connection's own path: a server answering a frame that
		// trickles in over TCP.
		ts := startServer(t, echo)
		nc, err := net.Dial("tcp", ts.addr)
		require.NoError(t, err)
		go func() {
			r := &chunkReader{b: frame, rnd: rand.New(rand.NewPCG(uint64(size), 3))}
			buf := make([]byte, 8)
			for {
				n, err := r.Read(buf)
				if err != nil {
					return
				}
				if _, err := nc.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		respFrame, err := ReadFrame(nc, 0)
		require.NoError(t, err)
		resp, err := DecodeFrame(respFrame)
		require.NoError(t, err)
		require.Equal(t, int32(7), resp.Opaque)
		require.Equal(t, strconv.Itoa(size), resp.ExtFields["n"])
		require.True(t, bytes.Equal(body, resp.Body), "size %d: echoed body differs", size)
		_ = nc.Close()
	}
}

// countingReader counts the bytes it has handed out.
type countingReader struct {
	r    io.Reader
	sent int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sent += n
	return n, err
}

// A body read through the connection's frame reader never holds more than
// twice what has arrived, delivered in small pieces or at once; and one
// that has arrived whole behind the read buffer (a pop answer of 32
// messages of 1 KiB) takes two allocations, not one per doubling.
func TestReadBodyGrowsWithWhatArrived(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ size, chunk, maxAllocs int }{
		{34 << 10, 1 << 20, 2}, {200 << 10, 1 << 20, 0}, {34 << 10, 700, 0}, {100 << 10, 7, 0},
	} {
		frame, err := AppendFrame(nil, NewRequest(SendMessage, nil, make([]byte, tc.size)))
		require.NoError(t, err)
		src := &countingReader{r: &chunkReader{b: frame, rnd: rnd, max: tc.chunk}}
		var pools bufPools
		fr := &frameReader{src: src, pools: &pools}
		require.NoError(t, fr.waitFrame())
		var prefix [lenPrefixSize]byte
		_, err = io.ReadFull(fr, prefix[:])
		require.NoError(t, err)
		held, allocs := 0, 0
		body, err := readBody(fr, int(binary.BigEndian.Uint32(prefix[:])), func(n int) error {
			held += n
			allocs++
			require.LessOrEqual(t, held, max(2*src.sent, minBodyChunk), "size %d in pieces of %d: held against sent", tc.size, tc.chunk)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, frame[lenPrefixSize:], body)
		if tc.maxAllocs > 0 {
			require.LessOrEqual(t, allocs, tc.maxAllocs, "size %d arrived whole", tc.size)
		}
	}
}

// A frame that announces 16 MiB and sends 10 bytes costs kilobytes, not
// the announcement; a frame above the limit is refused before its body is
// read.
func TestReadFrameDoesNotTrustTheLength(t *testing.T) {
	var prefix [lenPrefixSize]byte
	binary.BigEndian.PutUint32(prefix[:], DefaultMaxFrame)
	in := append(prefix[:], make([]byte, 10)...)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := ReadFrame(bytes.NewReader(in), 0)
	runtime.ReadMemStats(&m1)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(64<<10), "bytes allocated for an announced 16 MiB frame")

	binary.BigEndian.PutUint32(prefix[:], DefaultMaxFrame+1)
	_, err = ReadFrame(bytes.NewReader(prefix[:]), 0)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

// jsonLog collects JSON log records.
type jsonLog struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (l *jsonLog) Write(p []byte) (int, error) {
	var rec map[string]any
	if err := json.Unmarshal(p, &rec); err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return len(p), nil
}

// closings returns, per remote address, the "closing connection" records.
func (l *jsonLog) closings() map[string][]map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string][]map[string]any{}
	for _, r := range l.recs {
		if r["msg"] == "remoting: closing connection" {
			addr, _ := r["remote"].(string)
			m[addr] = append(m[addr], r)
		}
	}
	return m
}

// hostile is one misbehaving connection of TestHostileConnections.
type hostile struct {
	kind   string
	nc     net.Conn
	closed chan time.Duration // when the server closed it, after the start
}

// Hundreds of hostile connections (huge and oversized length prefixes,
// slow writers, truncated frames, garbage, silence, and a few connections
// flooding valid requests) against one server, while a well-behaved client
// keeps doing round trips: its requests all succeed quickly, the heap stays
// bounded, the deadlines close every hostile connection, and the log has
// one line for each of them and none for anyone else.
func TestHostileConnections(t *testing.T) {
	const (
		readTimeout = 2 * time.Second
		idleTimeout = 3 * time.Second
		runFor      = 7 * time.Second
		heapBound   = 200 << 20
		maxLatency  = 2 * time.Second // the machine may be shared
	)
	logs := &jsonLog{}
	budget := NewBudget(64 << 20)
	ts := startServer(t, echo, func(s *Server) {
		s.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s.ReadTimeout = readTimeout
		s.IdleTimeout = idleTimeout
		s.MaxInflightRequests = 32
		s.MaxInflightBytes = 1 << 20
		s.Budget = budget
	})

	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	heap0 := m.HeapInuse
	var heapMax atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > heapMax.Load() {
				heapMax.Store(m.HeapInuse)
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				return
			}
		}
	}()

	start := time.Now()
	validFrame := func(body int) []byte {
		req := NewRequest(SendMessage, map[string]string{"topic": "T", "queueId": "1"}, make([]byte, body))
		req.Opaque = 1
		f, err := AppendFrame(nil, req)
		require.NoError(t, err)
		return f
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	var hostiles []*hostile
	open := func(kind string, send func(nc net.Conn)) {
		nc, err := net.Dial("tcp", ts.addr)
		require.NoError(t, err)
		h := &hostile{kind: kind, nc: nc, closed: make(chan time.Duration, 1)}
		hostiles = append(hostiles, h)
		go func() {
			send(nc)
			_, _ = io.Copy(io.Discard, nc) // until the server closes it
			h.closed <- time.Since(start)
		}()
	}
	prefix := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	for range 60 { // a 16 MiB frame (the limit) announced, nothing sent
		open("huge prefix", func(nc net.Conn) { _, _ = nc.Write(prefix(DefaultMaxFrame)) })
	}
	for range 40 { // a frame above the limit
		open("oversized prefix", func(nc net.Conn) { _, _ = nc.Write(prefix(1 << 30)) })
	}
	for range 60 { // a valid frame, one byte a second
		f := validFrame(100)
		open("slow writer", func(nc net.Conn) {
			go func() {
				for _, b := range f {
					if _, err := nc.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(time.Second)
				}
			}()
		})
	}
	for range 60 { // half a frame, then silence
		f := validFrame(1000)
		open("truncated", func(nc net.Conn) { _, _ = nc.Write(f[:len(f)/2]) })
	}
	for range 60 { // random bytes
		g := make([]byte, 256)
		for i := range g {
			g[i] = byte(rnd.Uint32())
		}
		open("garbage", func(nc net.Conn) { _, _ = nc.Write(g) })
	}
	for range 20 { // connected, never a byte
		open("silent", func(net.Conn) {})
	}

	// Flooders: valid requests as fast as they go, two reading their
	// answers and two never reading them.
	flood := validFrame(4 << 10)
	var floodAddrs []string
	floodCtx, stopFlood := context.WithCancel(context.Background())
	var floodWG sync.WaitGroup
	var floodAnswers atomic.Int64
	for range 2 {
		nc, err := net.Dial("tcp", ts.addr)
		require.NoError(t, err)
		floodAddrs = append(floodAddrs, nc.LocalAddr().String())
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			defer nc.Close()
			go func() { <-floodCtx.Done(); _ = nc.Close() }()
			for floodCtx.Err() == nil {
				if _, err := nc.Write(flood); err != nil {
					return
				}
			}
		}()
	}
	for range 2 {
		c := dial(t, ts.addr, Options{})
		floodAddrs = append(floodAddrs, c.LocalAddr().String())
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			window := make(chan struct{}, 256)
			for floodCtx.Err() == nil {
				window <- struct{}{}
				req := NewRequest(SendMessage, map[string]string{"topic": "T"}, make([]byte, 4<<10))
				err := c.InvokeAsync(req, 10*time.Second, func(*Command, error) {
					floodAnswers.Add(1)
					<-window
				})
				if err != nil {
					return
				}
			}
		}()
	}

	// The well-behaved client.
	good := dial(t, ts.addr, Options{})
	var lat []time.Duration
	for time.Since(start) < runFor {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := good.Invoke(ctx, NewRequest(SendMessage, map[string]string{"topic": "G"}, []byte("hello")))
		cancel()
		require.NoError(t, err, "well-behaved request %d at %v", len(lat), time.Since(start))
		require.Equal(t, "hello", string(resp.Body))
		lat = append(lat, time.Since(t0))
		time.Sleep(5 * time.Millisecond)
	}
	stopFlood()
	floodWG.Wait()
	close(stopSampling)
	<-sampled

	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	grew := int64(heapMax.Load()) - int64(heap0)
	t.Logf("well-behaved: %d round trips, median %v, p99 %v, max %v; flooders got %d answers; heap in use %d MiB at start, peak +%d MiB; budget in use at the end %d",
		len(lat), lat[len(lat)/2], p99, lat[len(lat)-1], floodAnswers.Load(), heap0>>20, grew>>20, budget.InUse())
	require.Less(t, lat[len(lat)-1], maxLatency, "slowest well-behaved round trip")
	require.Less(t, grew, int64(heapBound), "heap growth")
	require.Positive(t, floodAnswers.Load())

	// Every hostile connection was closed by the server, within its
	// deadline and some slack for the loaded machine.
	byKind := map[string][]time.Duration{}
	for _, h := range hostiles {
		select {
		case d := <-h.closed:
			byKind[h.kind] = append(byKind[h.kind], d)
		case <-time.After(3 * time.Second):
			t.Fatalf("%s connection %s still open %v after the start", h.kind, h.nc.LocalAddr(), time.Since(start))
		}
	}
	for kind, ds := range byKind {
		last := slices.Max(ds)
		t.Logf("%-16s %3d connections, all closed by %v", kind, len(ds), last.Round(10*time.Millisecond))
		require.Less(t, last, idleTimeout+3*time.Second, kind)
	}

	// One log line per hostile connection, none for the others.
	closings := logs.closings()
	reasons := map[string]int{}
	for _, h := range hostiles {
		recs := closings[h.nc.LocalAddr().String()]
		require.Len(t, recs, 1, "%s connection %s: log lines", h.kind, h.nc.LocalAddr())
		reasons[h.kind+": "+recs[0]["reason"].(string)]++
	}
	t.Logf("logged closings: %v", reasons)
	for _, a := range append(floodAddrs, good.LocalAddr().String()) {
		require.Empty(t, closings[a], "log lines about %s", a)
	}
	require.Equal(t, len(hostiles), len(closings), "closing lines")
	for _, h := range hostiles {
		_ = h.nc.Close()
	}
}

// The idle timeout closes a connection that starts no frame, but not while
// a request is held (a long poll), nor one that keeps sending.
func TestIdleTimeoutSparesHeldRequests(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, func(ctx context.Context, c *ServerConn, req *Command) *Command {
		if req.Code == PullMessage {
			select {
			case <-time.After(3 * idle):
			case <-ctx.Done():
			}
		}
		return echo(ctx, c, req)
	}, func(s *Server) { s.IdleTimeout = idle })

	c := dial(t, ts.addr, Options{})
	_, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
	require.NoError(t, err, "held request")
	for range 6 { // 2 idle periods of steady traffic
		time.Sleep(idle / 3)
		_, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
		require.NoError(t, err)
	}
	t0 := time.Now()
	select {
	case <-c.Done():
		require.Less(t, time.Since(t0), 3*idle)
	case <-time.After(5 * idle):
		t.Fatal("idle connection not closed")
	}
	require.Eventually(t, func() bool { return ts.logs.contains("reason=idle") }, time.Second, 10*time.Millisecond)
}

// blockingServer holds every request until release gets a value, and
// counts the requests its handler has seen.
func blockingServer(t *testing.T, configure func(*Server)) (ts *testServer, entered *atomic.Int32, release chan struct{}) {
	entered = new(atomic.Int32)
	release = make(chan struct{}, 1000)
	ts = startServer(t, func(ctx context.Context, c *ServerConn, req *Command) *Command {
		entered.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return echo(ctx, c, req)
	}, configure)
	return ts, entered, release
}

// At MaxInflightRequests the server stops reading the connection; each
// answer lets one more request in.
func TestInflightRequestLimit(t *testing.T) {
	ts, entered, release := blockingServer(t, func(s *Server) { s.MaxInflightRequests = 4 })
	c := dial(t, ts.addr, Options{})
	var answered atomic.Int32
	for range 10 {
		require.NoError(t, c.InvokeAsync(NewRequest(SendMessage, nil, nil), 10*time.Second, func(_ *Command, err error) {
			if err == nil {
				answered.Add(1)
			}
		}))
	}
	require.Eventually(t, func() bool { return entered.Load() == 4 }, 2*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, int32(4), entered.Load(), "requests read past the limit")
	release <- struct{}{}
	require.Eventually(t, func() bool { return entered.Load() == 5 }, 2*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, int32(5), entered.Load())
	for range 9 {
		release <- struct{}{}
	}
	require.Eventually(t, func() bool { return answered.Load() == 10 }, 2*time.Second, time.Millisecond)
}

// A Budget shared by connections holds all of them back: with it spent by
// one connection's held requests, another's request is not read until one
// of them is answered; at the end every byte is returned.
func TestBudgetAcrossConnections(t *testing.T) {
	budget := NewBudget(10 << 10)
	ts, entered, release := blockingServer(t, func(s *Server) { s.Budget = budget })
	a := dial(t, ts.addr, Options{})
	body := make([]byte, 4<<10)
	var answered atomic.Int32
	cb := func(_ *Command, err error) {
		if err == nil {
			answered.Add(1)
		}
	}
	for range 3 {
		require.NoError(t, a.InvokeAsync(NewRequest(SendMessage, nil, body), 10*time.Second, cb))
	}
	require.Eventually(t, func() bool { return entered.Load() == 3 }, 10*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, budget.InUse(), int64(12<<10))

	b := dial(t, ts.addr, Options{})
	require.NoError(t, b.InvokeAsync(NewRequest(SendMessage, nil, nil), 10*time.Second, cb))
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, int32(3), entered.Load(), "read past the budget")
	release <- struct{}{}
	require.Eventually(t, func() bool { return entered.Load() == 4 }, 10*time.Second, time.Millisecond)
	for range 3 {
		release <- struct{}{}
	}
	require.Eventually(t, func() bool { return answered.Load() == 4 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return budget.InUse() == 0 }, 10*time.Second, time.Millisecond)

	// Held requests of a connection that goes away are returned too.
	require.NoError(t, a.InvokeAsync(NewRequest(SendMessage, nil, body), 10*time.Second, cb))
	require.Eventually(t, func() bool { return entered.Load() == 5 }, 10*time.Second, time.Millisecond)
	require.Positive(t, budget.InUse())
	_ = a.Close()
	require.Eventually(t, func() bool { return budget.InUse() == 0 }, 10*time.Second, time.Millisecond)
}

// A connection past MaxConns is closed at once, with a log line; once one
// closes, a new one is served.
func TestMaxConns(t *testing.T) {
	ts := startServer(t, echo, func(s *Server) { s.MaxConns = 3 })
	var conns []*Conn
	for range 3 {
		c := dial(t, ts.addr, Options{})
		_, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
		require.NoError(t, err)
		conns = append(conns, c)
	}
	extra := dial(t, ts.addr, Options{})
	select {
	case <-extra.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("connection past MaxConns still open")
	}
	require.True(t, ts.logs.contains("reason=\"too many connections\""))

	_ = conns[0].Close()
	require.Eventually(t, func() bool {
		c, err := Dial(testCtx(t), ts.addr, Options{})
		if err != nil {
			return false
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err = c.Invoke(ctx, NewRequest(SendMessage, nil, nil))
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
}

// A frame that stops arriving closes a client connection too, after
// Options.ReadTimeout.
func TestClientReadTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = nc.Write([]byte{0, 0, 1, 0, 0}) // 256 bytes announced, 1 sent
		time.Sleep(5 * time.Second)
	}()
	c := dial(t, ln.Addr().String(), Options{ReadTimeout: 200 * time.Millisecond})
	select {
	case <-c.Done():
		require.True(t, errors.Is(c.Err(), errReadTimeout), "%v", c.Err())
	case <-time.After(3 * time.Second):
		t.Fatal("client connection with a stalled frame still open")
	}
}
