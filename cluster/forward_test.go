package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// storedIn sums the messages in topic's queues 0..queues-1 on b.
func storedIn(b *Broker, topic string, queues int32) int64 {
	var n int64
	for q := range queues {
		n += b.Replica().Store().MaxOffset(topic, q)
	}
	return n
}

// forwardDropped returns b's raftmq_forward_dropped_total for reason, as
// its registry exports it; ok is false when it has no such series.
func forwardDropped(t *testing.T, b *Broker, reason string) (v float64, ok bool) {
	t.Helper()
	got, err := b.met.Reg.Gather()
	require.NoError(t, err)
	fams := map[string]*dto.MetricFamily{}
	for _, f := range got {
		fams[f.GetName()] = f
	}
	return sample(fams, "raftmq_forward_dropped_total", "reason", reason)
}

// writeAndClose writes every request to a fresh TCP connection to addr,
// one-way if oneway, then closes it at once without reading an answer, as a
// producer that sends and exits does.
func writeAndClose(t *testing.T, addr string, reqs []*remoting.Command, oneway bool) {
	t.Helper()
	var buf []byte
	for i, r := range reqs {
		r.Opaque = int32(i + 1)
		if oneway {
			r.Flag |= remoting.FlagOneway
		}
		var err error
		buf, err = remoting.AppendFrame(buf, r)
		require.NoError(t, err)
	}
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = nc.Write(buf)
	require.NoError(t, err)
	require.NoError(t, nc.Close())
}

// TestSendsThroughAFollowerSurviveTheClientsClose: sends a follower
// accepted are carried to the leader after the client closed its
// connection. The follower used to forward them with the connection's
// context, so most were dropped when the client closed: all of them while
// it had no connection to the leader yet (the dial was cancelled), most
// of them after.
func TestSendsThroughAFollowerSurviveTheClientsClose(t *testing.T) {
	tb := startBrokers(t)
	l, f := tb.leader(), tb.follower()
	const n = 300
	for _, tc := range []struct {
		name   string
		oneway bool
	}{
		{"oneway first forward", true}, // no forward connection yet
		{"oneway", true},
		{"sync", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := strings.ReplaceAll(tc.name, " ", "_")
			ch := remoting.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
			require.Equal(t, remoting.Success, invoke(t, dial(t, l.ClientAddr()), remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
			require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic(topic); return ok }, 5*time.Second, 5*time.Millisecond)
			reqs := make([]*remoting.Command, n)
			for i := range reqs {
				reqs[i] = sendCmd(topic, int32(i%4), "x", fmt.Sprintf("%s-%d", topic, i))
			}
			writeAndClose(t, f.ClientAddr(), reqs, tc.oneway)
			// Every accepted send reaches the leader within the forward timeout.
			deadline := time.Now().Add(10 * time.Second)
			for storedIn(l, topic, 4) < n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			require.Equal(t, int64(n), storedIn(l, topic, 4), "sends through a follower lost after the client closed")
		})
	}
	for _, reason := range []string{"no_leader", "timeout", "connection", "stopping"} {
		v, ok := forwardDropped(t, f, reason)
		require.True(t, ok, "raftmq_forward_dropped_total{reason=%q} exported", reason)
		require.Zero(t, v, "forwards dropped for %s", reason)
	}
}

// TestForwardDroppedCounted: a one-way send a follower cannot carry to a
// leader (none is left) is counted in raftmq_forward_dropped_total under
// no_leader once the leader wait is over.
func TestForwardDroppedCounted(t *testing.T) {
	tb := startBrokersWith(t, func(c *Config) { c.LeaderWait = 300 * time.Millisecond })
	l, f := tb.leader(), tb.follower()
	ch := remoting.CreateTopicRequestHeader{Topic: "FD", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, dial(t, l.ClientAddr()), remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic("FD"); return ok }, 5*time.Second, 5*time.Millisecond)
	for id, b := range tb.bs {
		if b != f {
			require.NoError(t, b.Close())
			delete(tb.bs, id)
		}
	}
	v, ok := forwardDropped(t, f, "no_leader")
	require.True(t, ok)
	require.Zero(t, v)
	// Until its election timeout the follower still takes the closed node
	// for the leader, and a send forwarded on its old connection to it
	// fails as "connection" (the outcome unknown to the follower): send
	// once it knows no leader.
	require.Eventually(t, func() bool { return f.Replica().Node().Status().Leader == 0 }, 10*time.Second, 10*time.Millisecond)
	writeAndClose(t, f.ClientAddr(), []*remoting.Command{sendCmd("FD", 0, "x", "FD-0"), sendCmd("FD", 1, "x", "FD-1")}, true)
	require.Eventually(t, func() bool { v, _ := forwardDropped(t, f, "no_leader"); return v == 2 }, 5*time.Second, 10*time.Millisecond)
	v, _ = forwardDropped(t, f, "timeout")
	require.Zero(t, v)
}

// TestAdminRequestBoundedWhileStalled: a leadership transfer asked of a
// leader whose raft goroutine waits for disk space is answered within the
// send timeout. Its handler runs with a context that outlives the
// client's connection, so without a bound of its own it waited for the
// stall to end (here: forever).
func TestAdminRequestBoundedWhileStalled(t *testing.T) {
	tb, toggles := startStallableBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	createTopicT(t, c)
	var other uint64
	for id, b := range tb.bs {
		if b != l {
			require.NoError(t, b.Close())
			delete(tb.bs, id)
			other = id
		}
	}
	// Alone, the leader stays leader: it hears of no other term, and
	// while stalled it does not tick.
	toggles[l.cfg.ID].Arm(vfs.OpWrite, vfs.OpCreate)
	require.NoError(t, c.Oneway(sendCmd("T", 0, "stall", "u-stall")))
	require.Eventually(t, l.Replica().Node().DiskStalled, 5*time.Second, 5*time.Millisecond)
	require.True(t, l.Replica().Node().IsLeader())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.TransferLeader, map[string]string{"id": strconv.FormatUint(other, 10)}, nil))
	require.NoError(t, err, "no answer while the leader is stalled")
	require.Equal(t, remoting.SystemError, resp.Code, resp.Remark)
	require.Less(t, time.Since(start), 3*time.Second)
	toggles[l.cfg.ID].Disarm()
}
