package raftlog

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/internal/vfs"
)

// The tests in this file drive nodes step by step: a hand-driven clock
// (every tick and every timer firing is a call of the test), an in-memory
// network whose messages are delivered only when the test says so, and a
// barrier after each step that waits until the node's raft goroutine has
// handled it and every Ready it produced. Nothing waits on wall-clock time
// except the bounds that fail a hung test.

// stepTimeout bounds every single step; a step that takes longer means the
// node is stuck, and the test fails instead of hanging.
const stepTimeout = 10 * time.Second

// handClock is a Clock the test advances: tick sends one tick to the
// node's ticker, fire fires its held-append timer if armed. Both hand the
// value over synchronously, so when they return the raft goroutine has
// taken it.
type handClock struct {
	mu     sync.Mutex
	ticker *handTicker
	timers []*handTimer
}

type handTicker struct{ c chan time.Time }

func (h *handTicker) Chan() <-chan time.Time { return h.c }
func (h *handTicker) Reset(time.Duration)    {}
func (h *handTicker) Stop()                  {}

type handTimer struct {
	c     chan time.Time
	armed atomic.Bool
}

func (h *handTimer) Chan() <-chan time.Time   { return h.c }
func (h *handTimer) Reset(time.Duration) bool { return h.armed.Swap(true) }
func (h *handTimer) Stop() bool               { return h.armed.Swap(false) }
func (c *handClock) Now() time.Time           { return time.Unix(0, 0) }
func (c *handClock) NewTicker(time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticker = &handTicker{c: make(chan time.Time)}
	return c.ticker
}

func (c *handClock) NewTimer(time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &handTimer{c: make(chan time.Time)}
	t.armed.Store(true)
	c.timers = append(c.timers, t)
	return t
}

// memNet keeps what each node sent, in order, until the test delivers it.
type memNet struct {
	mu  sync.Mutex
	out map[uint64][]*pb.Message
	cut map[uint64]bool // isolated nodes: their messages, both ways, are dropped
}

type memTransport struct {
	net *memNet
	id  uint64
}

func (m memTransport) Send(msgs []*pb.Message) {
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	for _, msg := range msgs {
		m.net.out[m.id] = append(m.net.out[m.id], proto.Clone(msg).(*pb.Message))
	}
}

// recSM records what it applies: the data of every normal entry, by index.
type recSM struct {
	st      *Storage
	mu      sync.Mutex
	applied uint64
	data    map[uint64]string
	calls   []uint64
	// With gate set, Apply announces itself on started and waits for gate.
	gate    chan struct{}
	started chan uint64
}

func (s *recSM) Apply(index uint64) error {
	s.mu.Lock()
	s.calls = append(s.calls, index)
	gate, started := s.gate, s.started
	s.mu.Unlock()
	if gate != nil {
		started <- index
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := s.st.Entries(s.applied+1, index+1, 1<<30)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) > 0 {
			s.data[e.GetIndex()] = string(e.GetData())
		}
	}
	s.applied = index
	return nil
}

func (s *recSM) Restore(*pb.Snapshot) error { return errors.New("recSM: no snapshots") }

func (s *recSM) snapshot() (map[uint64]string, []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := make(map[uint64]string, len(s.data))
	for k, v := range s.data {
		d[k] = v
	}
	return d, slices.Clone(s.calls)
}

// stepGroup is a group of nodes driven by the test.
type stepGroup struct {
	t      *testing.T
	ids    []uint64
	nodes  map[uint64]*Node
	clocks map[uint64]*handClock
	sms    map[uint64]*recSM
	net    *memNet
}

func newStepGroup(t *testing.T, size int) *stepGroup {
	t.Helper()
	g := &stepGroup{t: t, nodes: map[uint64]*Node{}, clocks: map[uint64]*handClock{}, sms: map[uint64]*recSM{},
		net: &memNet{out: map[uint64][]*pb.Message{}, cut: map[uint64]bool{}}}
	var peers []raft.Peer
	for i := 1; i <= size; i++ {
		g.ids = append(g.ids, uint64(i))
		peers = append(peers, raft.Peer{ID: uint64(i)})
	}
	for _, id := range g.ids {
		st, _ := openStorage(t, vfs.NewMem())
		g.sms[id] = &recSM{st: st, data: map[uint64]string{}}
		g.clocks[id] = &handClock{}
		n, err := NewNode(Config{ID: id, Storage: st, SM: g.sms[id], Bootstrap: peers, Clock: g.clocks[id],
			Timing: Timing{ElectionTick: 10, HeartbeatTick: 2, CommitNotifyDelay: time.Millisecond}})
		require.NoError(t, err)
		g.nodes[id] = n
		n.Start(memTransport{net: g.net, id: id})
		t.Cleanup(n.Stop)
	}
	for _, id := range g.ids {
		g.settle(id)
	}
	return g
}

