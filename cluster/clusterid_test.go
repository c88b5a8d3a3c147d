package cluster

import (
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// TestDataDirOfAnotherGroupRefused copies a member's data directory of
// group A into group B's node 3 and starts it there: it refuses to start,
// naming both cluster IDs, and B's two other nodes keep taking writes.
func TestDataDirOfAnotherGroupRefused(t *testing.T) {
	ga, gb := startBrokers(t), startBrokers(t)
	require.NotEqual(t, ga.clusterID, gb.clusterID)
	for _, g := range []*testBrokers{ga, gb} {
		c := dial(t, g.leader().ClientAddr())
		ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
		require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
		resp := invoke(t, c, sendCmd("T", 0, "m", "K0"))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	// A's node 1 stops; its directory replaces B's node 3's.
	require.NoError(t, ga.bs[1].Close())
	delete(ga.bs, 1)
	require.NoError(t, gb.bs[3].Close())
	delete(gb.bs, 3)
	require.NoError(t, os.RemoveAll(gb.dirs[3]))
	require.NoError(t, os.CopyFS(gb.dirs[3], os.DirFS(ga.dirs[1])))

	cfg := Config{ID: 3, Dir: gb.dirs[3], Peers: gb.peers, ClusterID: gb.clusterID, SegmentSize: 4 << 20,
		Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}}
	b, err := Start(cfg)
	if err == nil {
		b.Close()
	}
	require.ErrorIs(t, err, ErrOtherCluster, "a node on another group's data directory must refuse to start")
	require.ErrorContains(t, err, FormatClusterID(ga.clusterID))
	require.ErrorContains(t, err, FormatClusterID(gb.clusterID))
	t.Log(err)

	// Nothing was written to the directory, and B goes on with two nodes.
	c := dial(t, gb.leader().ClientAddr())
	for i := range 10 {
		resp := invoke(t, c, sendCmd("T", 0, "after", "KB"+string(rune('a'+i))))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	for _, n := range gb.bs {
		require.Equal(t, FormatClusterID(gb.clusterID), n.Status().ClusterID)
		require.Len(t, n.Replica().Node().Status().Voters, 3)
	}
}

// TestForwardFromAnotherClusterRefused: a request forwarded by a node of
// another group (it took this node for its leader) is refused with both
// IDs named, and counted; one of the same group is served.
func TestForwardFromAnotherClusterRefused(t *testing.T) {
	g := startBrokers(t)
	l := g.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)

	other := NewClusterID()
	for _, inline := range []bool{true, false} {
		req := sendCmd("T", 0, "m", "K-foreign")
		if !inline { // a request the leader serves off the fast path
			req = remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)
		}
		req.ExtFields[extForwarded] = "2"
		req.ExtFields[extCluster] = FormatClusterID(other)
		resp := invoke(t, c, req)
		require.Equal(t, remoting.ServiceNotAvailable, resp.Code, resp.Remark)
		require.Contains(t, resp.Remark, FormatClusterID(other))
		require.Contains(t, resp.Remark, FormatClusterID(g.clusterID))
	}
	require.EqualValues(t, 2, l.forwardMismatches.Load())
	require.Zero(t, l.Replica().Store().MaxOffset("T", 0), "the refused send was stored")

	// Forwarded through a follower of the same group: served.
	f := g.follower()
	resp := invoke(t, dial(t, f.ClientAddr()), sendCmd("T", 0, "m", "K-same"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.EqualValues(t, 2, l.forwardMismatches.Load())

	fams, err := l.met.Reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	v, ok := sample(byName, "raftmq_cluster_id_refused_total", "source", "forward")
	require.True(t, ok)
	require.Equal(t, 2.0, v)
	v, _ = sample(byName, "raftmq_cluster_id_refused_total", "source", "raft")
	require.Zero(t, v)
}
