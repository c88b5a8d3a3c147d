package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/internal/certs"
)

// nodeTLS returns a node's TLS configuration: a certificate of ca for
// 127.0.0.1, trusting trust.
func nodeTLS(t *testing.T, ca, trust *certs.CA, name string) *tls.Config {
	t.Helper()
	cert, err := ca.Certificate(name, "127.0.0.1")
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: trust.Pool(), MinVersion: tls.VersionTLS13}
}

// Three nodes with certificates of the group's CA deliver every message,
// in order, over mutual TLS.
func TestTLSDelivery(t *testing.T) {
	ca, err := certs.NewCA("group CA")
	require.NoError(t, err)
	ls := []net.Listener{listen(t), listen(t), listen(t)}
	addrs := map[uint64]string{}
	for i, l := range ls {
		addrs[uint64(i+1)] = l.Addr().String()
	}
	var nodes []*node
	for i, l := range ls {
		id := uint64(i + 1)
		peers := map[uint64]string{}
		for pid, a := range addrs {
			if pid != id {
				peers[pid] = a
			}
		}
		nodes = append(nodes, startNode(t, id, l, peers, Config{TLS: nodeTLS(t, ca, ca, "n")}))
	}
	const n = 500
	for _, src := range nodes {
		for i := uint64(0); i < n; i++ {
			ents := []*pb.Entry{{Index: &i, Data: entryData(src.id, i)}}
			for _, dst := range nodes {
				if dst != src {
					waitConnected(t, src.tr, dst.id)
					src.tr.Send([]*pb.Message{appMsg(src.id, dst.id, i, ents)})
				}
			}
		}
	}
	for _, dst := range nodes {
		for _, src := range nodes {
			if src == dst {
				continue
			}
			require.Eventually(t, func() bool { return len(dst.rec.from(src.id)) == n }, 5*time.Second, 5*time.Millisecond, "%d -> %d", src.id, dst.id)
			for i, m := range dst.rec.from(src.id) {
				require.Equal(t, uint64(i), m.GetIndex())
				require.Equal(t, entryData(src.id, uint64(i)), m.GetEntries()[0].GetData())
			}
		}
	}
}

// A node whose certificate another CA signed cannot send raft messages to
// a member, even though it trusts the group's CA and knows the cluster
// ID; neither can a plaintext dialer with a valid handshake. The member
// logs the refusal once, not once per redial.
func TestTLSForeignPeerRefused(t *testing.T) {
	ca, err := certs.NewCA("group CA")
	require.NoError(t, err)
	rogueCA, err := certs.NewCA("rogue CA")
	require.NoError(t, err)
	b := startNode(t, 2, listen(t), nil, Config{TLS: nodeTLS(t, ca, ca, "n2")})

	rogue := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, Config{
		TLS: nodeTLS(t, rogueCA, ca, "n1"), MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	// Plaintext: the raft handshake and a frame, without TLS.
	conn, err := net.Dial("tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(handshake{cluster: testCluster, from: 3, to: 2}.marshal())
	require.NoError(t, err)
	frame, err := appendFrame(nil, appMsg(3, 2, 1, nil), DefaultMaxFrame, testCluster)
	require.NoError(t, err)
	conn.Write(frame) // may fail once refused
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "plaintext stream not closed: %v", err)

	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		rogue.tr.Send([]*pb.Message{appMsg(1, 2, 1, nil)})
		time.Sleep(5 * time.Millisecond)
	}
	require.Empty(t, b.rec.from(1), "the rogue node's messages were delivered")
	require.Empty(t, b.rec.from(3), "the plaintext messages were delivered")
	require.True(t, b.logs.contains("TLS handshake failed"))
	require.Equal(t, 1, b.logs.count("level=WARN", "TLS handshake failed"), "refusals logged at Warn")
	require.Greater(t, b.logs.count("TLS handshake failed"), 2, "the rogue node redialled")

	// A member of the group gets through to the same node.
	good := startNode(t, 3, listen(t), map[uint64]string{2: b.addr}, Config{TLS: nodeTLS(t, ca, ca, "n3")})
	waitConnected(t, good.tr, 2)
	good.tr.Send([]*pb.Message{appMsg(3, 2, 7, nil)})
	require.Eventually(t, func() bool { return len(b.rec.from(3)) == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A transport with TLS but no certificate or no CA is refused by New.
func TestTLSConfigValidated(t *testing.T) {
	ca, err := certs.NewCA("group CA")
	require.NoError(t, err)
	full := nodeTLS(t, ca, ca, "n1")
	noCA := full.Clone()
	noCA.RootCAs = nil
	for _, cfg := range []*tls.Config{{RootCAs: ca.Pool()}, noCA} {
		l := listen(t)
		_, err := New(Config{ID: 1, Listener: l, Handler: func(*pb.Message) {}, TLS: cfg})
		require.ErrorIs(t, err, ErrInvalidConfig)
		l.Close()
	}
}
