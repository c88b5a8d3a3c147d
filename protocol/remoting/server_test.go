package remoting

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logSink collects log lines and forwards them to t.Log.
type logSink struct {
	t  testing.TB
	mu struct {
		sync.Mutex
		lines []string
	}
}

func (s *logSink) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	s.mu.Lock()
	s.mu.lines = append(s.mu.lines, line)
	s.mu.Unlock()
	s.t.Log(line)
	return len(p), nil
}

func (s *logSink) contains(parts ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range s.mu.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

type testServer struct {
	srv  *Server
	addr string
	logs *logSink
}

// startServer serves h on 127.0.0.1 until the test ends; it then checks
// that Close returns and Serve returned nil.
func startServer(t *testing.T, h Handler, configure ...func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := &logSink{t: t}
	srv := &Server{
		Handler: h,
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range configure {
		f(srv)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case err := <-served:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return &testServer{srv: srv, addr: ln.Addr().String(), logs: logs}
}

func dial(t *testing.T, addr string, opts Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echo answers with the request's ext fields and body.
func echo(_ context.Context, _ *ServerConn, req *Command) *Command {
	resp := NewResponse(req, Success, "")
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	return resp
}

func TestInvokeEcho(t *testing.T) {
	ts := startServer(t, echo)
	c := dial(t, ts.addr, Options{})
	require.Equal(t, ts.addr, c.Addr())
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		req := NewRequest(SendMessage, map[string]string{"topic": "T"}, []byte("payload"))
		req.Serialize = st
		resp, err := c.Invoke(testCtx(t), req)
		require.NoError(t, err)
		require.Equal(t, Success, resp.Code)
		require.Equal(t, req.Opaque, resp.Opaque)
		require.True(t, resp.IsResponse())
		require.Equal(t, st, resp.Serialize, "answered in the request's serialization")
		require.Equal(t, "T", resp.ExtFields["topic"])
		require.Equal(t, "payload", string(resp.Body))
	}
	require.NoError(t, c.Err())
}

func TestNilHandlerAnswersNotSupported(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts.addr, Options{})
	resp, err := c.Invoke(testCtx(t), NewRequest(12345, nil, nil))
	require.NoError(t, err)
	require.Equal(t, RequestCodeNotSupported, resp.Code)
	require.Equal(t, " request type 12345 not supported", resp.Remark)
}

// A held long poll must not block a later request on the same connection.
func TestLongPollDoesNotBlockLaterRequests(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{})
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, req *Command) *Command {
		if req.Code == PullMessage {
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
				return nil
			}
			return NewResponse(req, PullNotFound, "held")
		}
		return NewResponse(req, Success, "fast")
	})
	c := dial(t, ts.addr, Options{})

	pulled := make(chan *Command, 1)
	require.NoError(t, c.InvokeAsync(NewRequest(PullMessage, nil, nil), 5*time.Second, func(resp *Command, err error) {
		if err != nil {
			t.Error(err)
		}
		pulled <- resp
	}))
	<-held
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.Invoke(ctx, NewRequest(SendMessage, nil, nil))
		cancel()
		require.NoError(t, err, "send behind a held pull")
		require.Equal(t, "fast", resp.Remark)
	}
	select {
	case <-pulled:
		t.Fatal("pull answered before release")
	default:
	}
	close(release)
	select {
	case resp := <-pulled:
		require.Equal(t, PullNotFound, resp.Code)
	case <-time.After(5 * time.Second):
		t.Fatal("no pull response")
	}
}

