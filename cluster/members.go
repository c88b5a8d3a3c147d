package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Membership changes. A node is added as a raft learner: it receives the
// log but does not vote and does not count towards a quorum, so adding a
// node that is slow, not yet started or far behind never costs the group
// its quorum. The leader promotes a learner to voter (promoteLearners, a
// leader-side timer proposing the change through raft) once its log is
// within LearnerCatchUp entries of the leader's. A node that is removed
// stops (Removed): when it applies the change that removes it, or, since
// the leader stops talking to a removed node and it may never learn that
// change committed, when it has had no leader for a while and a member that
// has one says its configuration does not list it (watchRemoval).

// LearnerCatchUp is how close to the leader's last index (in entries) a
// learner's log must be for the leader to promote it to voter.
const LearnerCatchUp = 64

// promoteEvery is how often the leader looks for learners to promote.
const promoteEvery = 250 * time.Millisecond

// AddNode adds node id, at p's addresses, as a learner (run on the
// leader); the leader promotes it to voter once it has caught up. It
// returns once the group has applied the change, or an error: a caller
// (the membership nemesis, an operator about to wipe a node) acts on the
// answer, so it never says done for a change raft dropped or could not
// commit.
//
// A format level the group recorded for id while it is not a member (an
// earlier member under that id, level.go) is first set back to 0: the
// node added may run another build, and announces its own level once it
// has caught up.
func (b *Broker) AddNode(ctx context.Context, id uint64, p Peer) error {
	st := b.rep.Node().Status()
	member := slices.Contains(st.Voters, id) || slices.Contains(st.Learners, id)
	if l, ok := b.rep.Store().FormatLevels()[id]; ok && l != store.FormatLevelBase && !member {
		if err := b.rep.Exec(ctx, &store.Command{Op: store.OpFormatLevel, Member: &store.MemberLevel{ID: id, Level: store.FormatLevelBase}}); err != nil {
			return fmt.Errorf("cluster: adding node %d: forget the format level of its id's earlier member: %w", id, err)
		}
	}
	pctx, _ := json.Marshal(p)
	if err := b.proposeConfChange(ctx, pb.ConfChangeType_ConfChangeAddLearnerNode, id, pctx); err != nil {
		return err
	}
	return b.awaitMembership(ctx, "adding", id, func(st raftlog.Status) bool {
		return slices.Contains(st.Learners, id) || slices.Contains(st.Voters, id)
	})
}

// RemoveNode removes a voter or learner (run on the leader) and returns
// once the group has applied the change, or an error (as AddNode).
func (b *Broker) RemoveNode(ctx context.Context, id uint64) error {
	if err := b.proposeConfChange(ctx, pb.ConfChangeType_ConfChangeRemoveNode, id, nil); err != nil {
		return err
	}
	return b.awaitMembership(ctx, "removing", id, func(st raftlog.Status) bool {
		return !slices.Contains(st.Learners, id) && !slices.Contains(st.Voters, id)
	})
}

// membershipPoll is how often awaitMembership looks at the configuration.
const membershipPoll = 5 * time.Millisecond

// awaitMembership waits until this node's applied configuration satisfies
// done. Raft accepts a proposed change without a word and then drops it
// when another change is pending (it appends an empty entry instead), and
// a leader without a quorum commits none: waiting for the applied
// configuration is the only way to know the change was made.
func (b *Broker) awaitMembership(ctx context.Context, what string, id uint64, done func(raftlog.Status) bool) error {
	t := time.NewTicker(membershipPoll)
	defer t.Stop()
	for {
		st := b.rep.Node().Status()
		if done(st) {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s node %d: not applied (voters %v, learners %v); raft drops a membership change proposed while another is pending, and a group without a quorum commits none; see `raftmq admin cluster status` and retry: %w",
				what, id, st.Voters, st.Learners, ctx.Err())
		case <-b.stopc:
			return fmt.Errorf("cluster: %s node %d: %w", what, id, ErrStopping)
		}
	}
}

func (b *Broker) proposeConfChange(ctx context.Context, t pb.ConfChangeType, id uint64, pctx []byte) error {
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: &id}}, Context: pctx}
	if err := b.rep.Node().ProposeConfChange(ctx, cc); err != nil {
		return fmt.Errorf("cluster: propose %s of node %d: %w", t, id, err)
	}
	return nil
}

