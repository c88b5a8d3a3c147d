package cluster

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// fullLeader starts three brokers on memory file systems, creates topic T
// and sends one message through the leader, then fills the leader's disk
// (capacity 256 KiB past its use, below the 1 MiB minimum reserve) and
// waits until the leader says it is full. It returns the group, the
// leader, a connection to it and its file system.
func fullLeader(t *testing.T) (*testBrokers, *Broker, *remoting.Conn, *vfs.MemFS) {
	var mu sync.Mutex
	fss := map[uint64]*vfs.MemFS{}
	tb := startBrokersWith(t, func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		if fss[c.ID] == nil {
			fss[c.ID] = vfs.NewMem()
		}
		c.FS = fss[c.ID]
	})
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	createTopicT(t, c)
	require.Equal(t, remoting.Success, invoke(t, c, sendCmd("T", 0, "before", "u-before")).Code)
	fs := fss[l.cfg.ID]
	u, _ := fs.DiskUsage("/")
	fs.SetCapacity(u.Used + 256<<10)
	require.Eventually(t, l.Replica().DiskFull, 2*time.Second, 10*time.Millisecond)
	return tb, l, c, fs
}

// A leader whose disk fills refuses sends with SERVICE_NOT_AVAILABLE and a
// disk-full remark, and hands leadership to a member with space, which
// takes the sends; the full node stays up, serves reads, and counts as
// not full again once space frees.
func TestDiskFullLeaderHandsOff(t *testing.T) {
	tb, l, c, fs := fullLeader(t)

	// Refused with a clear answer until the hand-off, then forwarded.
	start := time.Now()
	var newLeader *Broker
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if b != l && b.Replica().Node().LeaderReady() {
				newLeader = b
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "leadership stayed on the full node")
	t.Logf("hand-off after the disk filled: %v", time.Since(start))
	require.False(t, newLeader.Replica().DiskFull())

	nc := dial(t, newLeader.ClientAddr())
	require.Equal(t, remoting.Success, invoke(t, nc, sendCmd("T", 0, "after", "u-after")).Code)
	// The full node is alive and forwards a send to the new leader.
	require.Eventually(t, func() bool {
		return l.Replica().Node().Status().Leader == newLeader.cfg.ID
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, remoting.Success, invoke(t, c, sendCmd("T", 0, "via-full", "u-via")).Code)
	st := l.Status()
	require.True(t, st.DiskFull)

	// Space frees: the node is not full any more, by itself.
	fs.SetCapacity(0)
	require.Eventually(t, func() bool { return !l.Replica().DiskFull() }, 2*time.Second, 10*time.Millisecond)
}

// While its disk is full, the leader's own refusal is SERVICE_NOT_AVAILABLE
// with a remark saying why (the send goes right after the flag turns on,
// normally before the hand-off; if the hand-off won, it is forwarded).
func TestDiskFullRefusalRemark(t *testing.T) {
	_, l, c, _ := fullLeader(t)
	resp := invoke(t, c, sendCmd("T", 0, "refused", "u-refused"))
	if resp.Code == remoting.Success {
		// The hand-off already happened and the send was forwarded.
		require.False(t, l.Replica().Node().IsLeader())
		return
	}
	t.Logf("refused: %d %s", resp.Code, resp.Remark)
	require.Equal(t, remoting.ServiceNotAvailable, resp.Code, resp.Remark)
	require.Contains(t, resp.Remark, "disk")
}

func createTopicT(t *testing.T, c *remoting.Conn) {
	t.Helper()
	ch := remoting.CreateTopicRequestHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	resp := invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// A follower whose disk is full when it must install a snapshot waits for
// space instead of stopping, then installs it and catches up.
func TestSnapshotInstallWaitsForSpace(t *testing.T) {
	g := newGroup(t, 11)
	l, lag, at := g.compactPastFollower(t, "", false)

	var refused atomic.Int32
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	tg.Arm(vfs.OpCreate, vfs.OpWrite)
	g.fs = map[uint64]vfs.FS{lag: vfs.WithErrors(vfs.Default(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if !strings.Contains(path, pendingSnapName) {
			return nil
		}
		err := tg.MaybeError(op, path)
		if err != nil {
			refused.Add(1)
		}
		return err
	}))}
	g.start(lag)
	require.Eventually(t, func() bool { return refused.Load() >= 3 }, 10*time.Second, 10*time.Millisecond,
		"the snapshot install never tried to save the snapshot")
	select {
	case <-g.rep(lag).Node().Done():
		t.Fatalf("the follower stopped on a full disk: %v", g.rep(lag).Node().Err())
	default:
	}
	tg.Disarm()
	g.waitConverged(15 * time.Second)
	f := g.rep(lag)
	require.Greater(t, f.Store().Log().FirstIndex(), at, "the follower must have installed the snapshot")
	require.Equal(t, l.Store().MaxOffset("T", 0), f.Store().MaxOffset("T", 0))
	require.NoError(t, f.Node().Err())
}

// A leader whose raft log write finds the disk full waits (it cannot
// persist, so it neither acknowledges nor heartbeats); the others elect a
// new leader, and the stalled node learns of it while it waits, so that
// it forwards sends to the new leader instead of refusing them.
func TestStalledLeaderForwardsToTheNewOne(t *testing.T) {
	tb, toggles := startStallableBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	createTopicT(t, c)
	require.Equal(t, remoting.Success, invoke(t, c, sendCmd("T", 0, "before", "u-before")).Code)

	toggles[l.cfg.ID].Arm(vfs.OpWrite, vfs.OpCreate)
	// A send makes the leader append, and stall.
	resp := invoke(t, c, sendCmd("T", 0, "stall", "u-stall"))
	t.Logf("send that stalled the leader: code %d %s", resp.Code, resp.Remark)
	require.Eventually(t, l.Replica().Node().DiskStalled, 5*time.Second, 5*time.Millisecond)
	var nl *Broker
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if b != l && b.Replica().Node().LeaderReady() {
				nl = b
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no new leader while the old one waits for space")
	require.Eventually(t, func() bool {
		return !l.Replica().Node().IsLeader() && l.Replica().Node().Status().Leader == nl.cfg.ID
	}, 10*time.Second, 10*time.Millisecond, "the stalled node did not learn of the new leader")
	require.True(t, l.Replica().Node().DiskStalled())
	resp = invoke(t, c, sendCmd("T", 0, "via-stalled", "u-via"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	toggles[l.cfg.ID].Disarm()
	require.Eventually(t, func() bool { return !l.Replica().Node().DiskStalled() }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, remoting.Success, invoke(t, c, sendCmd("T", 0, "after", "u-after")).Code)
}

// startStallableBrokers starts a group (SendTimeout 1 s) whose nodes'
// commit-log writes fail with ErrNoSpace while the node's toggle is armed
// (a full disk that stalls raft's persistence on that node).
func startStallableBrokers(t *testing.T) (*testBrokers, map[uint64]*vfs.Toggle) {
	var mu sync.Mutex
	toggles := map[uint64]*vfs.Toggle{}
	tb := startBrokersWith(t, func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		tg := toggles[c.ID]
		if tg == nil {
			tg = &vfs.Toggle{Err: vfs.ErrNoSpace}
			toggles[c.ID] = tg
		}
		c.SendTimeout = time.Second
		c.FS = vfs.WithErrors(vfs.Default(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if strings.Contains(path, "/commitlog/") {
				return tg.MaybeError(op, path)
			}
			return nil
		}))
	})
	return tb, toggles
}
