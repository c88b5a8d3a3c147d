package client

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// newTLSFakeGroup is a one-node fake group whose port enforces TLS with
// the demo certificates in dir.
func newTLSFakeGroup(t *testing.T, dir string) *fakeGroup {
	t.Helper()
	require.NoError(t, certs.Demo(dir, 1))
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	require.NoError(t, err)
	g := newFakeGroup(t, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	node := &fakeNode{g: g, id: 1, addr: ln.Addr().String()}
	node.srv = &remoting.Server{Handler: node.handle, TLSMode: remoting.TLSEnforcing,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = node.srv.Serve(ln) }()
	t.Cleanup(func() { _ = node.srv.Close() })
	g.nodes = append(g.nodes, node)
	return g
}

// A client with Options.TLS (the CA from a file) sends and reads back
// through a port that enforces TLS; one without it is refused.
func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	g := newTLSFakeGroup(t, dir)
	g.addTopic("T", 1)
	ctx := testCtx(t)

	cfg, err := LoadTLS(TLSFiles{CAFile: filepath.Join(dir, "ca.pem")})
	require.NoError(t, err)
	c, err := New(Options{Addrs: g.addrs(), RequestTimeout: time.Second, TLS: cfg})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.NewProducer(ProducerOptions{Group: "P"}).Send(ctx, &Message{Topic: "T", Body: []byte("over TLS")})
	require.NoError(t, err)
	require.EqualValues(t, 1, g.offsetMax("T", res.QueueID))

	plain, err := New(Options{Addrs: g.addrs(), RequestTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Route(ctx, "T", true)
	require.Error(t, err, "a plaintext client got an answer from an enforcing port")

	_, err = LoadTLS(TLSFiles{CAFile: filepath.Join(dir, "n1-key.pem")})
	require.Error(t, err, "a key is not a CA certificate")
	_, err = LoadTLS(TLSFiles{CertFile: filepath.Join(dir, "n1.pem")})
	require.Error(t, err, "a certificate without its key")
}

// offsetMax is how many records queue q of topic holds.
func (g *fakeGroup) offsetMax(topic string, q int32) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.mu.queues[fakeQ{topic, q}])
}
