package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Handler handles one request. It runs in its own goroutine, so it may
// block (a long-polled pull) without delaying other requests on the same
// connection. ctx is cancelled when the connection closes or the server
// shuts down; handlers that block must watch it. The returned command is
// sent as the response: the server sets its opaque to req's and sets
// FlagResponse, so it must be a command of its own, not one shared with
// other responses. A nil response sends nothing; the response to a one-way
// request is dropped.
type Handler func(ctx context.Context, conn *ServerConn, req *Command) *Command

// Server serves the remoting protocol on one or more listeners. Set its
// fields before the first Serve and do not change them afterwards. The zero
// value with a Handler is ready to use; a nil Handler answers every
// request REQUEST_CODE_NOT_SUPPORTED.
type Server struct {
	Handler Handler
	// Inline, if set, is offered every request first, on the connection's
	// reader goroutine, before the request gets a handler goroutine. If it
	// returns true it has taken the request and answers it later with
	// ServerConn.Reply (from any goroutine); if false, Handler runs as
	// usual. Inline must not block: it delays every later request of the
	// connection. It exists for the hot path (sends a leader replicates and
	// answers on commit) where a goroutine per request costs more than the
	// work. A request Inline takes counts as in flight (MaxInflightRequests)
	// until Reply is called for it, so Inline must see that Reply is
	// called exactly once for every request it takes, one-way ones too.
	Inline func(conn *ServerConn, req *Command) bool
	// MaxFrame limits the frame length in both directions; 0 means
	// DefaultMaxFrame. A longer incoming frame closes its connection; a
	// longer response is replaced by a SYSTEM_ERROR response.
	MaxFrame int
	// Logger gets connection-level events; nil discards them.
	Logger *slog.Logger

	// Resource limits (see the package documentation). For each, 0 means
	// the Default constant of the same name and a negative value no
	// limit.
	//
	// ReadTimeout bounds how long a frame may take to arrive once it has
	// started; IdleTimeout how long a connection with no request in
	// flight may go without starting a frame (a held long poll is in
	// flight). A connection past either is closed.
	ReadTimeout, IdleTimeout time.Duration
	// MaxConns is the most connections served at once; one more is
	// accepted and closed at once.
	MaxConns int
	// MaxInflightRequests and MaxInflightBytes bound, per connection, the
	// requests read and not yet answered and their frame bytes (with the
	// frame being read). At either limit the server stops reading the
	// connection until answers are written. A request counts until its
	// response is written to the socket, or its handler returns nil, or,
	// for a request Inline took, until ServerConn.Reply.
	MaxInflightRequests int
	MaxInflightBytes    int64
	// Budget bounds the in-flight bytes of every connection of the
	// servers that share it, as MaxInflightBytes does for one; nil means
	// a budget of DefaultMaxInflightTotal for this server alone.
	Budget *Budget
	// ownBudget is the budget of a server without Budget.
	ownBudget  *Budget
	budgetOnce sync.Once

	// TLS, if set, is the certificate configuration of TLS connections,
	// and TLSMode says which connections are served (see TLSMode; the
	// first byte decides). Without TLS only plaintext is served. A TLS
	// handshake must complete within ReadTimeout of its first byte.
	TLS      *tls.Config
	TLSMode  TLSMode
	tlsOnce  sync.Once
	tlsSniff *tlsSniffer

	// offenders rate-limits the log lines about connections closed for
	// misbehaving.
	offenders offenderLog

	mu struct {
		sync.Mutex
		closed bool
		ctx    context.Context // parent of every connection's context; set on first use
		cancel context.CancelFunc
		lns    map[net.Listener]struct{}
		conns  map[*ServerConn]struct{}
	}
	// wg counts connection readers (each waits for its connection's
	// writer before it returns) and handler goroutines. Invariant: Add happens under mu while !mu.closed, or
	// from a goroutine wg already counts.
	wg    sync.WaitGroup
	pools bufPools // shared by all connections
	// handlers keeps goroutines that ran a handler for the next request.
	handlers handlerPool
}

// handlerPool keeps up to maxIdleHandlers goroutines that ran a handler,
// parked, for later requests. A new goroutine starts with a small stack,
// which a handler's calls grow by copying it a few times: during a pop
// run that copying was a tenth of the leader's CPU (runtime.newstack and
// copystack in a 5 s CPU profile). A parked goroutine keeps its stack.
type handlerPool struct {
	mu     sync.Mutex
	idle   []chan handlerJob
	closed bool
}

// maxIdleHandlers bounds the parked handler goroutines (and their stacks,
// a few KiB each) of a server.
const maxIdleHandlers = 256

type handlerJob struct {
	c   *ServerConn
	req *Command
}

