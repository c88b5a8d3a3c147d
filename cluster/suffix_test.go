package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// A leader cut off from its group appends entries no quorum will hold.
// Its consume queues and key index are built only from applied entries,
// so they never show them; when the new leader's log replaces that
// suffix, every node's queues and index are the same and hold only what
// was committed, and none of the cut-off leader's sends was answered as a
// success.
func TestConflictingSuffixNeverReachesDerivedState(t *testing.T) {
	g := newGroup(t, 11)
	old := g.leader(5 * time.Second)
	createTopic(t, old, "T", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sendEach(t, ctx, old, 2, "committed", 10)
	g.waitConverged(10 * time.Second)
	oldID := old.Node().Status().ID
	var others []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != oldID {
			others = append(others, id)
		}
	}
	before := [2]int64{old.Store().MaxOffset("T", 0), old.Store().MaxOffset("T", 1)}

	g.net.partition([]uint64{oldID}, others)
	var answered, succeeded atomic.Int32
	const cut = 20
	for i := range cut {
		err := old.SendAsync([]*message.Message{testMsg("T", int32(i%2), fmt.Sprintf("uncommitted-%02d", i))},
			func(res []store.MessageResult, err error) {
				answered.Add(1)
				if err == nil && len(res) == 1 && res[0].Err == nil {
					succeeded.Add(1)
				}
			})
		require.NoError(t, err)
	}
	// The cut-off leader appends them to its log ...
	require.Eventually(t, func() bool {
		return old.Store().Log().LastIndex() > old.Node().Status().Commit
	}, 5*time.Second, 5*time.Millisecond)
	// ... and its queues and index do not move.
	for q := range int32(2) {
		require.Equal(t, before[q], old.Store().MaxOffset("T", q))
	}
	_, err := old.Store().QueryByUniqKey("T", "uncommitted-00")
	require.Error(t, err)

	var nl *Replica
	require.Eventually(t, func() bool {
		for _, id := range others {
			if r := g.rep(id); r.Node().LeaderReady() {
				nl = r
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	sendEach(t, ctx, nl, 2, "new-leader", 10)
	g.net.heal()
	g.waitConverged(15 * time.Second)
	g.checkAgreement()
	require.Eventually(t, func() bool { return answered.Load() == cut }, 10*time.Second, 10*time.Millisecond,
		"every send to the cut-off leader is answered")
	require.Zero(t, succeeded.Load(), "a send to the cut-off leader was acknowledged")

	ref := g.rep(others[0]).Store()
	for id := uint64(1); id <= 3; id++ {
		st := g.rep(id).Store()
		for q := range int32(2) {
			require.Equal(t, before[q]+5, st.MaxOffset("T", q), "node %d queue %d", id, q)
			got, err := st.GetMessages("T", q, 0, 100, 1<<20, nil)
			require.NoError(t, err)
			want, err := ref.GetMessages("T", q, 0, 100, 1<<20, nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want.Body, got.Body), "node %d queue %d differs from node %d", id, q, others[0])
			require.False(t, bytes.Contains(got.Body, []byte("uncommitted-")), "node %d queue %d holds a cut-off send", id, q)
		}
		for i := range cut {
			_, err := st.QueryByUniqKey("T", fmt.Sprintf("uncommitted-%02d", i))
			require.Error(t, err, "node %d indexes a cut-off send", id)
		}
		m, err := st.QueryByUniqKey("T", "new-leader-03")
		require.NoError(t, err, "node %d", id)
		require.Equal(t, "new-leader-03", string(m.Body))
	}
}

// A follower whose data directory is wiped and that restarts as a member
// of its group has lost entries the group committed on it, which raft
// cannot repair in place: the node stops with ErrLogLost and what to do,
// rather than crashing the process, and the rest of the group goes on.
func TestWipedFollowerStopsWithErrLogLost(t *testing.T) {
	g := newGroup(t, 5)
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sendEach(t, ctx, l, 1, "before", 20)
	g.waitConverged(10 * time.Second)
	var f uint64
	for id := uint64(1); id <= 3; id++ {
		if g.rep(id) != l {
			f = id
			break
		}
	}
	g.stop(f)
	require.NoError(t, os.RemoveAll(g.dirs[f]))
	require.NoError(t, os.MkdirAll(g.dirs[f], 0o755))
	g.start(f)
	r := g.rep(f)
	select {
	case <-r.Node().Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the wiped follower kept running")
	}
	require.ErrorIs(t, r.Node().Err(), raftlog.ErrLogLost)
	require.Contains(t, r.Node().Err().Error(), "admin node remove")
	_, err := l.Send(ctx, []*message.Message{testMsg("T", 0, "after")})
	require.NoError(t, err, "the other two go on")
}

// sendEach sends n messages to topic T through r, one at a time, message i
// to queue i%queues with body and unique key prefix-i (two digits), and
// requires each to be acknowledged.
func sendEach(t *testing.T, ctx context.Context, r *Replica, queues int32, prefix string, n int) {
	t.Helper()
	for i := range n {
		_, err := r.Send(ctx, []*message.Message{testMsg("T", int32(i)%queues, fmt.Sprintf("%s-%02d", prefix, i))})
		require.NoError(t, err)
	}
}
