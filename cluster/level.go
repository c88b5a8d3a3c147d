package cluster

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Format levels (store/level.go): each node announces its build's level
// through raft, and a leader proposes an entry format that older builds
// cannot apply only once every member has announced a level that reads
// it.

// AnnounceLevel replicates this node's format level (store.FormatLevel)
// and returns once it applied here. Unlike Exec it runs on a follower
// too: raft forwards the proposal to the leader (an old leader takes it as
// well; its build refuses the command when it applies it, changing
// nothing).
func (r *Replica) AnnounceLevel(ctx context.Context) error {
	body, err := store.EncodeCommand(0, &store.Command{Op: store.OpFormatLevel,
		Member: &store.MemberLevel{ID: r.cfg.ID, Level: store.FormatLevel}})
	if err != nil {
		return err
	}
	_, err = r.submit(ctx, &raftlog.Request{Kind: store.KindCommand, Data: body, Headroom: true}, 0)
	return err
}

// members returns the voters and learners of st.
func members(st raftlog.Status) []uint64 {
	return append(slices.Clip(st.Voters), st.Learners...)
}

// groupLevel is the lowest level in levels among st's voters and
// learners (store.GroupLevel), without gathering them in a slice: a pop
// entry asks.
func groupLevel(levels map[uint64]uint32, st *raftlog.Status) uint32 {
	l := store.GroupLevel(levels, st.Voters)
	if len(st.Learners) > 0 {
		l = min(l, store.GroupLevel(levels, st.Learners))
	}
	return l
}

// groupFormatLevel is the group's format level as this node has applied
// it: the lowest announced among the current voters and learners.
func (r *Replica) groupFormatLevel() uint32 {
	st := r.node.Status()
	return groupLevel(r.st.FormatLevels(), &st)
}

func (b *Broker) groupFormatLevel() uint32 { return b.rep.groupFormatLevel() }

// FormatLevelStatus is what a node knows of format levels (NodeStatus).
type FormatLevelStatus struct {
	// Build is this node's build's level; Group the group's, as applied
	// here (the lowest among the current members').
	Build uint32 `json:"build"`
	Group uint32 `json:"group"`
	// Members holds each current member's announced level (absent: never
	// announced, counted as 0).
	Members map[string]uint32 `json:"members"`
}

func (b *Broker) formatLevelStatus(st raftlog.Status) FormatLevelStatus {
	levels := b.rep.Store().FormatLevels()
	ms := members(st)
	out := FormatLevelStatus{Build: store.FormatLevel, Group: groupLevel(levels, &st), Members: map[string]uint32{}}
	for _, id := range ms {
		if l, ok := levels[id]; ok {
			out.Members[strconv.FormatUint(id, 10)] = l
		}
	}
	return out
}

// announceEvery is how often announceLevels looks: an election timeout.
func announceEvery(t raftlog.Timing) time.Duration {
	if t.TickInterval <= 0 {
		t.TickInterval = raftlog.DefaultTickInterval
	}
	if t.ElectionTick <= 0 {
		t.ElectionTick = raftlog.DefaultElectionTick
	}
	return time.Duration(t.ElectionTick) * t.TickInterval
}

// announceLevels announces this node's format level whenever the level
// the group recorded for it is not its build's: after its first start,
// after an upgrade (or a downgrade to a build that announces), after the
// node is added to a group. It waits until the node applied what the
// leader committed, so that it sees an announcement of its own already in
// the log, and logs each change of the group's level it sees.
func (b *Broker) announceLevels() {
	t := time.NewTicker(announceEvery(b.cfg.Raft))
	defer t.Stop()
	group, logged := uint32(0), false
	failures := 0
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		st := b.rep.Node().Status()
		if st.Leader == 0 || st.Applied < st.Commit {
			continue
		}
		if !slices.Contains(st.Voters, b.cfg.ID) && !slices.Contains(st.Learners, b.cfg.ID) {
			continue // not a member (yet)
		}
		levels := b.rep.Store().FormatLevels()
		if g := groupLevel(levels, &st); !logged || g != group {
			b.log.Info("cluster: the group's format level", "level", g, "build", store.FormatLevel, "announced", levels)
			group, logged = g, true
		}
		if l, ok := levels[b.cfg.ID]; ok && l == store.FormatLevel {
			failures = 0
			continue
		}
		ctx, cancel := context.WithTimeout(b.life, b.cfg.SendTimeout)
		err := b.rep.AnnounceLevel(ctx)
		cancel()
		if err != nil {
			// Until a leader takes it (an election, a partition): the next
			// tick tries again. Logged once, then every 30th failure.
			if failures%30 == 0 {
				b.log.Warn("cluster: announcing this node's format level failed; retrying", "level", store.FormatLevel, "failures", failures+1, "err", err)
			}
			failures++
			continue
		}
		failures = 0
		b.log.Info("cluster: announced this node's format level", "level", store.FormatLevel, "was", levels[b.cfg.ID])
	}
}