// settle returns once node id has taken every queued message and
// proposal and finished the loop iteration (and Readies) they caused.
func (g *stepGroup) settle(id uint64) {
	g.t.Helper()
	n := g.nodes[id]
	deadline := time.Now().Add(stepTimeout)
	for len(n.recvc) > 0 || len(n.propc) > 0 {
		if time.Now().After(deadline) {
			g.t.Fatalf("node %d: queued messages not taken within %v", id, stepTimeout)
		}
		runtime.Gosched()
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(g.t, n.control(ctx, func() {}), "node %d: barrier", id)
}

// onRaft runs f on node id's raft goroutine (to read its owned state).
func (g *stepGroup) onRaft(id uint64, f func(n *Node)) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	n := g.nodes[id]
	require.NoError(g.t, n.control(ctx, func() { f(n) }))
}

// outbox returns and forgets what the nodes sent, by sender in id order.
func (g *stepGroup) outbox() []*pb.Message {
	g.net.mu.Lock()
	defer g.net.mu.Unlock()
	var all []*pb.Message
	for _, id := range g.ids {
		all = append(all, g.net.out[id]...)
		g.net.out[id] = nil
	}
	return all
}

// deliver hands every sent message to its recipient (dropping those to or
// from an isolated node), node by node, until nothing more is sent.
func (g *stepGroup) deliver() {
	g.t.Helper()
	for range 1000 {
		msgs := g.outbox()
		if len(msgs) == 0 {
			return
		}
		byTo := map[uint64][]*pb.Message{}
		g.net.mu.Lock()
		for _, m := range msgs {
			if !g.net.cut[m.GetFrom()] && !g.net.cut[m.GetTo()] {
				byTo[m.GetTo()] = append(byTo[m.GetTo()], m)
			}
		}
		g.net.mu.Unlock()
		for _, id := range g.ids {
			if len(byTo[id]) == 0 {
				continue
			}
			for _, m := range byTo[id] {
				g.nodes[id].Step(m)
			}
			g.settle(id)
		}
	}
	g.t.Fatal("the group kept sending for 1000 rounds")
}

// tick advances node id's clock by k ticks, one step each.
func (g *stepGroup) tick(id uint64, k int) {
	g.t.Helper()
	g.clocks[id].mu.Lock()
	tk := g.clocks[id].ticker
	g.clocks[id].mu.Unlock()
	require.NotNil(g.t, tk, "node %d has not started its ticker", id)
	for range k {
		select {
		case tk.c <- time.Unix(0, 0):
		case <-time.After(stepTimeout):
			g.t.Fatalf("node %d did not take a tick within %v", id, stepTimeout)
		}
		g.settle(id)
	}
}

// fireHeld fires node id's held-append timer if it is armed and reports
// whether it did.
func (g *stepGroup) fireHeld(id uint64) bool {
	g.t.Helper()
	c := g.clocks[id]
	c.mu.Lock()
	var tm *handTimer
	if len(c.timers) > 0 {
		tm = c.timers[0]
	}
	c.mu.Unlock()
	if tm == nil || !tm.armed.Swap(false) {
		return false
	}
	select {
	case tm.c <- time.Unix(0, 0):
	case <-time.After(stepTimeout):
		g.t.Fatalf("node %d did not take its held-append timer within %v", id, stepTimeout)
	}
	g.settle(id)
	return true
}

// quiet delivers everything, firing held-append timers, until the group
// sends nothing more.
func (g *stepGroup) quiet() {
	g.t.Helper()
	for range 100 {
		g.deliver()
		fired := false
		for _, id := range g.ids {
			if g.fireHeld(id) {
				fired = true
			}
		}
		if !fired {
			return
		}
	}
	g.t.Fatal("held appends kept coming for 100 rounds")
}

// elect makes id campaign and lets the group settle with id as leader.
func (g *stepGroup) elect(id uint64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(g.t, g.nodes[id].Campaign(ctx))
	g.settle(id)
	g.quiet()
	require.True(g.t, g.nodes[id].IsLeader(), "node %d did not become leader", id)
}

