package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// TLSConfig is a node's TLS: its certificate, the group's CA, and how its
// ports use them.
//
//   - The client port serves TLS per Mode (RocketMQ's disabled,
//     permissive, enforcing: one port, the first byte decides), asking
//     clients for a certificate per ClientAuth.
//   - The HTTP port (/metrics, /status, /debug/pprof) follows the client
//     port's mode and client authentication.
//   - The raft port is mutual TLS whenever a certificate is configured:
//     peers must present a certificate of the CA (CAFile), whatever Mode.
//   - The node's own client connections (forwarding to the leader,
//     registering with name servers) use TLS, verified against the CA,
//     when Mode is enforcing, as RocketMQ's broker does.
type TLSConfig struct {
	Mode remoting.TLSMode
	// CertFile and KeyFile are this node's certificate and key (PEM).
	// The certificate serves as a server certificate on every port and
	// as the client certificate to peers; it must name the hosts of the
	// node's addresses.
	CertFile, KeyFile string
	// CAFile holds the group's CA certificates (PEM).
	CAFile string
	// ClientAuth is what the client port asks of clients:
	// tls.NoClientCert (RocketMQ's default), VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert (certificates of the CA).
	ClientAuth tls.ClientAuthType
}

// tlsSet are the tls.Configs a node derives from its TLSConfig.
type tlsSet struct {
	mode remoting.TLSMode
	// server is the client and HTTP ports' configuration.
	server *tls.Config
	// raft is the transport's (mutual TLS).
	raft *tls.Config
	// dial is the node's own client connections'; nil unless Mode is
	// enforcing.
	dial *tls.Config
}

// ParseClientAuth parses none, optional or require.
func ParseClientAuth(s string) (tls.ClientAuthType, error) {
	switch s {
	case "none", "":
		return tls.NoClientCert, nil
	case "optional":
		return tls.VerifyClientCertIfGiven, nil
	case "require":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("cluster: TLS client auth %q: want none, optional or require", s)
}

// load reads the files of c. A nil c means no TLS.
func (c *TLSConfig) load() (*tlsSet, error) {
	if c == nil {
		return nil, nil
	}
	if c.CertFile == "" || c.KeyFile == "" {
		if c.Mode != remoting.TLSDisabled {
			return nil, fmt.Errorf("cluster: TLS mode %s needs a certificate and its key", c.Mode)
		}
		if c.CertFile != "" || c.KeyFile != "" {
			return nil, errors.New("cluster: a TLS certificate and its key go together")
		}
		return nil, nil
	}
	if c.CAFile == "" {
		return nil, errors.New("cluster: a TLS certificate needs the group's CA too (mutual TLS between nodes)")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: TLS certificate: %w", err)
	}
	b, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cluster: TLS CA %s: no PEM certificate in it", c.CAFile)
	}
	s := &tlsSet{
		mode: c.Mode,
		server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: c.ClientAuth, ClientCAs: pool,
			MinVersion: tls.VersionTLS12},
		raft: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
			MinVersion: tls.VersionTLS13},
	}
	if c.Mode == remoting.TLSEnforcing {
		s.dial = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return s, nil
}

// ServerTLS returns the TLS configuration c gives a client port, for a
// server of the caller's (the name server): the certificate, and client
// certificates checked against the CA per ClientAuth. It is nil without
// TLS.
func (c *TLSConfig) ServerTLS() (*tls.Config, error) {
	s, err := c.load()
	if err != nil || s == nil {
		return nil, err
	}
	return s.server, nil
}

// raftTLS is the transport's TLS configuration, nil without TLS.
func (s *tlsSet) raftTLS() *tls.Config {
	if s == nil {
		return nil
	}
	return s.raft
}

// serveTLS sets the client port's TLS on srv.
func (s *tlsSet) serveTLS(srv *remoting.Server) {
	if s == nil {
		return
	}
	srv.TLS, srv.TLSMode = s.server, s.mode
}

// httpListener wraps the HTTP port's listener for the client port's mode
// (a disabled mode leaves it plaintext).
func (s *tlsSet) httpListener(ln net.Listener, refused func(addr, reason string, err error)) net.Listener {
	if s == nil || s.mode == remoting.TLSDisabled {
		return ln
	}
	return remoting.TLSListener(ln, s.mode, s.server, 0, refused)
}

// dialer returns dial, over TLS when the node's own client connections
// use it (Mode enforcing).
func (s *tlsSet) dialer(dial remoting.DialFunc) remoting.DialFunc {
	if s == nil || s.dial == nil {
		return dial
	}
	return remoting.TLSDialer(dial, s.dial)
}
