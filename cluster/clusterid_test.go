package cluster

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
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

// lockedBuffer is a log destination safe for the brokers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// toFirstStateVersion rewrites a node's raft state file in the format of
// the version before the cluster ID (raftlog/storage.go: magic "RMQR", no
// cluster ID field), as an older raftmq left it.
func toFirstStateVersion(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "raft", "raftstate")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := make([]byte, len(b))
	// The second slot is written with its record's length only, so the
	// file may end inside it: it holds the newest state whenever its
	// sequence number is the higher one.
	for off := 0; off+8 <= len(b); off += 4096 {
		slot := b[off:min(off+4096, len(b))]
		if binary.BigEndian.Uint32(slot) != 0x524D5153 {
			continue
		}
		n := int(binary.BigEndian.Uint32(slot[4:]))
		require.Equal(t, crc32.Checksum(slot[:40+n], crc32.MakeTable(crc32.Castagnoli)), binary.BigEndian.Uint32(slot[40+n:]))
		v1 := append(append([]byte{}, slot[:32]...), slot[40:40+n]...)
		binary.BigEndian.PutUint32(v1, 0x524D5152)
		v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, crc32.MakeTable(crc32.Castagnoli)))
		copy(out[off:], v1)
	}
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// TestUpgradeAdoptsClusterID: a group whose raft state predates the
// cluster ID (its transport used the ID derived from the names) restarts
// without --cluster-id: every node adopts that ID, logs it, records it,
// and the group works; a later start with another --cluster-id refuses.
func TestUpgradeAdoptsClusterID(t *testing.T) {
	logs := &lockedBuffer{}
	g := startBrokersWith(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.ClusterID = legacyClusterID("DefaultCluster/raftmq") // what the older transport used
	})
	c := dial(t, g.leader().ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for id, b := range g.bs {
		require.NoError(t, b.Close())
		delete(g.bs, id)
		toFirstStateVersion(t, g.dirs[id])
	}
	g.mod = func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.ClusterID = 0 // an operator who never heard of it
	}
	for id := range g.dirs {
		g.start(id)
	}
	want := FormatClusterID(legacyClusterID("DefaultCluster/raftmq"))
	for _, b := range g.bs {
		require.Equal(t, want, b.Status().ClusterID)
	}
	require.Equal(t, 3, strings.Count(logs.String(), "has no cluster ID (written by an older version): adopting one"), logs.String())
	c = dial(t, g.leader().ClientAddr())
	resp := invoke(t, c, sendCmd("T", 0, "m", "K"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	require.NoError(t, g.bs[3].Close())
	delete(g.bs, 3)
	cfg := Config{ID: 3, Dir: g.dirs[3], Peers: g.peers, ClusterID: NewClusterID(), SegmentSize: 4 << 20,
		Raft: raftlog.Timing{TickInterval: 10 * time.Millisecond}, Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}}
	b, err := Start(cfg)
	if err == nil {
		b.Close()
	}
	require.ErrorIs(t, err, ErrOtherCluster, "the adopted ID was recorded")
	require.ErrorContains(t, err, want)
}

// TestPeerFlagsDisagreeingAreLogged: a node restarted with a --peer list
// that says other things than the membership it recorded starts, keeps the
// recorded membership, and says so in a warning.
func TestPeerFlagsDisagreeingAreLogged(t *testing.T) {
	g := startBrokers(t)
	g.leader()
	require.NoError(t, g.bs[3].Close())
	delete(g.bs, 3)
	logs := &lockedBuffer{}
	peers := maps.Clone(g.peers)
	peers[1] = Peer{Client: "127.0.0.1:1", Raft: "127.0.0.1:2"} // moved, says the flag
	delete(peers, 2)                                            // forgotten
	peers[9] = Peer{Client: "127.0.0.1:3", Raft: "127.0.0.1:4"} // never a member
	g.mod = func(c *Config) {
		c.Peers = peers
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	g.start(3)
	out := logs.String()
	require.Contains(t, out, "--peer disagrees with the address book recorded in the data directory")
	require.Contains(t, out, "member=1 flag=127.0.0.1:1/127.0.0.1:2 recorded="+g.peers[1].Client+"/"+g.peers[1].Raft)
	require.Contains(t, out, "--peer disagrees with the raft membership recorded in the data directory")
	require.Contains(t, out, "members_not_in_flags=[2] flags_not_members=[9]")
	require.Eventually(t, func() bool { return g.bs[3].Replica().Node().Status().Leader != 0 }, 5*time.Second, 10*time.Millisecond,
		"the node follows the recorded members")
}

// TestBootstrapNeedsClusterID: members of a new group of several cannot
// agree on a random cluster ID by themselves, so they refuse to bootstrap
// without one, suggesting a fresh ID; a group of one picks its own.
func TestBootstrapNeedsClusterID(t *testing.T) {
	a := freeAddrs(t, 6)
	peers := map[uint64]Peer{1: {Client: a[0], Raft: a[1]}, 2: {Client: a[2], Raft: a[3]}, 3: {Client: a[4], Raft: a[5]}}
	cfg := Config{ID: 1, Dir: t.TempDir(), Peers: peers, SegmentSize: 4 << 20,
		Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}}
	b, err := Start(cfg)
	if err == nil {
		b.Close()
	}
	require.ErrorIs(t, err, ErrNoClusterID)
	require.Regexp(t, `start each of them with --cluster-id [0-9a-f]{16} `, err.Error())

	// Told one, the same directory bootstraps: the refusal wrote no state.
	cfg.ClusterID = NewClusterID()
	b, err = Start(cfg)
	require.NoError(t, err)
	require.Equal(t, FormatClusterID(cfg.ClusterID), b.Status().ClusterID)
	require.NoError(t, b.Close())

	one := Config{ID: 1, Dir: t.TempDir(), Peers: map[uint64]Peer{1: peers[1]}, SegmentSize: 4 << 20,
		Store: store.Config{CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096}}
	b, err = Start(one)
	require.NoError(t, err)
	id := b.Replica().ClusterID()
	require.NotZero(t, id)
	require.NoError(t, b.Close())
	b, err = Start(one)
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, id, b.Replica().ClusterID(), "kept across a restart")
}