// electAmong ticks the given nodes in turn, delivering after each round,
// until one of them leads (their election timeouts run out; etcd raft
// randomises them), and returns it.
func (g *stepGroup) electAmong(ids ...uint64) uint64 {
	g.t.Helper()
	for range 200 {
		for _, id := range ids {
			g.tick(id, 1)
		}
		g.quiet()
		for _, id := range ids {
			if g.nodes[id].IsLeader() {
				return id
			}
		}
	}
	g.t.Fatalf("none of %v became leader in 200 ticks", ids)
	return 0
}

// propose queues data on node id and waits until the node has stepped it.
func (g *stepGroup) propose(id uint64, data string, dropped func(error)) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(g.t, g.nodes[id].Propose(ctx, Proposal{Data: []byte(data), Dropped: dropped}))
	g.settle(id)
}

func (g *stepGroup) waitApplied(id, index uint64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(g.t, g.nodes[id].WaitApplied(ctx, index))
}

// held returns the commit index of the append node id holds per follower.
func (g *stepGroup) held(id uint64) map[uint64]uint64 {
	out := map[uint64]uint64{}
	g.onRaft(id, func(n *Node) {
		for to, c := range n.core.Held() {
			out[to] = c
		}
	})
	return out
}

// commitOnly returns the appends without entries in msgs, by recipient
// (the last one each).
func commitOnly(msgs []*pb.Message, from uint64) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, m := range msgs {
		if m.GetFrom() == from && m.GetType() == pb.MessageType_MsgApp && len(m.GetEntries()) == 0 {
			out[m.GetTo()] = m.GetCommit()
		}
	}
	return out
}

// Commit-only appends (Config.CommitNotifyDelay), step by step. Each case
// starts from a leader (1) that has committed an entry x and holds the
// appends telling followers 2 and 3 so.
func TestHeldCommitOnlyAppends(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, g *stepGroup, cx uint64)
	}{{
		name: "the timer sends them",
		run: func(t *testing.T, g *stepGroup, cx uint64) {
			require.True(t, g.fireHeld(1))
			msgs := g.outbox()
			require.Equal(t, map[uint64]uint64{2: cx, 3: cx}, commitOnly(msgs, 1))
			require.Empty(t, g.held(1))
			g.net.mu.Lock()
			g.net.out[1] = msgs // put them back for delivery
			g.net.mu.Unlock()
			g.deliver()
			require.Equal(t, cx, g.nodes[2].Status().Commit, "the follower learns the commit from the held append")
			require.Equal(t, cx, g.nodes[3].Status().Commit)
		},
	}, {
		name: "a later append carries the commit and drops them",
		run: func(t *testing.T, g *stepGroup, cx uint64) {
			g.propose(1, "y", nil)
			msgs := g.outbox()
			for _, m := range msgs {
				if m.GetFrom() == 1 && m.GetType() == pb.MessageType_MsgApp {
					require.NotEmpty(t, m.GetEntries(), "an append without entries went out to %d", m.GetTo())
					require.GreaterOrEqual(t, m.GetCommit(), cx)
				}
			}
			require.Empty(t, g.held(1), "the append with entries superseded the held ones")
			require.True(t, g.fireHeld(1))
			require.Empty(t, commitOnly(g.outbox(), 1), "the timer sent a superseded append")
		},
	}, {
		name: "a newer commit replaces the held one",
		run: func(t *testing.T, g *stepGroup, cx uint64) {
			var term uint64
			g.onRaft(1, func(n *Node) {
				term = n.core.rn.BasicStatus().GetTerm()
				m := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
					Term: proto.Uint64(term), Index: proto.Uint64(cx), LogTerm: proto.Uint64(term), Commit: proto.Uint64(cx + 1)}
				require.True(t, n.core.hold(m))
			})
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, g.held(1))
			// An older append (of an earlier commit) does not supersede it;
			// one of another term does not either.
			g.onRaft(1, func(n *Node) {
				n.core.supersede(&pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term), Commit: proto.Uint64(cx)})
				n.core.supersede(&pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(3), Term: proto.Uint64(term + 1), Commit: proto.Uint64(cx + 5)})
				n.core.supersede(&pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(3), Term: proto.Uint64(term), Commit: proto.Uint64(cx + 5)})
			})
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, g.held(1))
			require.True(t, g.fireHeld(1))
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, commitOnly(g.outbox(), 1), "one append per follower, the newest")
		},
	}, {
		name: "only appends without entries to replicating followers are held",
		run: func(t *testing.T, g *stepGroup, cx uint64) {
			g.onRaft(1, func(n *Node) {
				term := n.core.rn.BasicStatus().GetTerm()
				withEntries := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term),
					Commit: proto.Uint64(cx), Entries: []*pb.Entry{{Data: []byte("z")}}}
				require.False(t, n.core.hold(withEntries))
				hb := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term)}
				require.False(t, n.core.hold(hb))
				stranger := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(9), Term: proto.Uint64(term), Commit: proto.Uint64(cx)}
				require.False(t, n.core.hold(stranger), "a node not in the progress table is not replicating")
			})
		},
	}, {
		name: "leadership loss clears them",
		run: func(t *testing.T, g *stepGroup, cx uint64) {
			g.net.mu.Lock()
			g.net.cut[1] = true
			g.net.mu.Unlock()
			g.tick(1, 2*10) // CheckQuorum: an isolated leader steps down within two election timeouts
			require.False(t, g.nodes[1].IsLeader())
			require.Empty(t, g.held(1))
			g.outbox()
			require.True(t, g.fireHeld(1))
			require.Empty(t, commitOnly(g.outbox(), 1), "an ex-leader sent a held append")
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newStepGroup(t, 3)
			g.t = t
			g.elect(1)
			g.propose(1, "x", nil)
			msgs := g.outbox()
			var cx uint64
			for _, m := range msgs {
				if m.GetType() == pb.MessageType_MsgApp && len(m.GetEntries()) > 0 {
					cx = m.GetEntries()[len(m.GetEntries())-1].GetIndex()
				}
			}
			require.NotZero(t, cx, "the leader sent no append with x")
			g.net.mu.Lock()
			g.net.out[1] = msgs
			g.net.mu.Unlock()
			g.deliver() // appends out, answers back: the leader commits x
			require.Equal(t, cx, g.nodes[1].Status().Commit)
			require.Empty(t, commitOnly(g.outbox(), 1), "a commit-only append went out at once")
			require.Equal(t, map[uint64]uint64{2: cx, 3: cx}, g.held(1))
			require.Less(t, g.nodes[2].Status().Commit, cx, "the follower learnt the commit without an append")
			tc.run(t, g, cx)
		})
	}
}