// promoteLearners runs on every node and acts while it leads: a learner
// that is active and whose match index is within LearnerCatchUp of the
// leader's last index is promoted to voter, through raft. One change at a
// time (raft takes one pending membership change); a proposal raft drops
// is made again on a later round.
func (b *Broker) promoteLearners() {
	t := time.NewTicker(promoteEvery)
	defer t.Stop()
	proposed := map[uint64]time.Time{} // learner -> when its promotion was last proposed
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		n := b.rep.Node()
		if !n.LeaderReady() {
			continue
		}
		st := n.Status()
		for _, id := range st.Learners {
			match, ok := st.Progress[id]
			if !ok || match == 0 || match+LearnerCatchUp < st.LastIndex || !slices.Contains(st.Active, id) {
				continue
			}
			if at, ok := proposed[id]; ok && time.Since(at) < 2*time.Second {
				break // proposed a moment ago: let it apply
			}
			proposed[id] = time.Now()
			b.log.Info("cluster: learner caught up; promoting it to voter", "learner", id, "match", match, "last", st.LastIndex)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := b.proposeConfChange(ctx, pb.ConfChangeType_ConfChangeAddNode, id, nil); err != nil {
				b.log.Warn("cluster: promote learner", "learner", id, "err", err)
			}
			cancel()
			break
		}
	}
}

// Removed is closed once this node has learnt that it was removed from the
// group; the broker command then stops it.
func (b *Broker) Removed() <-chan struct{} { return b.removed }

// removedFromGroup says once that this node was removed and closes
// Removed.
func (b *Broker) removedFromGroup(why string) {
	b.removedOnce.Do(func() {
		b.log.Warn(fmt.Sprintf("node %d was removed from the group; stopping", b.cfg.ID), "how", why)
		close(b.removed)
	})
}

// removalCheckEvery is how often watchRemoval looks: twice the longest
// election timeout, at least a second.
func removalCheckEvery(t time.Duration, electionTicks int) time.Duration {
	return max(time.Second, 2*2*time.Duration(electionTicks)*t)
}

// watchRemoval notices that this node was removed. It suspects so when it
// applies its own removal, or when it has been without a leader for two
// checks in a row while its log holds a configuration (a node joining has
// none until the leader sends it one); it is sure once a member that knows
// a leader says the group's configuration does not list it. Asking the
// others also covers the node that never applies its removal (the leader
// stops talking to a removed node, so it may never learn that the change
// committed) and a node re-added under its id, which replays its old
// removal.
func (b *Broker) watchRemoval() {
	tm := b.cfg.Raft
	if tm.TickInterval <= 0 {
		tm.TickInterval = raftlog.DefaultTickInterval
	}
	if tm.ElectionTick <= 0 {
		tm.ElectionTick = raftlog.DefaultElectionTick
	}
	t := time.NewTicker(removalCheckEvery(tm.TickInterval, tm.ElectionTick))
	defer t.Stop()
	leaderless, applied := 0, false
	for {
		select {
		case <-t.C:
		case <-b.selfRemoved:
			applied = true
		case <-b.stopc:
			return
		}
		st := b.rep.Node().Status()
		if st.Leader == 0 && len(st.Voters) > 0 {
			leaderless++
		} else {
			leaderless = 0
		}
		if applied && (slices.Contains(st.Voters, b.cfg.ID) || slices.Contains(st.Learners, b.cfg.ID)) {
			applied = false // re-added since
		}
		if !applied && leaderless < 2 {
			continue
		}
		if id, ok := b.memberNotListingMe(st.Applied); ok {
			b.removedFromGroup(fmt.Sprintf("member %d, which has a leader, does not list it", id))
			return
		}
	}
}

// memberNotListingMe asks the other members for their status and returns
// one that knows a leader and whose configuration does not list this node,
// as of an applied index at least this node's (applied): a member still
// applying older entries (one catching up) may not list a node added
// since.
func (b *Broker) memberNotListingMe(applied uint64) (uint64, bool) {
	b.mu.Lock()
	peers := make(map[uint64]Peer, len(b.peers))
	for id, p := range b.peers {
		if id != b.cfg.ID {
			peers[id] = b.route(id, p)
		}
	}
	b.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		ctx, cancel := context.WithTimeout(context.Background(), memberAskTimeout)
		ns, err := b.askStatus(ctx, peers[id].Client)
		cancel()
		if err != nil {
			continue
		}
		s := ns.Status
		if s.Leader != 0 && s.Applied >= applied && len(s.Voters) > 0 && !slices.Contains(s.Voters, b.cfg.ID) && !slices.Contains(s.Learners, b.cfg.ID) {
			return id, true
		}
	}
	return 0, false
}
