package cluster

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// QueryRoute leaves out a follower the leader no longer hears from (its
// failover broker), asked of the leader or of the other follower, names
// it again once it is back, and keeps the leader's queues as they were.
func TestGRPCRouteLeavesOutDeadFollower(t *testing.T) {
	tb := startGRPCBrokers(t, func(c *Config) { c.FailoverRoutes = true })
	l := tb.leader()
	var fs []*Broker
	for _, b := range tb.bs {
		if b != l {
			fs = append(fs, b)
		}
	}
	ctx := clientCtx(t, "host@7@0@test", nil)
	resp, err := grpcClient(t, l.GRPCAddr()).SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("RR", "RR0", "x", nil)}})
	require.NoError(t, err)
	require.Equal(t, rmqpb.Code_OK, resp.Status.Code, resp.Status.Message)
	// brokers returns the route's broker names and the leader broker's
	// queue ids, as the node at addr answers.
	brokers := func(addr string) (map[string]bool, []int32) {
		r, err := grpcClient(t, addr).QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "RR"}})
		require.NoError(t, err)
		require.Equal(t, rmqpb.Code_OK, r.Status.Code, r.Status.Message)
		names := map[string]bool{}
		var ids []int32
		for _, mq := range r.MessageQueues {
			names[mq.Broker.Name] = true
			if mq.Broker.Name == l.cfg.BrokerName {
				ids = append(ids, mq.Id)
			}
		}
		return names, ids
	}
	dead, live := fs[0], fs[1]
	deadName := FailoverBrokerName(l.cfg.BrokerName, dead.cfg.ID)
	liveName := FailoverBrokerName(l.cfg.BrokerName, live.cfg.ID)
	listed := func(want bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, addr := range []string{l.GRPCAddr(), live.GRPCAddr()} {
				names, ids := brokers(addr)
				require.Equal(t, []int32{0, 1, 2, 3}, ids, "the leader's queues")
				// The live follower too (the leader may miss it for an
				// election timeout on a loaded machine).
				if !names[liveName] || names[deadName] != want {
					return false
				}
			}
			return true
		}, 20*time.Second, 20*time.Millisecond, "node %d listed: want %v", dead.cfg.ID, want)
	}
	listed(true)
	require.NoError(t, dead.Close())
	delete(tb.bs, dead.cfg.ID)
	listed(false)
	tb.start(dead.cfg.ID)
	listed(true)
}

// A gRPC connection past MaxClientConns is closed at once, as on the
// remoting port, not left waiting; once a connection closes, a new one is
// served.
func TestGRPCConnectionLimit(t *testing.T) {
	tb := startGRPCBrokers(t, func(c *Config) { c.MaxClientConns = 2 })
	addr := tb.leader().GRPCAddr()
	ctx := clientCtx(t, "host@10@0@limit", nil)
	call := func(c rmqpb.MessagingServiceClient) error {
		_, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "L"}})
		return err
	}
	var ccs []*grpc.ClientConn
	for range 2 {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { cc.Close() })
		require.NoError(t, call(rmqpb.NewMessagingServiceClient(cc)))
		ccs = append(ccs, cc)
	}
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.ReadAll(nc)
	require.NoError(t, err, "the third connection is closed (EOF), not left waiting")

	ccs[0].Close()
	third := grpcClient(t, addr)
	require.Eventually(t, func() bool { return call(third) == nil }, 10*time.Second, 20*time.Millisecond)
}
