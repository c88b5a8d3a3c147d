package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/certs"
)

// tlsFixture is a CA, a server certificate for 127.0.0.1 and a client
// configuration trusting the CA.
type tlsFixture struct {
	ca     *certs.CA
	server *tls.Config
	client *tls.Config
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	ca, err := certs.NewCA("test CA")
	require.NoError(t, err)
	cert, err := ca.Certificate("n1", "127.0.0.1")
	require.NoError(t, err)
	return &tlsFixture{
		ca:     ca,
		server: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		client: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
	}
}

// try dials addr (with TLS when cfg is set) and sends one echo request
// with a body bigger than a TLS record; it returns the first error.
func try(addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var opts Options
	if cfg != nil {
		opts.Dial = TLSDialer(nil, cfg)
	}
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	body := bytes.Repeat([]byte("tls!"), 20<<10)
	resp, err := c.Invoke(ctx, NewRequest(SendMessage, map[string]string{"k": "v"}, body))
	if err != nil {
		return err
	}
	if !bytes.Equal(resp.Body, body) || resp.ExtFields["k"] != "v" {
		return errors.New("echo came back different")
	}
	return nil
}

// Each mode on one port, against a plaintext client and a TLS client:
// disabled serves plaintext only, permissive both, enforcing TLS only.
// A refused connection is logged at Warn once per host and reason.
func TestTLSModes(t *testing.T) {
	fx := newTLSFixture(t)
	for _, tc := range []struct {
		mode           TLSMode
		plainOK, tlsOK bool
		refusal        string
	}{
		{TLSDisabled, true, false, "TLS handshake on a plaintext port"},
		{TLSPermissive, true, true, ""},
		{TLSEnforcing, false, true, "plaintext on a TLS port"},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			ts := startServer(t, echo, func(s *Server) { s.TLS, s.TLSMode = fx.server, tc.mode })
			for i := 0; i < 2; i++ { // the second refusal is not logged at Warn
				err := try(ts.addr, nil)
				if tc.plainOK {
					require.NoError(t, err, "plaintext client")
				} else {
					require.Error(t, err, "plaintext client")
				}
				err = try(ts.addr, fx.client)
				if tc.tlsOK {
					require.NoError(t, err, "TLS client")
				} else {
					require.Error(t, err, "TLS client")
				}
			}
			if tc.refusal == "" {
				require.False(t, ts.logs.contains("connection refused"))
				return
			}
			require.Eventually(t, func() bool { return ts.logs.contains("level=DEBUG", tc.refusal) }, 5*time.Second, 10*time.Millisecond)
			require.Equal(t, 1, ts.logs.count("level=WARN", tc.refusal))
		})
	}
}

func (s *logSink) count(parts ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, line := range s.mu.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// A client that starts a TLS handshake and never finishes it is closed by
// the read timeout, long before the idle timeout; so is one that sends a
// hello and then nothing. Meanwhile a good TLS client is served.
func TestTLSHandshakeTimeout(t *testing.T) {
	fx := newTLSFixture(t)
	ts := startServer(t, echo, func(s *Server) {
		s.TLS, s.TLSMode = fx.server, TLSPermissive
		s.ReadTimeout, s.IdleTimeout = 300*time.Millisecond, time.Minute
	})
	for _, prefix := range [][]byte{{0x16}, {0x16, 0x03, 0x01, 0x00, 0x80, 0x01}} {
		nc, err := net.Dial("tcp", ts.addr)
		require.NoError(t, err)
		start := time.Now()
		_, err = nc.Write(prefix)
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadAll(nc)
		if err != nil {
			require.False(t, errors.Is(err, ErrTimeout) || isTimeout(err), "not closed: %v", err)
		}
		took := time.Since(start)
		require.Less(t, took, 5*time.Second, "closed after %v", took)
		require.GreaterOrEqual(t, took, 250*time.Millisecond)
		nc.Close()
	}
	require.NoError(t, try(ts.addr, fx.client))
	require.Eventually(t, func() bool { return ts.logs.contains("TLS handshake failed") }, 5*time.Second, 10*time.Millisecond)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// With client certificates required, a client with a certificate of the
// server's CA is served; one without a certificate, or with one from
// another CA, is refused at the handshake.
func TestTLSClientAuth(t *testing.T) {
	fx := newTLSFixture(t)
	srv := fx.server.Clone()
	srv.ClientAuth, srv.ClientCAs = tls.RequireAndVerifyClientCert, fx.ca.Pool()
	ts := startServer(t, echo, func(s *Server) { s.TLS, s.TLSMode = srv, TLSEnforcing })

	good, err := fx.ca.Certificate("client")
	require.NoError(t, err)
	other, err := certs.NewCA("another CA")
	require.NoError(t, err)
	bad, err := other.Certificate("client")
	require.NoError(t, err)

	withCert := func(c tls.Certificate) *tls.Config {
		cfg := fx.client.Clone()
		cfg.Certificates = []tls.Certificate{c}
		return cfg
	}
	require.NoError(t, try(ts.addr, withCert(good)))
	// In TLS 1.3 the client learns of the refusal on its first read, so
	// the refusal may come from Dial or from Invoke.
	require.Error(t, try(ts.addr, fx.client))
	require.Error(t, try(ts.addr, withCert(bad)))
	require.Eventually(t, func() bool { return ts.logs.contains("TLS handshake failed") }, 5*time.Second, 10*time.Millisecond)
}

// The idle timeout closes a TLS connection that finished its handshake
// and then sent nothing, as it does a plaintext one, and a TLS
// connection in use is served across several idle periods' worth of
// requests.
func TestTLSIdleTimeout(t *testing.T) {
	fx := newTLSFixture(t)
	ts := startServer(t, echo, func(s *Server) {
		s.TLS, s.TLSMode = fx.server, TLSEnforcing
		s.IdleTimeout = 300 * time.Millisecond
	})
	ctx := testCtx(t)
	busy := dial(t, ts.addr, Options{Dial: TLSDialer(nil, fx.client)})
	for range 8 {
		_, err := busy.Invoke(ctx, NewRequest(SendMessage, nil, []byte("x")))
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
	}
	idle := dial(t, ts.addr, Options{Dial: TLSDialer(nil, fx.client)})
	select {
	case <-idle.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("an idle TLS connection was not closed")
	}
	require.Eventually(t, func() bool { return ts.logs.contains("reason=idle") }, 5*time.Second, 10*time.Millisecond)
}