// Responses released in reverse order reach the right callers.
func TestOutOfOrderResponses(t *testing.T) {
	const n = 8
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	arrived := make(chan int, n)
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, req *Command) *Command {
		i, _ := strconv.Atoi(req.ExtFields["i"])
		arrived <- i
		select {
		case <-gates[i]:
		case <-ctx.Done():
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"i": req.ExtFields["i"]}
		return resp
	})
	c := dial(t, ts.addr, Options{})

	var wg sync.WaitGroup
	order := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.Invoke(testCtx(t), NewRequest(QueryMessage, map[string]string{"i": strconv.Itoa(i)}, nil))
			if !assertNoError(t, err) {
				return
			}
			got, _ := strconv.Atoi(resp.ExtFields["i"])
			if got != i {
				t.Errorf("request %d got the response of %d", i, got)
			}
			order <- got
		})
	}
	for range n {
		<-arrived
	}
	for i := n - 1; i >= 0; i-- {
		close(gates[i])
		require.Equal(t, i, <-order, "responses come back in release order")
	}
	wg.Wait()
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// A malformed or oversized frame closes only its own connection.
func TestBadFrameClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, echo, func(s *Server) { s.MaxFrame = 1 << 20 })
	good := dial(t, ts.addr, Options{})
	_, err := good.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
	require.NoError(t, err)

	for name, frame := range map[string][]byte{
		"header length beyond frame": unhex(t, "00000008 00000064 7b7d7b7d"),
		"unknown serialize type":     unhex(t, "00000006 05000002 7b7d"),
		"bad JSON":                   unhex(t, "00000006 00000002 7b7b"),
		"frame length below 4":       unhex(t, "00000002 0000"),
		"oversized frame":            unhex(t, "00200000 00000002 7b7d"), // 2 MiB > MaxFrame; body never sent
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := net.Dial("tcp", ts.addr)
			require.NoError(t, err)
			defer raw.Close()
			_, err = raw.Write(frame)
			require.NoError(t, err)
			require.NoError(t, raw.SetReadDeadline(time.Now().Add(5*time.Second)))
			n, err := raw.Read(make([]byte, 1))
			require.Equal(t, 0, n)
			require.ErrorIs(t, err, io.EOF, "server closed the bad connection")
			require.Eventually(t, func() bool {
				return ts.logs.contains("level=WARN", raw.LocalAddr().String())
			}, 5*time.Second, 10*time.Millisecond, "warning names the remote address")

			resp, err := good.Invoke(testCtx(t), NewRequest(HeartBeat, nil, []byte("still here")))
			require.NoError(t, err, "the other connection keeps working")
			require.Equal(t, "still here", string(resp.Body))
		})
	}
}

// When the connection dies, every pending request fails promptly with
// ErrConnClosed.
func TestConnectionLossFailsPending(t *testing.T) {
	conns := make(chan *ServerConn, 1)
	ts := startServer(t, func(ctx context.Context, sc *ServerConn, req *Command) *Command {
		if req.Code == HeartBeat {
			conns <- sc
		}
		<-ctx.Done()
		return nil
	})
	c := dial(t, ts.addr, Options{})

	asyncErr := make(chan error, 2)
	for range 2 {
		require.NoError(t, c.InvokeAsync(NewRequest(PullMessage, nil, nil), time.Minute, func(resp *Command, err error) {
			if resp != nil {
				t.Errorf("unexpected response %+v", resp)
			}
			asyncErr <- err
		}))
	}
	syncErr := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), NewRequest(SendMessage, nil, nil))
		syncErr <- err
	}()
	require.NoError(t, c.Oneway(NewRequest(HeartBeat, nil, nil)))
	sc := <-conns
	require.Eventually(t, func() bool { return c.l.pending.len() == 3 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	require.NoError(t, sc.Close()) // the server drops the connection
	for range 2 {
		select {
		case err := <-asyncErr:
			require.ErrorIs(t, err, ErrConnClosed)
		case <-time.After(2 * time.Second):
			t.Fatal("InvokeAsync callback not called")
		}
	}
	select {
	case err := <-syncErr:
		require.ErrorIs(t, err, ErrConnClosed)
	case <-time.After(2 * time.Second):
		t.Fatal("Invoke did not return")
	}
	require.Less(t, time.Since(start), time.Second)

	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrConnClosed)
	// The cause is kept: the peer's close, read as EOF, or as a reset when
	// the server closed with our heartbeat still unread in its buffer.
	require.True(t, errors.Is(c.Err(), io.EOF) || errors.Is(c.Err(), syscall.ECONNRESET),
		"the cause is kept: %v", c.Err())
	require.ErrorIs(t, c.Oneway(NewRequest(HeartBeat, nil, nil)), ErrConnClosed)
	_, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
	require.ErrorIs(t, err, ErrConnClosed)
	require.ErrorIs(t, c.InvokeAsync(NewRequest(HeartBeat, nil, nil), time.Second, func(*Command, error) {
		t.Error("callback after a refused InvokeAsync")
	}), ErrConnClosed)
}

