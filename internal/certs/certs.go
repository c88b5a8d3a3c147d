// Package certs makes a local certificate authority and node certificates
// for a raftmq group (ECDSA P-256, crypto/x509), and loads them into
// tls.Configs: what `raftmq cert`, `raftmq cluster --tls` and the TLS tests
// use. Files are PEM: ca.pem and ca-key.pem for the CA, <name>.pem and
// <name>-key.pem for a node; every file is written 0600, in a directory
// made 0700.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity of what New and Issue make.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	NodeValidity = 2 * 365 * 24 * time.Hour
)

// CA is a certificate authority that can issue node certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the encoded certificate and key.
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"raftmq"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// Issue makes a certificate for a node named name (its common name) valid
// for hosts (IP addresses or DNS names), usable as a server and as a
// client certificate (nodes dial each other with it). It returns the
// certificate and key in PEM.
func (ca *CA) Issue(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: key of %s: %w", name, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"raftmq"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(NodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: certificate of %s: %w", name, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// LoadCA reads ca.pem and ca-key.pem from dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s: no PEM certificate", filepath.Join(dir, "ca.pem"))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: ca.pem: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("certs: %s: no PEM key", filepath.Join(dir, "ca-key.pem"))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: ca-key.pem: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("certs: ca-key.pem: a %T, not an ECDSA key", k)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// WriteCA writes ca.pem and ca-key.pem (0600) into dir, creating it. It
// refuses to overwrite an existing CA key.
func (ca *CA) WriteCA(dir string) error {
	return writePair(dir, "ca", ca.CertPEM, ca.KeyPEM)
}

// WriteNode issues a certificate for name and writes <name>.pem and
// <name>-key.pem (0600) into dir.
func (ca *CA) WriteNode(dir, name string, hosts []string) error {
	certPEM, keyPEM, err := ca.Issue(name, hosts)
	if err != nil {
		return err
	}
	return writePair(dir, name, certPEM, keyPEM)
}

// Demo writes a CA and certificates n1..n<nodes> for 127.0.0.1,
// localhost and ::1 into dir (the local demo's set), unless dir already
// holds a CA: then it issues only the node certificates missing.
func Demo(dir string, nodes int) error {
	ca, err := LoadCA(dir)
	if errors.Is(err, os.ErrNotExist) {
		if ca, err = NewCA("raftmq demo CA"); err == nil {
			err = ca.WriteCA(dir)
		}
	}
	if err != nil {
		return err
	}
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("n%d", i)
		if _, err := os.Stat(filepath.Join(dir, name+".pem")); err == nil {
			continue
		}
		if err := ca.WriteNode(dir, name, []string{"127.0.0.1", "localhost", "::1"}); err != nil {
			return err
		}
	}
	return nil
}

// CertPool reads a PEM file of CA certificates.
func CertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: CA file %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// KeyPair is tls.X509KeyPair with the error naming what failed.
func KeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: key pair: %w", err)
	}
	return c, nil
}

// Pool returns a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func writePair(dir, name string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	keyFile := filepath.Join(dir, name+"-key.pem")
	f, err := os.OpenFile(keyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := f.Write(keyPEM); err != nil {
		f.Close()
		return fmt.Errorf("certs: write %s: %w", keyFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: write %s: %w", keyFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), certPEM, 0o600); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return s, nil
}

// Certificate issues a certificate for name and hosts and returns it as a
// tls.Certificate (for tests and in-process use).
func (ca *CA) Certificate(name string, hosts ...string) (tls.Certificate, error) {
	certPEM, keyPEM, err := ca.Issue(name, hosts)
	if err != nil {
		return tls.Certificate{}, err
	}
	return KeyPair(certPEM, keyPEM)
}
