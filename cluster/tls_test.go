package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A group with TLS enforcing: raft runs over mutual TLS (a leader is
// elected), a TLS client sends through a follower (forwarded to the
// leader over TLS) and reads back, a plaintext client is refused,
// /status is served over TLS only, and a node with another CA's
// certificate is refused by the members.
func TestTLSGroup(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, certs.Demo(dir, 4))
	rogueDir := filepath.Join(dir, "rogue")
	rogueCA, err := certs.NewCA("rogue CA")
	require.NoError(t, err)
	require.NoError(t, rogueCA.WriteNode(rogueDir, "n4", []string{"127.0.0.1"}))
	logs := &syncBuffer{}
	https := freeAddrs(t, 3)
	tb := startBrokersWith(t, func(c *Config) {
		c.TLS = &TLSConfig{Mode: remoting.TLSEnforcing, CAFile: filepath.Join(dir, "ca.pem"),
			CertFile: filepath.Join(dir, fmt.Sprintf("n%d.pem", c.ID)), KeyFile: filepath.Join(dir, fmt.Sprintf("n%d-key.pem", c.ID))}
		c.HTTPAddr = https[c.ID-1]
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, 1)
	l := tb.leader()
	f := tb.follower()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	cfg, err := client.LoadTLS(client.TLSFiles{CAFile: filepath.Join(dir, "ca.pem")})
	require.NoError(t, err)
	cl, err := client.New(client.Options{Addrs: []string{f.ClientAddr()}, TLS: cfg, RequestTimeout: 3 * time.Second})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic(ctx, "T", 1))
	res, err := cl.NewProducer(client.ProducerOptions{Group: "P"}).Send(ctx, &client.Message{Topic: "T", Body: []byte("sealed")})
	require.NoError(t, err)
	pr, err := cl.NewPullConsumer("C").PullFrom(ctx, f.ClientAddr(), "T", res.QueueID, res.QueueOffset, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, pr.Messages, 1)
	require.Equal(t, "sealed", string(pr.Messages[0].Body))

	// A raw send to the follower is forwarded to the leader, which
	// enforces TLS too: the forwarding connection is TLS.
	fc, err := remoting.Dial(ctx, f.ClientAddr(), remoting.Options{Dial: remoting.TLSDialer(nil, cfg)})
	require.NoError(t, err)
	defer fc.Close()
	resp, err := fc.Invoke(ctx, sendCmd("T", 0, "forwarded", "0A0B0C0D0E0F00000000000000000001"))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// Plaintext to an enforcing client port: closed at the first byte.
	pc, err := remoting.Dial(ctx, l.ClientAddr(), remoting.Options{})
	require.NoError(t, err)
	defer pc.Close()
	_, err = pc.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
	require.ErrorIs(t, err, remoting.ErrConnClosed)

	// /status over TLS with the CA; plain HTTP gets nothing.
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cfg.RootCAs}}}
	resp2, err := hc.Get("https://" + https[l.cfg.ID-1] + "/status")
	require.NoError(t, err)
	resp2.Body.Close()
	require.Equal(t, http.StatusOK, resp2.StatusCode)
	_, err = hc.Get("http://" + https[l.cfg.ID-1] + "/status")
	require.Error(t, err)

	// A fourth node with another CA's certificate, bootstrapping a
	// configuration that includes the three: the members refuse its
	// streams, so it never learns of a leader.
	term := l.Replica().Node().Status().Term
	peers := map[uint64]Peer{}
	for id, p := range tb.peers {
		peers[id] = p
	}
	peers[4] = Peer{Client: freeAddrs(t, 1)[0], Raft: freeAddrs(t, 1)[0]}
	rogue, err := Start(Config{ID: 4, Dir: t.TempDir(), Peers: peers, ClusterID: NewClusterID(), Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, SegmentSize: 4 << 20,
		TLS: &TLSConfig{Mode: remoting.TLSEnforcing, CAFile: filepath.Join(dir, "ca.pem"),
			CertFile: filepath.Join(rogueDir, "n4.pem"), KeyFile: filepath.Join(rogueDir, "n4-key.pem")}})
	require.NoError(t, err)
	defer rogue.Close()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "TLS handshake failed") }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	require.Zero(t, rogue.Replica().Node().Status().Leader, "the rogue node found a leader")
	require.Equal(t, term, l.Replica().Node().Status().Term, "the rogue node moved the group's term")
	require.True(t, l.Replica().Node().LeaderReady())
}