func TestCloseFailsPending(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, _ *Command) *Command {
		<-ctx.Done()
		return nil
	})
	c := dial(t, ts.addr, Options{})
	errs := make(chan error, 1)
	require.NoError(t, c.InvokeAsync(NewRequest(PullMessage, nil, nil), 0, func(_ *Command, err error) { errs <- err }))
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	select {
	case err := <-errs:
		require.ErrorIs(t, err, ErrConnClosed)
	case <-time.After(2 * time.Second):
		t.Fatal("callback not called after Close")
	}
}

// One-way requests and nil responses get nothing back.
func TestOnewayGetsNoResponse(t *testing.T) {
	onewayDone := make(chan struct{})
	var onewayOnce sync.Once
	var mu sync.Mutex
	var seen []*Command
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, req *Command) *Command {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		switch req.Code {
		case UpdateConsumerOffset: // one-way; the handler answers anyway
			defer onewayOnce.Do(func() { close(onewayDone) })
			return NewResponse(req, Success, "must be dropped")
		case EndTransaction: // the handler answers nothing
			return nil
		}
		<-onewayDone
		time.Sleep(50 * time.Millisecond) // let a wrong response overtake
		return NewResponse(req, Success, "answer")
	})

	raw, err := net.Dial("tcp", ts.addr)
	require.NoError(t, err)
	defer raw.Close()
	write := func(c *Command) {
		b, err := AppendFrame(nil, c)
		require.NoError(t, err)
		_, err = raw.Write(b)
		require.NoError(t, err)
	}
	oneway := NewRequest(UpdateConsumerOffset, nil, nil)
	oneway.Opaque, oneway.Flag = 1, FlagOneway
	write(oneway)
	silent := NewRequest(EndTransaction, nil, nil)
	silent.Opaque = 2
	write(silent)
	normal := NewRequest(HeartBeat, nil, nil)
	normal.Opaque = 3
	write(normal)

	require.NoError(t, raw.SetReadDeadline(time.Now().Add(5*time.Second)))
	frame, err := ReadFrame(raw, 0)
	require.NoError(t, err)
	resp, err := DecodeFrame(frame)
	require.NoError(t, err)
	require.Equal(t, int32(3), resp.Opaque, "the only response is the normal request's")
	require.Equal(t, "answer", resp.Remark)

	require.NoError(t, raw.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = ReadFrame(raw, 0)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "nothing else arrives: %v", err)

	// Conn.Oneway sets the flag.
	c := dial(t, ts.addr, Options{})
	require.NoError(t, c.Oneway(NewRequest(UpdateConsumerOffset, map[string]string{"via": "conn"}, nil)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		last := seen[len(seen)-1]
		return last.ExtFields["via"] == "conn" && last.IsOneway()
	}, 5*time.Second, time.Millisecond)
}

// Server.Close returns, cancelling the contexts of blocked handlers.
func TestServerCloseCancelsHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	started := make(chan struct{}, 2)
	cancelled := make(chan error, 2)
	srv := &Server{Handler: func(ctx context.Context, _ *ServerConn, _ *Command) *Command {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil
	}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	c := dial(t, ln.Addr().String(), Options{})
	failed := make(chan error, 2)
	for range 2 {
		require.NoError(t, c.InvokeAsync(NewRequest(PullMessage, nil, nil), 0, func(_ *Command, err error) { failed <- err }))
	}
	<-started
	<-started

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Server.Close did not return")
	}
	for range 2 {
		require.ErrorIs(t, <-cancelled, context.Canceled)
		require.ErrorIs(t, <-failed, ErrConnClosed)
	}
	require.NoError(t, <-served)
	require.NoError(t, srv.Close(), "Close twice")
	require.NoError(t, srv.Serve(ln), "Serve after Close returns nil")

	_, err = Dial(testCtx(t), ln.Addr().String(), Options{})
	require.Error(t, err, "listener closed")
}