// run has a parked goroutine handle j, or a new one.
func (p *handlerPool) run(j handlerJob) {
	p.mu.Lock()
	var ch chan handlerJob
	if n := len(p.idle); n > 0 {
		ch = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if ch != nil {
		ch <- j // buffered: never blocks
		return
	}
	go p.work(j)
}

// work handles j, then parks for the next job until the pool is full or
// closed.
func (p *handlerPool) work(j handlerJob) {
	ch := make(chan handlerJob, 1)
	for {
		j.c.handle(j.req)
		j = handlerJob{} // hold nothing while parked
		p.mu.Lock()
		if p.closed || len(p.idle) >= maxIdleHandlers {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		var ok bool
		if j, ok = <-ch; !ok {
			return
		}
	}
}

// close ends the parked goroutines and parks no more.
func (p *handlerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, ch := range p.idle {
		close(ch)
	}
	p.idle = nil
}

// errServerClosed is the cause of connections closed by Server.Close.
var errServerClosed = errors.New("remoting: server closed")

// Serve accepts connections on ln and serves each in its own goroutines.
// It blocks until Close (then it returns nil) or until Accept fails with a
// permanent error. Serve may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	ctx, ok := s.track(ln)
	if !ok {
		_ = ln.Close() // closed server: the listener is not wanted
		return nil
	}
	defer s.untrack(ln)
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logger().Warn("remoting: accept failed; retrying", "listener", ln.Addr(), "delay", delay, "err", err)
				select {
				case <-time.After(delay):
				case <-ctx.Done():
				}
				continue
			}
			return fmt.Errorf("remoting: accept on %s: %w", ln.Addr(), err)
		}
		delay = 0
		nc = s.sniffTLS(nc)
		c, full := s.newConn(ctx, nc)
		if full {
			s.offense(nc.RemoteAddr().String(), "too many connections",
				fmt.Errorf("remoting: %d connections open, the limit", orDefault(s.MaxConns, DefaultMaxConns)))
			_ = nc.Close()
			continue
		}
		if c == nil {
			_ = nc.Close() // accepted during Close
			return nil
		}
		go c.serve()
	}
}

// Close closes every listener and connection, cancels the handlers'
// contexts, and waits until every connection and handler goroutine has
// returned. It returns the listeners' close errors, if any.
func (s *Server) Close() error {
	s.mu.Lock()
	first := !s.mu.closed
	s.mu.closed = true
	var lns []net.Listener
	var conns []*ServerConn
	if first {
		for ln := range s.mu.lns {
			lns = append(lns, ln)
		}
		for c := range s.mu.conns {
			conns = append(conns, c)
		}
	}
	cancel := s.mu.cancel
	s.mu.Unlock()

	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("remoting: close listener %s: %w", ln.Addr(), err))
		}
	}
	if cancel != nil {
		cancel()
	}
	for _, c := range conns {
		c.l.closeWith(errServerClosed)
	}
	s.wg.Wait()
	s.handlers.close()
	return errors.Join(errs...)
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

// track registers ln and returns the server context, or false if the
// server is closed.
func (s *Server) track(ln net.Listener) (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, false
	}
	if s.mu.ctx == nil {
		s.mu.ctx, s.mu.cancel = context.WithCancel(context.Background())
		s.mu.lns = make(map[net.Listener]struct{})
		s.mu.conns = make(map[*ServerConn]struct{})
	}
	s.mu.lns[ln] = struct{}{}
	return s.mu.ctx, true
}

func (s *Server) untrack(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.lns, ln)
}

// newConn registers a connection. It returns nil if the server is closed,
// and full if it is at MaxConns.
func (s *Server) newConn(ctx context.Context, nc net.Conn) (c *ServerConn, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, false
	}
	if m := orDefault(s.MaxConns, DefaultMaxConns); m > 0 && len(s.mu.conns) >= m {
		return nil, true
	}
	c = &ServerConn{srv: s}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.l = newLink(nc, nc.RemoteAddr().String(), s.MaxFrame, s.ReadTimeout, s.Logger, &s.pools)
	c.l.idleTimeout = orDefault(s.IdleTimeout, DefaultIdleTimeout)
	budget := s.Budget
	if budget == nil {
		s.budgetOnce.Do(func() { s.ownBudget = NewBudget(DefaultMaxInflightTotal) })
		budget = s.ownBudget
	}
	c.l.acct = newConnAcct(orDefault(s.MaxInflightRequests, DefaultMaxInflightRequests),
		orDefault(s.MaxInflightBytes, DefaultMaxInflightBytes), budget)
	c.l.onClose = c.closed
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1) // c.serve; the link's run waits for its writer
	return c, false
}

// offense logs that the connection from addr is closed for reason, within
// the offender log's rate limit.
func (s *Server) offense(addr, reason string, err error) {
	ok, suppressed := s.offenders.allow(addr, reason)
	if !ok {
		return
	}
	args := []any{"remote", addr, "reason", reason, "err", err}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.logger().Warn("remoting: closing connection", args...)
}

// Conns is the number of client connections open now.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

func (s *Server) forget(c *ServerConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, c)
}

