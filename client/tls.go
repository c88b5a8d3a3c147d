package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the files of a client's TLS configuration.
type TLSFiles struct {
	// CAFile is a PEM file of the CA certificates that signed the nodes'
	// certificates; empty means the system's roots.
	CAFile string
	// CertFile and KeyFile, both or neither, are a client certificate and
	// its key, for nodes that ask for one (--tls-client-auth).
	CertFile, KeyFile string
	// ServerName, if set, is the name the nodes' certificates must hold;
	// empty means the host of the address dialled.
	ServerName string
}

// LoadTLS returns the tls.Config for Options.TLS from files.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		b, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("client: TLS CA %s: no PEM certificate in it", f.CAFile)
		}
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("client: a TLS certificate and its key go together")
	}
	return cfg, nil
}
