package transport

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const testCluster = 42

// logSink sends transport logs to t.Log and keeps them for assertions.
type logSink struct {
	tb  testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(b)
	s.mu.Unlock()
	s.tb.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func (s *logSink) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.buf.String(), sub)
}

// recorder is a Handler that keeps messages per sender, plus the
// Unreachable and SnapshotStatus callbacks.
type recorder struct {
	mu          sync.Mutex
	msgs        map[uint64][]*pb.Message
	unreachable map[uint64]int
	snaps       []snapReport
}

type snapReport struct {
	id      uint64
	failure bool
}

func newRecorder() *recorder {
	return &recorder{msgs: make(map[uint64][]*pb.Message), unreachable: make(map[uint64]int)}
}

func (r *recorder) handle(m *pb.Message) {
	r.mu.Lock()
	r.msgs[m.GetFrom()] = append(r.msgs[m.GetFrom()], m)
	r.mu.Unlock()
}

func (r *recorder) from(id uint64) []*pb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*pb.Message(nil), r.msgs[id]...)
}

func (r *recorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *recorder) snapReports() []snapReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapReport(nil), r.snaps...)
}

// node is a started Transport with its recorder and logs.
type node struct {
	id   uint64
	addr string
	tr   *Transport
	rec  *recorder
	logs *logSink
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	return l
}

// startNode starts a transport on l; cfg's ID, Listener, Peers and the
// callbacks are filled in (Handler only if nil), the rest is taken from
// cfg; ClusterID defaults to testCluster unless cfg.LearnClusterID is set.
// It is closed at cleanup.
func startNode(tb testing.TB, id uint64, l net.Listener, peers map[uint64]string, cfg Config) *node {
	tb.Helper()
	n := &node{id: id, addr: l.Addr().String(), rec: newRecorder(), logs: &logSink{tb: tb}}
	cfg.ID = id
	if cfg.ClusterID == 0 && cfg.LearnClusterID == nil {
		cfg.ClusterID = testCluster
	}
	cfg.Listener = l
	cfg.Peers = peers
	if cfg.Handler == nil {
		cfg.Handler = n.rec.handle
	}
	cfg.Unreachable = func(id uint64) {
		n.rec.mu.Lock()
		n.rec.unreachable[id]++
		n.rec.mu.Unlock()
	}
	cfg.SnapshotStatus = func(id uint64, failure bool) {
		n.rec.mu.Lock()
		n.rec.snaps = append(n.rec.snaps, snapReport{id, failure})
		n.rec.mu.Unlock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tr, err := New(cfg)
	require.NoError(tb, err)
	tr.Start()
	tb.Cleanup(func() { require.NoError(tb, tr.Close()) })
	n.tr = tr
	return n
}

// startCluster starts n fully meshed transports with IDs 1..n.
func startCluster(tb testing.TB, n int, cfg Config) []*node {
	tb.Helper()
	ls := make([]net.Listener, n)
	addrs := make(map[uint64]string, n)
	for i := range ls {
		ls[i] = listen(tb)
		addrs[uint64(i+1)] = ls[i].Addr().String()
	}
	nodes := make([]*node, n)
	for i := range nodes {
		id := uint64(i + 1)
		peers := make(map[uint64]string)
		for pid, a := range addrs {
			if pid != id {
				peers[pid] = a
			}
		}
		nodes[i] = startNode(tb, id, ls[i], peers, cfg)
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				waitConnected(tb, a.tr, b.id)
			}
		}
	}
	return nodes
}

func waitConnected(tb testing.TB, tr *Transport, id uint64) {
	tb.Helper()
	require.Eventually(tb, func() bool { return tr.Connected(id) }, 5*time.Second, time.Millisecond,
		"no stream to peer %d", id)
}

func appMsg(from, to, index uint64, ents []*pb.Entry) *pb.Message {
	return &pb.Message{
		Type:    pb.MessageType_MsgApp.Enum(),
		From:    proto.Uint64(from),
		To:      proto.Uint64(to),
		Index:   proto.Uint64(index),
		Entries: ents,
	}
}

// entryData is the payload a test entry must arrive with: distinct per
// sender and index, so aliasing of the read buffer would show.
func entryData(from, index uint64) []byte {
	prefix := fmt.Sprintf("from=%d index=%d ", from, index)
	return append([]byte(prefix), bytes.Repeat([]byte{byte(index)}, 200)...)
}

// hookConn runs hook on every Write: write 0 is the handshake. The hook may
// return modified bytes, an error, or block until closed is closed.
type hookConn struct {
	net.Conn
	conn   int // which dial of this transport produced it, from 0
	hook   func(conn, write int, b []byte, closed <-chan struct{}) ([]byte, error)
	mu     sync.Mutex
	writes int
	closed chan struct{}
	once   sync.Once
}

func (c *hookConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	w := c.writes
	c.writes++
	c.mu.Unlock()
	out, err := c.hook(c.conn, w, b, c.closed)
	if err != nil {
		return 0, err
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *hookConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// hookDial returns a Config.Dial that wraps each connection in a hookConn.
func hookDial(hook func(conn, write int, b []byte, closed <-chan struct{}) ([]byte, error)) func(context.Context, string, string) (net.Conn, error) {
	var mu sync.Mutex
	dials := 0
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		n := dials
		dials++
		mu.Unlock()
		return &hookConn{Conn: c, conn: n, hook: hook, closed: make(chan struct{})}, nil
	}
}

func (s *logSink) count(subs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, line := range strings.Split(s.buf.String(), "\n") {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(line, sub)
		}
		if all {
			n++
		}
	}
	return n
}
