package cluster

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// TestNameServerRegistration: a group registered with a name server has
// its leader as broker id 0 and each follower as a failover name; after a
// leadership transfer the route names the new leader within a second.
func TestNameServerRegistration(t *testing.T) {
	ns := namesrv.New(namesrv.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ns.Serve(ctx, ln, time.Second) }()
	defer func() { cancel(); <-done }()

	tb := startBrokersWith(t, func(c *Config) {
		c.NameServers, c.FailoverRoutes, c.BrokerName = []string{ln.Addr().String()}, true, "g1"
	}, 1)
	l := tb.leader()
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "N", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)

	masterOf := func() string {
		rd, ok := ns.Route("N")
		if !ok {
			return ""
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == "g1" {
				return bd.BrokerAddrs[remoting.MasterID]
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return masterOf() == l.ClientAddr() }, 2*time.Second, 10*time.Millisecond)
	failover := func() (n int) {
		rd, _ := ns.Route("N")
		for _, qd := range rd.QueueDatas {
			if strings.HasPrefix(qd.BrokerName, "g1@") && qd.ReadQueueNums == 0 && qd.Perm == remoting.PermWrite {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return failover() == 2 }, 2*time.Second, 10*time.Millisecond, "each follower's write-only name")

	to := uint64(2)
	if l.cfg.ID == 2 {
		to = 3
	}
	start := time.Now()
	require.NoError(t, l.Replica().Node().TransferLeader(context.Background(), to))
	require.Eventually(t, func() bool { return masterOf() == tb.bs[to].ClientAddr() }, 5*time.Second, 10*time.Millisecond)
	took := time.Since(start)
	t.Logf("the route named the new leader %v after the transfer began", took)
	require.Less(t, took, 2*time.Second)
}

// TestTwoGroupsShareATopic: two groups registered with one name server
// serve one topic's queues between them.
func TestTwoGroupsShareATopic(t *testing.T) {
	ns := namesrv.New(namesrv.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ns.Serve(ctx, ln, time.Second) }()
	defer func() { cancel(); <-done }()
	for _, name := range []string{"ga", "gb"} {
		tb := startBrokersWith(t, func(c *Config) {
			c.NameServers, c.FailoverRoutes, c.BrokerName = []string{ln.Addr().String()}, true, name
		})
		ch := remoting.CreateTopicRequestHeader{Topic: "S", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
		require.Equal(t, remoting.Success, invoke(t, dial(t, tb.leader().ClientAddr()), remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	}
	require.Eventually(t, func() bool {
		rd, ok := ns.Route("S")
		readable := map[string]bool{}
		for _, qd := range rd.QueueDatas {
			if qd.ReadQueueNums > 0 {
				readable[qd.BrokerName] = true
			}
		}
		return ok && readable["ga"] && readable["gb"]
	}, 3*time.Second, 10*time.Millisecond, "the topic routed to both groups")
}
