package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// TLSMode is how a server port treats TLS, as RocketMQ's
// tls.server.mode: one port serves both, and the first byte a client
// sends tells them apart (0x16 opens a TLS handshake record; no plaintext
// frame can start with it, since its 4-byte length would exceed 16 MiB).
type TLSMode int

const (
	// TLSDisabled serves plaintext only; a TLS handshake is closed.
	TLSDisabled TLSMode = iota
	// TLSPermissive serves both plaintext and TLS.
	TLSPermissive
	// TLSEnforcing serves TLS only; a plaintext connection is closed.
	TLSEnforcing
)

// String returns the mode's name as ParseTLSMode accepts it.
func (m TLSMode) String() string {
	switch m {
	case TLSDisabled:
		return "disabled"
	case TLSPermissive:
		return "permissive"
	case TLSEnforcing:
		return "enforcing"
	}
	return fmt.Sprintf("TLSMode(%d)", int(m))
}

// ParseTLSMode parses "disabled", "permissive" or "enforcing".
func ParseTLSMode(s string) (TLSMode, error) {
	for _, m := range []TLSMode{TLSDisabled, TLSPermissive, TLSEnforcing} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("remoting: TLS mode %q: want disabled, permissive or enforcing", s)
}

// ErrTLSRefused is wrapped by the read error of a connection a TLS port
// closed: plaintext on an enforcing port, a TLS handshake on a disabled
// one, or a handshake that failed (bad certificate, timeout, garbage).
var ErrTLSRefused = errors.New("remoting: connection refused by the port's TLS mode")

// tlsHandshakeRecord is the first byte of a TLS ClientHello record.
const tlsHandshakeRecord = 0x16

// TLSListener wraps ln so that every connection it accepts is served
// according to mode: plaintext connections come out as they are, TLS ones
// are handshaken with cfg (which must hold a certificate unless mode is
// TLSDisabled), and refused ones fail their first read with an error
// wrapping ErrTLSRefused. The decision and the handshake happen on the
// connection's first Read, within its read deadline, so Accept never
// blocks on a slow client. A handshake must complete within
// handshakeTimeout of its first byte (<= 0: DefaultReadTimeout). refused,
// if set, is told of each refused connection (for a rate-limited log line).
func TLSListener(ln net.Listener, mode TLSMode, cfg *tls.Config, handshakeTimeout time.Duration, refused func(addr, reason string, err error)) net.Listener {
	return &tlsListener{Listener: ln, s: newTLSSniffer(mode, cfg, handshakeTimeout, refused)}
}

func newTLSSniffer(mode TLSMode, cfg *tls.Config, timeout time.Duration, refused func(addr, reason string, err error)) *tlsSniffer {
	if timeout <= 0 {
		timeout = DefaultReadTimeout // a handshake is never unbounded
	}
	return &tlsSniffer{mode: mode, cfg: cfg, timeout: timeout, refused: refused}
}

type tlsListener struct {
	net.Listener
	s *tlsSniffer
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.s.wrap(nc), nil
}

// tlsSniffer holds what the connections of one port share.
type tlsSniffer struct {
	mode    TLSMode
	cfg     *tls.Config
	timeout time.Duration
	refused func(addr, reason string, err error)
}

func (s *tlsSniffer) wrap(nc net.Conn) net.Conn {
	return &sniffConn{Conn: nc, s: s, ready: make(chan struct{})}
}

// sniffConn is an accepted connection whose first byte has not been seen
// yet. Its first Read peeks one byte and settles what the connection is:
// plaintext (the byte is handed back first), TLS (a tls.Server over the
// raw connection with the byte put back in front), or refused. Writes
// wait until then; the broker never writes first anyway.
type sniffConn struct {
	net.Conn // the raw connection: addresses, Close
	s        *tlsSniffer

	// Set by the first Read before ready is closed; read-only after.
	ready chan struct{}
	rw    net.Conn // the connection to read and write through
	err   error    // sticky refusal

	mu       sync.Mutex
	peeked   []byte    // the byte read while sniffing, for plaintext
	deadline time.Time // last read deadline asked for, to restore after a handshake
	closed   chan struct{}
	once     sync.Once
}

