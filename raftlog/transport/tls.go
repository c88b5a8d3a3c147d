package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"
)

// tlsRefusalInterval is how often a refused TLS peer is logged at Warn
// per remote host; the refusals in between go to Debug (a node without
// the group's CA redials every second).
const tlsRefusalInterval = time.Minute

// tlsConfigs returns the acceptor's and the dialer's configurations made
// from cfg (see Config.TLS): both sides present cfg's certificate and
// verify the other's against the group's CA.
func tlsConfigs(cfg *tls.Config) (server, client *tls.Config, err error) {
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetClientCertificate == nil {
		return nil, nil, fmt.Errorf("%w: TLS needs this node's certificate", ErrInvalidConfig)
	}
	if cfg.RootCAs == nil && cfg.ClientCAs == nil {
		return nil, nil, fmt.Errorf("%w: TLS needs the group's CA (RootCAs)", ErrInvalidConfig)
	}
	server = cfg.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	if server.ClientCAs == nil {
		server.ClientCAs = cfg.RootCAs
	}
	server.SessionTicketsDisabled = true // the acceptor never writes after the handshake
	client = cfg.Clone()
	if client.RootCAs == nil {
		client.RootCAs = cfg.ClientCAs
	}
	return server, client, nil
}

// tlsConn is a stream over TLS whose Close closes the TCP connection at
// once, without a close_notify alert that could block on a full window.
type tlsConn struct {
	*tls.Conn
	raw net.Conn
}

func (c *tlsConn) Close() error { return c.raw.Close() }

// clientTLS wraps a dialed connection in the dialer's side of TLS; the
// handshake runs in handshakeClient.
func (t *Transport) clientTLS(conn net.Conn, addr string) net.Conn {
	cfg := t.tlsClient
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	return &tlsConn{Conn: tls.Client(conn, cfg), raw: conn}
}

// handshakeClient runs the dialer's TLS handshake within ctx. In TLS 1.3
// the acceptor verifies our certificate after the dialer finished, so a
// refusal of ours shows as the stream closing right away.
func handshakeClient(ctx context.Context, conn net.Conn) error {
	tc, ok := conn.(*tlsConn)
	if !ok {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		tc.raw.SetDeadline(dl)
		defer tc.raw.SetDeadline(time.Time{})
	}
	return tc.Conn.Handshake()
}

// serverTLS runs the acceptor's TLS handshake on conn within
// handshakeTimeout; a peer without a certificate of the group's CA fails
// it.
func (t *Transport) serverTLS(conn net.Conn) (net.Conn, error) {
	tc := tls.Server(conn, t.tlsServer)
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("transport: TLS handshake: %w", err)
	}
	conn.SetWriteDeadline(time.Time{})
	return &tlsConn{Conn: tc, raw: conn}, nil
}

// refusals rate-limits the Warn lines about peers refused at the TLS
// handshake: one per remote host per tlsRefusalInterval.
type refusals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// warn reports whether a refusal of remote should be logged at Warn now.
func (r *refusals) warn(remote string) bool {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if t, ok := r.last[host]; ok && now.Sub(t) < tlsRefusalInterval {
		return false
	}
	if len(r.last) >= 1024 {
		clear(r.last)
	}
	r.last[host] = now
	return true
}