func TestInvokeContextRemovesWaiter(t *testing.T) {
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, req *Command) *Command {
		time.Sleep(100 * time.Millisecond)
		return NewResponse(req, Success, "late")
	})
	c := dial(t, ts.addr, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Invoke(ctx, NewRequest(SendMessage, nil, nil))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 0, c.l.pending.len(), "waiter removed")

	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = c.Invoke(cancelled, NewRequest(SendMessage, nil, nil))
	require.ErrorIs(t, err, context.Canceled)

	// The late response is dropped and the connection keeps working.
	resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	require.NoError(t, err)
	require.Equal(t, "late", resp.Remark)
}

func TestInvokeAsyncTimeout(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, func(ctx context.Context, _ *ServerConn, req *Command) *Command {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return NewResponse(req, Success, "late")
	})
	c := dial(t, ts.addr, Options{})
	var calls sync.WaitGroup
	calls.Add(1)
	var got error
	var count int
	var mu sync.Mutex
	start := time.Now()
	require.NoError(t, c.InvokeAsync(NewRequest(SendMessage, nil, nil), 30*time.Millisecond, func(resp *Command, err error) {
		mu.Lock()
		defer mu.Unlock()
		count++
		got = err
		if count == 1 {
			calls.Done()
		}
	}))
	calls.Wait()
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	require.ErrorIs(t, got, ErrTimeout)
	require.Equal(t, 0, c.l.pending.len())

	close(release)
	resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	require.NoError(t, err)
	require.Equal(t, "late", resp.Remark)
	mu.Lock()
	require.Equal(t, 1, count, "the callback runs exactly once")
	mu.Unlock()
}

func TestServerInitiatedRequests(t *testing.T) {
	results := make(chan *Command, 1)
	ts := startServer(t, func(ctx context.Context, sc *ServerConn, req *Command) *Command {
		ask := NewRequest(GetConsumerRunningInfo, map[string]string{"q": req.ExtFields["q"]}, nil)
		resp, err := sc.Invoke(ctx, ask)
		if err != nil {
			t.Error(err)
			return nil
		}
		results <- resp
		if err := sc.Oneway(NewRequest(NotifyConsumerIDsChanged, map[string]string{"consumerGroup": "cg"}, nil)); err != nil {
			t.Error(err)
		}
		return NewResponse(req, Success, "")
	})

	notified := make(chan *Command, 1)
	c := dial(t, ts.addr, Options{OnRequest: func(req *Command) *Command {
		if req.Code == NotifyConsumerIDsChanged {
			notified <- req
			return NewResponse(req, Success, "dropped: one-way")
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"a": "answer to " + req.ExtFields["q"]}
		return resp
	}})
	_, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, map[string]string{"q": "x"}, nil))
	require.NoError(t, err)
	require.Equal(t, "answer to x", (<-results).ExtFields["a"])
	n := <-notified
	require.True(t, n.IsOneway())
	require.False(t, n.IsResponse())

	// Without OnRequest the client answers REQUEST_CODE_NOT_SUPPORTED.
	plain := dial(t, ts.addr, Options{})
	_, err = plain.Invoke(testCtx(t), NewRequest(HeartBeat, map[string]string{"q": "y"}, nil))
	require.NoError(t, err)
	require.Equal(t, RequestCodeNotSupported, (<-results).Code)
}

func TestOversizedResponseBecomesSystemError(t *testing.T) {
	ts := startServer(t, func(_ context.Context, _ *ServerConn, req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.Body = make([]byte, 2<<10)
		return resp
	}, func(s *Server) { s.MaxFrame = 1 << 10 })
	c := dial(t, ts.addr, Options{})
	resp, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
	require.NoError(t, err)
	require.Equal(t, SystemError, resp.Code)
	require.Contains(t, resp.Remark, "exceeds limit")

	// A request over the client's limit fails to send.
	small := dial(t, ts.addr, Options{MaxFrame: 100})
	_, err = small.Invoke(testCtx(t), NewRequest(SendMessage, nil, bytes.Repeat([]byte("x"), 200)))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Equal(t, 0, small.l.pending.len())
	require.NoError(t, small.Err(), "the connection stays up")
}

