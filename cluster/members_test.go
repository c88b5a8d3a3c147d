package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// An added node is a learner until it has caught up, then the leader
// promotes it to voter. While it is a learner the quorum is the original
// voters': with one of the three down and the learner not even started,
// the group still commits (a voter added at once would have made it 2 of
// 4, no quorum).
func TestAddNodeIsLearnerUntilCaughtUp(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	for i := range 20 {
		resp := invoke(t, c, sendCmd("T", 0, fmt.Sprint("m", i), fmt.Sprint("K", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}

	a := freeAddrs(t, 2)
	tb.peers[4] = Peer{Client: a[0], Raft: a[1]}
	tb.dirs[4] = t.TempDir()
	resp := invoke(t, c, remoting.NewRequest(remoting.AddNode, map[string]string{"id": "4", "client": a[0], "raft": a[1]}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Eventually(t, func() bool {
		st := l.Replica().Node().Status()
		return slices.Equal(st.Learners, []uint64{4}) && slices.Equal(st.Voters, []uint64{1, 2, 3})
	}, 5*time.Second, 10*time.Millisecond, "node 4 enters as a learner: %+v", l.Replica().Node().Status())
	ac, err := l.AdminCluster(context.Background())
	require.NoError(t, err)
	require.Equal(t, raftlog.RoleLearner, ac.Members[3].Role, "status shows node 4 as a learner")
	time.Sleep(time.Second) // several promotion rounds: a learner that is not running stays one
	require.Equal(t, []uint64{4}, l.Replica().Node().Status().Learners)

	// One original voter down, the learner not started: still a quorum.
	var down uint64
	for id := range tb.bs {
		if tb.bs[id] != l {
			down = id
			break
		}
	}
	require.NoError(t, tb.bs[down].Close())
	delete(tb.bs, down)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Invoke(ctx, sendCmd("T", 0, "with a voter down", "KD"))
	require.NoError(t, err, "the group commits without the learner")
	require.Equal(t, remoting.Success, r.Code, r.Remark)

	// Started, the learner catches up and is promoted.
	tb.start(4, true)
	require.Eventually(t, func() bool {
		st := l.Replica().Node().Status()
		return len(st.Learners) == 0 && slices.Equal(st.Voters, []uint64{1, 2, 3, 4})
	}, 10*time.Second, 10*time.Millisecond, "node 4 is promoted once caught up: %+v", l.Replica().Node().Status())
	// Promoted within a few entries of the leader's log: it applies the
	// rest as a voter.
	require.Eventually(t, func() bool { return tb.bs[4].Replica().Store().MaxOffset("T", 0) == 21 }, 10*time.Second, 10*time.Millisecond,
		"node 4 holds every message: %d of 21", tb.bs[4].Replica().Store().MaxOffset("T", 0))
	require.Eventually(t, func() bool { return tb.bs[4].Replica().Node().Status().Role == "StateFollower" }, 5*time.Second, 10*time.Millisecond)
	// 3 of the 4 voters are up: the group commits.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err = c.Invoke(ctx, sendCmd("T", 0, "after the promotion", "KP"))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, r.Code, r.Remark)
}

// A membership change answered OK has been applied: raft drops a change
// proposed while another is pending (without an error), so changes
// proposed at once must each either be in the configuration when their
// call returns nil, or fail. Before the wait, a dropped change answered
// OK and the membership nemesis wiped a node that was still a voter.
func TestMembershipChangeAnsweredOnlyWhenApplied(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	ids := []uint64{4, 5, 6, 7}
	addrs := freeAddrs(t, 2*len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs[i] = l.AddNode(ctx, id, Peer{Client: addrs[2*i], Raft: addrs[2*i+1]})
		}()
	}
	wg.Wait()
	st := l.Replica().Node().Status()
	added := 0
	for i, id := range ids {
		if errs[i] == nil {
			added++
			require.True(t, slices.Contains(st.Learners, id), "AddNode(%d) answered OK; learners are %v", id, st.Learners)
		} else {
			require.ErrorContains(t, errs[i], "not applied")
		}
	}
	require.Positive(t, added, "at least one of the changes is made: %v", errs)

	// Removals likewise.
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs[i] = l.RemoveNode(ctx, id)
		}()
	}
	wg.Wait()
	st = l.Replica().Node().Status()
	for i, id := range ids {
		if errs[i] == nil {
			require.False(t, slices.Contains(st.Learners, id), "RemoveNode(%d) answered OK; learners are %v", id, st.Learners)
		}
	}
}
