// Package testgroup starts a three-node raftmq group inside a test's own
// process, on free loopback ports, for tests of packages that talk to a
// real group through the client (the client's end-to-end tests, the
// benchmarks' tests). Test support only: no product code imports it.
package testgroup

import (
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Start starts three brokers (node 1 preferred as leader, 10 ms ticks,
// small files) that stop when t ends, and returns their client addresses.
func Start(t testing.TB) []string {
	t.Helper()
	addrs, _ := start(t, false)
	return addrs
}

// StartGRPC starts the group as Start does, each node also serving
// RocketMQ 5's gRPC service, and returns the client and gRPC addresses.
func StartGRPC(t testing.TB) (addrs, grpcAddrs []string) {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, withGRPC bool) (addrs, grpcAddrs []string) {
	var ls []net.Listener
	for range 9 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	peers := map[uint64]cluster.Peer{}
	for i := uint64(1); i <= 3; i++ {
		p := cluster.Peer{Client: ls[3*(i-1)].Addr().String(), Raft: ls[3*(i-1)+1].Addr().String()}
		if withGRPC {
			p.GRPC = ls[3*(i-1)+2].Addr().String()
			grpcAddrs = append(grpcAddrs, p.GRPC)
		}
		peers[i] = p
		addrs = append(addrs, p.Client)
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	id := cluster.NewClusterID()
	for i := uint64(1); i <= 3; i++ {
		b, err := cluster.Start(cluster.Config{ID: i, Dir: t.TempDir(), Peers: peers, ClusterID: id, SegmentSize: 4 << 20,
			Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, PreferredLeader: 1, GRPCAddr: peers[i].GRPC,
			Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
	}
	return addrs, grpcAddrs
}