func (c *sniffConn) Read(p []byte) (int, error) {
	select {
	case <-c.ready:
	default:
		if err := c.sniff(); err != nil {
			return 0, err
		}
	}
	if c.err != nil {
		return 0, c.err
	}
	c.mu.Lock()
	if len(c.peeked) > 0 && len(p) > 0 {
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.rw.Read(p)
}

// sniff reads the first byte and settles the connection. An error it
// returns is the raw read's (a deadline the caller may retry, or the end
// of the connection); a refusal is stored in c.err instead.
func (c *sniffConn) sniff() error {
	var b [1]byte
	n, err := c.Conn.Read(b[:])
	if n == 0 {
		if err == nil {
			err = errors.New("remoting: empty read")
		}
		return err // the deadline reader retries or gives up as for any read
	}
	defer close(c.ready)
	addr := c.Conn.RemoteAddr().String()
	isTLS := b[0] == tlsHandshakeRecord
	switch {
	case isTLS && (c.s.mode == TLSDisabled || c.s.cfg == nil):
		c.refuse(addr, "TLS handshake on a plaintext port", fmt.Errorf("%w: a TLS handshake on a port with TLS disabled", ErrTLSRefused))
	case !isTLS && c.s.mode == TLSEnforcing:
		c.refuse(addr, "plaintext on a TLS port", fmt.Errorf("%w: plaintext on a port that enforces TLS (first byte %#02x)", ErrTLSRefused, b[0]))
	case !isTLS:
		c.peeked = []byte{b[0]}
		c.rw = c.Conn
	default:
		c.handshake(addr, b[0])
	}
	return nil
}

// handshake runs the server side of a TLS handshake whose first byte is
// b0, within the handshake timeout, then puts back the read deadline the
// connection's reader had set.
func (c *sniffConn) handshake(addr string, b0 byte) {
	tc := tls.Server(&prefixConn{Conn: c.Conn, first: []byte{b0}}, c.s.cfg)
	_ = c.Conn.SetDeadline(time.Now().Add(c.s.timeout))
	err := tc.Handshake()
	c.mu.Lock()
	rd := c.deadline
	c.mu.Unlock()
	_ = c.Conn.SetWriteDeadline(time.Time{})
	_ = c.Conn.SetReadDeadline(rd)
	if err != nil {
		// The handshake's error is kept as text, not wrapped: it may wrap
		// os.ErrDeadlineExceeded, which the connection's reader takes for
		// a deadline to retry, and a failed handshake is final.
		c.refuse(addr, "TLS handshake failed", fmt.Errorf("%w: TLS handshake: %s", ErrTLSRefused, err.Error()))
		return
	}
	c.rw = tc
}

func (c *sniffConn) refuse(addr, reason string, err error) {
	c.err = err
	if c.s.refused != nil {
		c.s.refused(addr, reason, err)
	}
}

func (c *sniffConn) Write(p []byte) (int, error) {
	select {
	case <-c.ready:
	case <-c.done():
		return 0, net.ErrClosed
	}
	if c.err != nil {
		return 0, c.err
	}
	return c.rw.Write(p)
}

func (c *sniffConn) done() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = make(chan struct{})
	}
	return c.closed
}

func (c *sniffConn) Close() error {
	ch := c.done()
	c.once.Do(func() { close(ch) })
	return c.Conn.Close()
}

// SetReadDeadline and SetDeadline remember the read deadline, which a
// handshake overrides while it runs. The raw connection's deadlines are
// the TLS connection's too.
func (c *sniffConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *sniffConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// SetLinger reaches the TCP connection under TLS (for an abortive close).
func (c *sniffConn) SetLinger(sec int) error {
	if lc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return lc.SetLinger(sec)
	}
	return nil
}

// prefixConn reads first before the rest of its connection.
type prefixConn struct {
	net.Conn
	first []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// TLSDialer returns a DialFunc that dials with dial (nil: a net.Dialer)
// and runs a TLS client handshake with cfg within ctx. Without
// cfg.ServerName the host of the address is the name the server's
// certificate must hold. The connection it returns can still be closed
// abortively (SetLinger reaches the TCP connection).
func TLSDialer(dial DialFunc, cfg *tls.Config) DialFunc {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg
		if c.ServerName == "" {
			c = cfg.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c.ServerName = host
			}
		}
		tc := tls.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("remoting: TLS handshake with %s: %w", addr, err)
		}
		return &tlsClientConn{Conn: tc, raw: nc}, nil
	}
}

// tlsClientConn is a client's TLS connection that can still reach its TCP
// connection for SetLinger.
type tlsClientConn struct {
	*tls.Conn
	raw net.Conn
}

func (c *tlsClientConn) SetLinger(sec int) error {
	if lc, ok := c.raw.(interface{ SetLinger(int) error }); ok {
		return lc.SetLinger(sec)
	}
	return nil
}

// sniffTLS wraps an accepted connection for the server's TLS mode; a
// server without a TLS config serves plaintext only, as it always did (a
// TLS handshake then fails as a frame too large).
func (s *Server) sniffTLS(nc net.Conn) net.Conn {
	if s.TLS == nil {
		return nc
	}
	s.tlsOnce.Do(func() {
		var rl tlsRefusalLog
		s.tlsSniff = newTLSSniffer(s.TLSMode, s.TLS, s.ReadTimeout, func(addr, reason string, err error) {
			rl.log(s.logger(), addr, reason, err)
		})
	})
	return s.tlsSniff.wrap(nc)
}

// tlsRefusalLog remembers which hosts had a connection refused for which
// reason, so that a server logs the first at Warn and the rest at Debug.
// The zero value is ready to use and safe for concurrent use.
type tlsRefusalLog struct {
	mu   sync.Mutex
	seen map[offenderKey]struct{}
}

// log logs a refused connection from addr, once per host and reason at
// Warn level.
func (r *tlsRefusalLog) log(log *slog.Logger, addr, reason string, err error) {
	host := addr
	if h, _, e := net.SplitHostPort(addr); e == nil {
		host = h
	}
	k := offenderKey{host, reason}
	r.mu.Lock()
	_, seen := r.seen[k]
	if !seen {
		if r.seen == nil {
			r.seen = map[offenderKey]struct{}{}
		}
		if len(r.seen) < maxOffenders {
			r.seen[k] = struct{}{}
		}
	}
	r.mu.Unlock()
	if seen {
		log.Debug("remoting: TLS: connection refused", "remote", addr, "reason", reason, "err", err)
		return
	}
	log.Warn("remoting: TLS: connection refused (logged once per host and reason)", "remote", addr, "reason", reason, "err", err)
}

// NewTLSRefusalLogger returns a function for TLSListener's refused that
// logs the first refusal per host and reason at Warn and the rest at
// Debug.
func NewTLSRefusalLogger(log *slog.Logger) func(addr, reason string, err error) {
	r := &tlsRefusalLog{}
	return func(addr, reason string, err error) { r.log(log, addr, reason, err) }
}