// ServerConn is one client connection of a Server. Its methods are safe
// for concurrent use.
type ServerConn struct {
	srv    *Server
	l      *link
	ctx    context.Context // cancelled when the connection closes
	cancel context.CancelFunc
}

// serve runs the connection until it closes.
func (c *ServerConn) serve() {
	defer c.srv.wg.Done()
	c.l.log.Debug("remoting: connection accepted", "remote", c.l.addr)
	_ = c.l.run(c.dispatch) // closed logs what deserves it
	c.cancel()
	c.srv.forget(c)
}

// closed logs why the reader stopped: one line for a connection that
// misbehaved (rate-limited per host), a debug line otherwise.
func (c *ServerConn) closed(err error) {
	var reason string
	switch {
	case c.l.closedErr() != nil:
		return // closed on this side; the read error is only the consequence
	case errors.Is(err, ErrFrameTooLarge):
		reason = "frame too large"
	case errors.Is(err, ErrMalformed):
		reason = "malformed frame"
	case errors.Is(err, errReadTimeout):
		reason = "read timeout"
	case errors.Is(err, errIdle):
		reason = "idle"
	case errors.Is(err, io.EOF):
		c.l.log.Debug("remoting: connection closed by peer", "remote", c.l.addr)
		return
	default:
		c.l.log.Debug("remoting: connection read failed", "remote", c.l.addr, "err", err)
		return
	}
	c.srv.offense(c.l.addr, reason, err)
}

// dispatch starts the handler of req, on a parked handler goroutine if
// there is one (handlerPool). It runs on the reader goroutine, which wg
// counts, so the Add is safe.
func (c *ServerConn) dispatch(req *Command) {
	if in := c.srv.Inline; in != nil && in(c, req) {
		return
	}
	c.srv.wg.Add(1)
	c.srv.handlers.run(handlerJob{c: c, req: req})
}

func (c *ServerConn) handle(req *Command) {
	defer c.srv.wg.Done()
	var resp *Command
	if h := c.srv.Handler; h != nil {
		resp = h(c.ctx, c, req)
	} else {
		resp = NewNotSupportedResponse(req)
	}
	if resp != nil {
		c.l.reply(req, resp, true) // this goroutine ends here: it may write
	} else {
		c.l.releaseReq(req)
	}
}

// RemoteAddr returns the client's address.
func (c *ServerConn) RemoteAddr() net.Addr { return c.l.nc.RemoteAddr() }

// LocalAddr returns the server's address of this connection.
func (c *ServerConn) LocalAddr() net.Addr { return c.l.nc.LocalAddr() }

// Context returns a context cancelled when the connection closes; it is
// the context handlers get.
func (c *ServerConn) Context() context.Context { return c.ctx }

// Done returns a channel closed when the connection is gone.
func (c *ServerConn) Done() <-chan struct{} { return c.l.closed }

// Err returns why the connection is gone (wrapping ErrConnClosed), or nil
// while it is open.
func (c *ServerConn) Err() error { return c.l.closedErr() }

// Close closes the connection. Handlers see their context cancelled.
func (c *ServerConn) Close() error {
	c.l.closeWith(nil)
	return nil
}

// Send queues cmd, as it is, on the connection's writer: for example a
// server-initiated request with an opaque of the caller's choosing. It
// blocks while the queue is full and returns an error wrapping
// ErrConnClosed once the connection is gone. A nil error means queued, not
// delivered.
func (c *ServerConn) Send(cmd *Command) error { return c.l.send(cmd) }

// Reply sends resp as the response to req, as a Handler's return value
// is sent: resp gets req's opaque and FlagResponse; nothing is sent for a
// one-way req. It is for requests an Inline hook took, and may be called
// from any goroutine. It never blocks: when the connection's queue is
// full the response is queued from a goroutine of its own. A response
// to a connection that is gone is dropped.
func (c *ServerConn) Reply(req, resp *Command) {
	if !stampReply(req, resp) {
		c.l.releaseReq(req)
		return
	}
	fb, err := c.l.encode(resp)
	if err != nil {
		// Same fallback as for a handler's response; rare, so blocking
		// in a goroutine of its own is fine.
		go c.l.reply(req, resp, false)
		return
	}
	fb.held = atomic.SwapInt64(&req.held, 0)
	if c.l.tryEnqueue(fb) {
		return
	}
	go func() {
		if err := c.l.enqueue(fb, false); err != nil {
			c.l.putBuf(fb)
		}
	}()
}

// Oneway sends a server-initiated request with a fresh opaque and
// FlagOneway set (as the Java broker sends CHECK_TRANSACTION_STATE and
// NOTIFY_CONSUMER_IDS_CHANGED). It modifies req.
func (c *ServerConn) Oneway(req *Command) error { return c.l.oneway(req) }

// Invoke sends a server-initiated request with a fresh opaque and waits for
// the client's response or ctx. It modifies req.
func (c *ServerConn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	return c.l.invoke(ctx, req)
}
