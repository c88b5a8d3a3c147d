package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Options configure a client connection.
type Options struct {
	// MaxFrame limits the frame length in both directions; 0 means
	// DefaultMaxFrame. A longer incoming frame closes the connection; a
	// longer request fails to send.
	MaxFrame int
	// ReadTimeout bounds how long an incoming frame may take to arrive
	// once it has started; a connection whose frame is late is closed.
	// 0 means DefaultReadTimeout; negative, no limit. An idle connection
	// is never closed on this side.
	ReadTimeout time.Duration
	// Dial opens the TCP connection; nil uses a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger gets connection-level events; nil discards them.
	Logger *slog.Logger
	// OnRequest handles a server-initiated request (CHECK_TRANSACTION_STATE,
	// NOTIFY_CONSUMER_IDS_CHANGED, ...) in its own goroutine. A non-nil
	// result is sent as the response (opaque and FlagResponse set for it)
	// unless the request is one-way. If OnRequest is nil, requests are
	// answered REQUEST_CODE_NOT_SUPPORTED and one-way requests ignored.
	OnRequest func(req *Command) *Command
}

// Conn is a client connection to one server address: one TCP connection
// on which requests are multiplexed by opaque. Its methods are safe for
// concurrent use. A Conn does not reconnect; once Done is closed, dial a
// new one.
type Conn struct {
	addr      string
	l         *link
	onRequest func(*Command) *Command
	pools     bufPools
}

// Dial connects to addr ("host:port").
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	dial := opts.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	c := &Conn{addr: addr, onRequest: opts.OnRequest}
	c.l = newLink(nc, addr, opts.MaxFrame, opts.ReadTimeout, opts.Logger, &c.pools)
	go func() { _ = c.l.run(c.dispatch) }() // run logs what deserves it
	return c, nil
}

// dispatch answers a server-initiated request in its own goroutine.
func (c *Conn) dispatch(req *Command) {
	go func() {
		var resp *Command
		switch {
		case c.onRequest != nil:
			resp = c.onRequest(req)
		case !req.IsOneway():
			resp = NewNotSupportedResponse(req)
		}
		if resp != nil {
			c.l.reply(req, resp, false)
		}
	}()
}

// Invoke sends req with a fresh opaque and waits for its response, ctx, or
// the end of the connection. On ctx expiry the waiter is removed, and a
// late response is dropped. It sets req.Opaque and clears FlagOneway and
// FlagResponse, so req must not be in use by another call. Errors wrap
// ctx.Err(), ErrConnClosed, or the encoding error.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	return c.l.invoke(ctx, req)
}

// InvokeAsync sends req with a fresh opaque and calls cb exactly once: with
// the response, with an error wrapping ErrTimeout if none came within
// timeout (timeout <= 0 waits without limit), or with an error wrapping
// ErrConnClosed when the connection is lost. cb runs on an internal
// goroutine (for responses, the connection's reader) and must not block
// long. If InvokeAsync itself returns an error, cb is not called. It
// modifies req as Invoke does.
func (c *Conn) InvokeAsync(req *Command, timeout time.Duration, cb func(*Command, error)) error {
	return c.l.invokeAsync(req, timeout, cb)
}

// Oneway sets FlagOneway and a fresh opaque on req and queues it without
// waiting for anything. A nil error means queued, not delivered.
func (c *Conn) Oneway(req *Command) error { return c.l.oneway(req) }

// Close closes the connection. Pending requests fail with ErrConnClosed.
// It does not wait for the connection's goroutines.
func (c *Conn) Close() error {
	c.l.closeWith(nil)
	return nil
}

// Abort closes the connection and discards what the kernel has not yet
// delivered (SO_LINGER 0: the peer gets a reset instead of the rest of the
// stream). Use it after a request timed out: a request still sitting in a
// send buffer behind a partition would otherwise reach the peer when the
// partition heals, long after the caller gave up on it and retried.
func (c *Conn) Abort() error {
	if lc, ok := c.l.nc.(interface{ SetLinger(int) error }); ok {
		_ = lc.SetLinger(0)
	}
	c.l.closeWith(nil)
	return nil
}

// Done returns a channel closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.l.closed }

// Err returns why the connection is gone (wrapping ErrConnClosed and the
// cause, if any), or nil while it is open.
func (c *Conn) Err() error { return c.l.closedErr() }

// Addr returns the address given to Dial.
func (c *Conn) Addr() string { return c.addr }

// LocalAddr returns the local address of the TCP connection.
func (c *Conn) LocalAddr() net.Addr { return c.l.nc.LocalAddr() }