// A leader that loses its leadership with proposals in flight never
// applies them as if committed: the entries it appended alone are replaced
// by the new leader's, and proposals made while no leader is known are
// refused through Dropped.
func TestLeaderChangeWithProposalsInFlight(t *testing.T) {
	g := newStepGroup(t, 3)
	g.elect(1)
	g.propose(1, "before", nil)
	g.quiet()
	commit := g.nodes[1].Status().Commit
	oldTerm := g.nodes[1].Status().Term

	// Node 1 is cut off with a proposal only it has.
	g.net.mu.Lock()
	g.net.cut[1] = true
	g.net.mu.Unlock()
	g.propose(1, "lost", nil)
	g.outbox()
	last1, err := g.nodes[1].cfg.Storage.LastIndex()
	require.NoError(t, err)
	require.Greater(t, last1, commit, "the old leader appended the proposal")
	lostIndex := last1

	// 2 and 3 elect one of them, which commits its own entries over that
	// index.
	nl := g.electAmong(2, 3)
	g.propose(nl, "won", nil)
	g.propose(nl, "won2", nil)
	g.quiet()
	newCommit := g.nodes[nl].Status().Commit
	require.GreaterOrEqual(t, newCommit, lostIndex)

	// The old leader, still alone, steps down (CheckQuorum) and, knowing
	// no leader, refuses a proposal.
	g.tick(1, 2*10)
	require.False(t, g.nodes[1].IsLeader())
	require.Equal(t, uint64(0), g.nodes[1].Status().Leader)
	var dropped error
	g.propose(1, "refused", func(err error) { dropped = err })
	require.ErrorIs(t, dropped, raft.ErrProposalDropped)

	// Reconnected, it learns of leader 2 and its log is overwritten.
	g.net.mu.Lock()
	g.net.cut[1] = false
	g.net.mu.Unlock()
	g.outbox()
	g.tick(nl, 2) // a heartbeat
	g.quiet()
	require.Equal(t, nl, g.nodes[1].Status().Leader)
	require.Greater(t, g.nodes[1].Status().Term, oldTerm)
	for _, id := range g.ids {
		g.waitApplied(id, newCommit)
	}
	ref, _ := g.sms[nl].snapshot()
	for _, id := range g.ids {
		data, _ := g.sms[id].snapshot()
		for idx, d := range data {
			require.NotEqual(t, "lost", d, "node %d applied the lost proposal at %d", id, idx)
			require.NotEqual(t, "refused", d, "node %d applied a refused proposal at %d", id, idx)
		}
		require.Equal(t, ref, data, "node %d applied other entries than the leader", id)
	}
	term, err := g.nodes[1].cfg.Storage.Term(lostIndex)
	require.NoError(t, err)
	require.Greater(t, term, oldTerm, "the old leader's entry at that index was replaced")
}