func TestServeSeveralListeners(t *testing.T) {
	srv := &Server{Handler: echo}
	var addrs []string
	served := make(chan error, 2)
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, ln.Addr().String())
		go func() { served <- srv.Serve(ln) }()
	}
	for _, addr := range addrs {
		c := dial(t, addr, Options{})
		_, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
		require.NoError(t, err)
	}
	require.NoError(t, srv.Close())
	require.NoError(t, <-served)
	require.NoError(t, <-served)
}

func TestDialError(t *testing.T) {
	dialErr := errors.New("no route")
	_, err := Dial(testCtx(t), "10.0.0.1:1", Options{Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, dialErr
	}})
	require.ErrorIs(t, err, dialErr)
}

func (p *pendingTable) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.calls)
}

// Requests an Inline hook takes are answered by ServerConn.Reply, from any
// goroutine and in any order; the others go to the Handler. More answers
// than the connection's queue holds, all at once, still arrive (Reply
// never blocks the goroutine that calls it).
func TestInlineReply(t *testing.T) {
	var mu sync.Mutex
	var taken []*Command
	var conn *ServerConn
	ts := startServer(t, echo, func(s *Server) {
		// Every request is held until all are in: more than the default
		// in-flight limit, at which the server would stop reading.
		s.MaxInflightRequests = 2 * outQueueLen
		s.Inline = func(c *ServerConn, req *Command) bool {
			if req.Code != SendMessageV2 {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			conn = c
			taken = append(taken, req)
			return true
		}
	})
	c := dial(t, ts.addr, Options{})
	resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"k": "v"}, nil))
	require.NoError(t, err)
	require.Equal(t, "v", resp.ExtFields["k"], "not taken: the handler answered")

	n := outQueueLen + 100
	got := make(chan *Command, n)
	for i := 0; i < n; i++ {
		req := NewRequest(SendMessageV2, map[string]string{"i": strconv.Itoa(i)}, nil)
		require.NoError(t, c.InvokeAsync(req, 5*time.Second, func(resp *Command, err error) {
			require.NoError(t, err)
			got <- resp
		}))
	}
	// A one-way request an Inline hook takes gets no answer.
	require.NoError(t, c.Oneway(NewRequest(SendMessageV2, map[string]string{"i": "oneway"}, nil)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(taken) == n+1
	}, 5*time.Second, time.Millisecond)
	mu.Lock()
	reqs := taken
	mu.Unlock()
	// Answer newest first, all from one goroutine that must never block.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := len(reqs) - 1; i >= 0; i-- {
			resp := NewResponse(reqs[i], Success, "")
			resp.ExtFields = map[string]string{"i": reqs[i].ExtFields["i"]}
			conn.Reply(reqs[i], resp)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Reply blocked")
	}
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		select {
		case resp := <-got:
			require.Equal(t, Success, resp.Code)
			seen[resp.ExtFields["i"]] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d answers", i, n)
		}
	}
	require.Len(t, seen, n)
	require.False(t, seen["oneway"])
}

// TestAbortDropsUnsent: after Abort, what the peer has not yet received is
// never delivered: it reads up to some point and then gets a reset, not
// the rest of the stream (a plain Close lets the kernel deliver it, and
// the peer sees EOF only after the last byte).
func TestAbortDropsUnsent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := Dial(context.Background(), l.Addr().String(), Options{})
	require.NoError(t, err)
	peer := <-accepted
	defer peer.Close()
	// The peer does not read: fill its receive buffer and our send buffer.
	body := make([]byte, 1<<20)
	for i := 0; i < 64; i++ {
		require.NoError(t, c.Oneway(NewRequest(UpdateConsumerOffset, nil, body)))
	}
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Abort())
	time.Sleep(50 * time.Millisecond)
	n, err := io.Copy(io.Discard, peer)
	require.ErrorIs(t, err, syscall.ECONNRESET, "the peer must see a reset after %d bytes", n)
	require.Less(t, n, int64(64<<20))
}
