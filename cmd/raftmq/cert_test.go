package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/protocol/remoting"
)

func runRoot(t *testing.T, args ...string) error {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	return root.ExecuteContext(context.Background())
}

// `raftmq cert ca` and `cert node` make a CA and a node certificate that
// verifies against it for each host given, as a server and as a client;
// keys are 0600; a second `cert ca` into the same directory refuses to
// overwrite the key.
func TestCertCommands(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, runRoot(t, "cert", "ca", "--out", dir))
	require.NoError(t, runRoot(t, "cert", "node", "--ca", dir, "--name", "n1", "--host", "127.0.0.1,node1.example", "--out", dir))
	for _, f := range []string{"ca-key.pem", "n1-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	pool, err := certs.CertPool(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	pair, err := certs.KeyPair(mustRead(t, dir, "n1.pem"), mustRead(t, dir, "n1-key.pem"))
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "node1.example"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.1"})
	require.Error(t, err, "a host not given")
	require.Error(t, runRoot(t, "cert", "ca", "--out", dir), "overwrote the CA key")

	demo := filepath.Join(dir, "demo")
	require.NoError(t, runRoot(t, "cert", "demo", "--out", demo, "--nodes", "3"))
	for _, f := range []string{"ca.pem", "ca-key.pem", "n1.pem", "n2-key.pem", "n3.pem"} {
		require.FileExists(t, filepath.Join(demo, f))
	}
}

func mustRead(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return b
}

// The broker's --tls-* flags: permissive by default with a certificate,
// disabled without one; the mode needs the files, and the files go
// together.
func TestBrokerTLSFlags(t *testing.T) {
	cfg, err := (&serverTLSFlags{clientAuth: "none"}).config()
	require.NoError(t, err)
	require.Nil(t, cfg)
	cfg, err = (&serverTLSFlags{cert: "c", key: "k", ca: "ca", clientAuth: "require"}).config()
	require.NoError(t, err)
	require.Equal(t, remoting.TLSPermissive, cfg.Mode)
	require.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
	cfg, err = (&serverTLSFlags{mode: "enforcing", cert: "c", key: "k", ca: "ca", clientAuth: "none"}).config()
	require.NoError(t, err)
	require.Equal(t, remoting.TLSEnforcing, cfg.Mode)
	for _, f := range []serverTLSFlags{
		{mode: "enforcing", clientAuth: "none"},
		{mode: "strict", cert: "c", key: "k", ca: "ca", clientAuth: "none"},
		{cert: "c", key: "k", clientAuth: "none"},
		{cert: "c", key: "k", ca: "ca", clientAuth: "always"},
	} {
		_, err := f.config()
		require.Error(t, err, "%+v", f)
	}
}

// `raftmq cluster --tls` starts three broker processes with TLS
// enforcing and mutual TLS between them; its demo sends and reads back
// through TLS; a client with the CA is served, a plaintext one is not.
func TestClusterTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	base := freeBasePort(t)
	cmd, out := startClusterCmd(t, dir, base, 200, "--tls")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "read 200 of them back") }, 30*time.Second, 50*time.Millisecond, out.String())

	addrs := []string{"127.0.0.1:" + strconv.Itoa(base), "127.0.0.1:" + strconv.Itoa(base+1)}
	cfg, err := client.LoadTLS(client.TLSFiles{CAFile: filepath.Join(dir, "tls", "ca.pem")})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(client.Options{Addrs: addrs, TLS: cfg})
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.NewProducer(client.ProducerOptions{Group: "P"}).Send(ctx, &client.Message{Topic: "demo", Body: []byte("x")})
	require.NoError(t, err)

	plain, err := client.New(client.Options{Addrs: addrs, RequestTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Route(ctx, "demo", true)
	require.Error(t, err)
	stopClusterCmd(t, cmd, out)
}

// `raftmq cluster --tls --groups 2` runs its name server with TLS
// enforcing too: the brokers register over TLS, a client with the CA
// lists both groups, a plaintext one is refused.
func TestClusterTLSNamesrv(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	// The name server's port and the second group's, 100 above the first:
	// raftmq cluster refuses to start if any is taken.
	base := freeBasePort(t, 90, 100, 101, 102, 110, 111, 112, 120, 121, 122)
	ns := "127.0.0.1:" + strconv.Itoa(base+90)
	cmd, out := startClusterCmd(t, dir, base, 0, "--tls", "--groups", "2", "--namesrv-port", strconv.Itoa(base+90))
	if !assert.Eventually(t, func() bool { return strings.Contains(out.String(), "group 2: leader elected") }, 30*time.Second, 50*time.Millisecond) {
		t.Fatalf("no leader in group 2 within 30 s; raftmq cluster printed:\n%s", out.String())
	}

	list := func(extra ...string) (string, error) {
		c := exec.Command(os.Args[0], append([]string{"admin", "cluster", "list", "--namesrv", ns}, extra...)...)
		c.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
		b, err := c.CombinedOutput()
		return string(b), err
	}
	var got string
	require.Eventually(t, func() bool {
		var err error
		got, err = list("--tls-ca", filepath.Join(dir, "tls", "ca.pem"))
		return err == nil && strings.Contains(got, "raftmq-g1") && strings.Contains(got, "raftmq-g2")
	}, 20*time.Second, 200*time.Millisecond, "over TLS: %s\n%s", got, out.String())
	plain, err := list()
	require.Error(t, err, plain)
	stopClusterCmd(t, cmd, out)
}