// The applier coalesces commit indexes queued while it applies: three
// commits behind a slow apply become one Apply call up to the last.
func TestApplyCoalescing(t *testing.T) {
	g := newStepGroup(t, 1)
	g.elect(1)
	g.propose(1, "a", nil)
	g.waitApplied(1, g.nodes[1].Status().Commit)
	sm := g.sms[1]
	sm.mu.Lock()
	sm.gate, sm.started = make(chan struct{}), make(chan uint64, 16)
	sm.calls = nil
	sm.mu.Unlock()

	g.propose(1, "b", nil)
	first := g.nodes[1].Status().Commit
	select {
	case idx := <-sm.started:
		require.Equal(t, first, idx)
	case <-time.After(stepTimeout):
		t.Fatal("the applier did not start applying b")
	}
	for _, d := range []string{"c", "d", "e"} {
		g.propose(1, d, nil) // each its own Ready, its own commit index
	}
	last := g.nodes[1].Status().Commit
	require.Equal(t, first+3, last)
	sm.mu.Lock()
	gate := sm.gate
	sm.gate = nil
	sm.mu.Unlock()
	close(gate)
	g.waitApplied(1, last)
	data, calls := sm.snapshot()
	require.Equal(t, []uint64{first, last}, calls, "the three queued commits were not coalesced into one apply")
	for i, d := range []string{"b", "c", "d", "e"} {
		require.Equal(t, d, data[first+uint64(i)])
	}
}

// PreVote: a follower cut off from the leader campaigns without raising
// its term, so when it comes back it does not depose the leader.
// CheckQuorum: a leader cut off from the others steps down after an
// election timeout of ticks without hearing from a quorum, not before.
func TestPreVoteAndCheckQuorum(t *testing.T) {
	t.Run("prevote", func(t *testing.T) {
		g := newStepGroup(t, 3)
		g.t = t
		g.elect(1)
		term := g.nodes[1].Status().Term
		g.net.mu.Lock()
		g.net.cut[3] = true
		g.net.mu.Unlock()
		g.tick(3, 5*10) // far past any randomised election timeout
		g.deliver()
		require.Equal(t, raft.StatePreCandidate.String(), g.nodes[3].Status().Role)
		require.Equal(t, term, g.nodes[3].Status().Term, "a pre-candidate raised its term")

		g.net.mu.Lock()
		g.net.cut[3] = false
		g.net.mu.Unlock()
		g.tick(3, 2*10) // pre-votes reach 1 and 2 now, which still follow 1
		g.deliver()
		g.tick(1, 2) // the leader's heartbeat brings 3 back
		g.quiet()
		for _, id := range g.ids {
			st := g.nodes[id].Status()
			require.Equal(t, term, st.Term, "node %d: term moved", id)
			require.Equal(t, uint64(1), st.Leader, "node %d: leader", id)
		}
		require.True(t, g.nodes[1].IsLeader())
	})
	t.Run("checkquorum", func(t *testing.T) {
		g := newStepGroup(t, 3)
		g.t = t
		g.elect(1)
		term := g.nodes[1].Status().Term
		g.net.mu.Lock()
		g.net.cut[1] = true
		g.net.mu.Unlock()
		steps := 0
		for g.nodes[1].IsLeader() {
			require.Less(t, steps, 2*10, "an isolated leader still leads after two election timeouts")
			g.tick(1, 1)
			steps++
		}
		require.GreaterOrEqual(t, steps, 10, "the leader stepped down before an election timeout")
		st := g.nodes[1].Status()
		require.Equal(t, raft.StateFollower.String(), st.Role)
		require.Equal(t, term, st.Term, "stepping down does not raise the term")
		require.False(t, g.nodes[1].LeaderReady())
		// The connected majority is untouched until its own timeout.
		require.Equal(t, uint64(1), g.nodes[2].Status().Leader)
	})
}
