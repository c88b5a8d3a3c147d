package raftlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/internal/vfs"
)

// The first tests in this file drive Nodes (the owner goroutine and the
// applier) step by step: a hand-driven clock (every tick and every timer
// firing is a call of the test), an in-memory network whose messages are
// delivered only when the test says so, and a barrier after each step that
// waits until the node's raft goroutine has handled it and every Ready it
// produced. Nothing waits on wall-clock time except the bounds that fail a
// hung test. The subtle paths of replication itself are tested further
// down on Cores, with no goroutine and no barrier.

// stepTimeout bounds every single step; a step that takes longer means the
// node is stuck, and the test fails instead of hanging.
const stepTimeout = 10 * time.Second

// handClock is a Clock the test advances: tick sends one tick to the
// node's ticker, fire fires its held-append timer if armed. Both hand the
// value over synchronously, so when they return the raft goroutine has
// taken it.
type handClock struct {
	now    atomic.Int64 // nanoseconds since the Unix epoch
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
func (c *handClock) Now() time.Time           { return time.Unix(0, c.now.Load()) }
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
	ids     map[uint64]uint64 // batch id by index
	calls   []uint64
	// With gate set, Apply announces itself on started and waits for gate.
	gate    chan struct{}
	started chan uint64
}

func (s *recSM) Apply(index uint64, batches []*Batch) error {
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
		if e.GetType() == pb.EntryType_EntryNormal && len(e.GetData()) >= plainHeaderSize {
			s.data[e.GetIndex()] = string(e.GetData()[plainHeaderSize:])
			s.ids[e.GetIndex()] = binary.BigEndian.Uint64(e.GetData()[1:plainHeaderSize])
		}
	}
	s.applied = index
	for _, b := range batches {
		if id, ok := s.ids[b.Index]; ok && id == b.ID {
			for _, q := range b.Requests {
				q.Waiter.(*testWaiter).answer(nil, b.Index)
			}
		} else {
			b.Fail(ErrLost)
		}
	}
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
		g.sms[id] = &recSM{st: st, data: map[uint64]string{}, ids: map[uint64]uint64{}}
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
	quiet(g.t, g.ids, g.deliver, g.fireHeld)
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

// testWaiter records a request's outcome: the first of an answer from
// recSM or a failure from the node.
type testWaiter struct {
	done  chan struct{}
	once  sync.Once
	err   error
	index uint64
}

func newTestWaiter() *testWaiter { return &testWaiter{done: make(chan struct{})} }

func (w *testWaiter) Fail(err error) { w.answer(err, 0) }

func (w *testWaiter) answer(err error, index uint64) {
	w.once.Do(func() { w.err, w.index = err, index; close(w.done) })
}

// outcome returns the request's outcome, and false if it has none yet.
func (w *testWaiter) outcome() (uint64, error, bool) {
	select {
	case <-w.done:
		return w.index, w.err, true
	default:
		return 0, nil, false
	}
}

// propose queues data on node id and waits until the node has stepped it.
func (g *stepGroup) propose(id uint64, data string) *testWaiter {
	g.t.Helper()
	return g.submit(id, &Request{Data: []byte(data)})
}

// submit queues q on node id, with a new testWaiter, and waits until the
// node has stepped it.
func (g *stepGroup) submit(id uint64, q *Request) *testWaiter {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	w := newTestWaiter()
	q.Waiter = w
	require.NoError(g.t, g.nodes[id].Submit(ctx, q))
	g.settle(id)
	return w
}

// tick advances node id's clock by d and ticks it once.
func (g *stepGroup) tick(id uint64, d time.Duration) {
	g.t.Helper()
	c := g.clocks[id]
	now := c.now.Add(int64(d))
	c.mu.Lock()
	tk := c.ticker
	c.mu.Unlock()
	select {
	case tk.c <- time.Unix(0, now):
	case <-time.After(stepTimeout):
		g.t.Fatalf("node %d did not take its tick within %v", id, stepTimeout)
	}
	g.settle(id)
}

func (g *stepGroup) waitApplied(id, index uint64) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	require.NoError(g.t, g.nodes[id].WaitApplied(ctx, index))
}

// The applier coalesces commit indexes queued while it applies: three
// commits behind a slow apply become one Apply call up to the last.
func TestApplyCoalescing(t *testing.T) {
	g := newStepGroup(t, 1)
	g.elect(1)
	g.propose(1, "a")
	g.waitApplied(1, g.nodes[1].Status().Commit)
	sm := g.sms[1]
	sm.mu.Lock()
	sm.gate, sm.started = make(chan struct{}), make(chan uint64, 16)
	sm.calls = nil
	sm.mu.Unlock()

	g.propose(1, "b")
	first := g.nodes[1].Status().Commit
	select {
	case idx := <-sm.started:
		require.Equal(t, first, idx)
	case <-time.After(stepTimeout):
		t.Fatal("the applier did not start applying b")
	}
	for _, d := range []string{"c", "d", "e"} {
		g.propose(1, d) // each its own Ready, its own commit index
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

// The tests below drive Cores directly, single-threaded: each node is a
// Core over a real Storage on a MemFS whose owner (the product's owner
// loop, loop.go, in the simNode's environment) runs inside the test's own
// calls. A
// message goes nowhere until the test delivers it, a tick or a timer
// firing is a call, and raft's randomised election timeouts come from a
// seeded stream, so there is nothing to wait for and no barrier.

// coreGroup is a group of Cores driven by the test.
type coreGroup struct {
	t     *testing.T
	ids   []uint64
	nodes map[uint64]*simNode
	works map[uint64]*[]Work
	out   []*pb.Message
	cut   map[uint64]bool
	// full marks the nodes whose disk is full (their log and raft state
	// writes fail with vfs.ErrNoSpace).
	full map[uint64]bool
}

func newCoreGroup(t *testing.T, size int) *coreGroup {
	t.Helper()
	cryptotest.SetGlobalRandom(t, 1)
	g := &coreGroup{t: t, nodes: map[uint64]*simNode{}, works: map[uint64]*[]Work{}, cut: map[uint64]bool{}, full: map[uint64]bool{}}
	var peers []raft.Peer
	for i := 1; i <= size; i++ {
		g.ids = append(g.ids, uint64(i))
		peers = append(peers, raft.Peer{ID: uint64(i)})
	}
	for _, id := range g.ids {
		n := &simNode{id: id, peers: peers, fs: vfs.NewMem(), rng: rand.New(rand.NewPCG(id, 1)),
			timing: Timing{ElectionTick: 10, HeartbeatTick: 2, CommitNotifyDelay: time.Millisecond}}
		n.out = func(_ uint64, msgs []*pb.Message) {
			for _, m := range msgs {
				g.out = append(g.out, proto.CloneOf(m))
			}
		}
		n.full = func() bool { return g.full[id] }
		g.works[id] = &[]Work{}
		n.works = g.works[id]
		require.NoError(t, n.open())
		t.Cleanup(n.close)
		g.nodes[id] = n
	}
	for _, id := range g.ids {
		g.handle(id)
	}
	return g
}

func (g *coreGroup) core(id uint64) *Core { return g.nodes[id].core }

// withSnapshots gives every node a state machine that snapshots (its
// applied data) and installs snapshots.
func (g *coreGroup) withSnapshots() {
	for _, id := range g.ids {
		n := g.nodes[id]
		n.restore = func(n *simNode, s *pb.Snapshot) error {
			data, pos, err := simDecodeApplied(s.GetData())
			if err != nil {
				return err
			}
			if err := n.st.ApplySnapshot(s.GetMetadata(), pos); err != nil {
				return err
			}
			n.data = data
			return nil
		}
		n.snapData = func() (uint64, []byte, error) {
			pos, err := n.clog.Position(n.applied + 1)
			if err != nil {
				pos = n.clog.EndPosition()
			}
			return n.applied, simEncodeApplied(n.data, pos), nil
		}
		n.st.SnapshotData = n.snapData
	}
}

func (g *coreGroup) handle(id uint64) {
	g.t.Helper()
	require.NoError(g.t, g.nodes[id].handle(0))
}

// outbox returns and forgets what the nodes sent, in order.
func (g *coreGroup) outbox() []*pb.Message {
	msgs := g.out
	g.out = nil
	return msgs
}

// deliver steps every sent message into its recipient (dropping those to
// or from a cut node), in send order, until nothing more is sent.
func (g *coreGroup) deliver() {
	g.t.Helper()
	for range 1000 {
		msgs := g.outbox()
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			if g.cut[m.GetFrom()] || g.cut[m.GetTo()] {
				continue
			}
			g.core(m.GetTo()).Step(m)
			g.handle(m.GetTo())
		}
	}
	g.t.Fatal("the group kept sending for 1000 rounds")
}

func (g *coreGroup) tick(id uint64, k int) {
	g.t.Helper()
	for range k {
		g.core(id).Tick()
		g.handle(id)
	}
}

// fireHeld fires node id's held-append timer if armed, and reports
// whether it was.
func (g *coreGroup) fireHeld(id uint64) bool {
	n := g.nodes[id]
	if n.heldAt < 0 {
		return false
	}
	n.fireHeld(n.heldAt)
	return true
}

// quiet delivers everything, firing held-append timers, until the group
// sends nothing more.
func (g *coreGroup) quiet() {
	g.t.Helper()
	quiet(g.t, g.ids, g.deliver, g.fireHeld)
}

// quiet delivers everything and fires every node's held-append timer,
// round after round, until no timer was armed.
func quiet(t *testing.T, ids []uint64, deliver func(), fireHeld func(id uint64) bool) {
	t.Helper()
	for range 100 {
		deliver()
		fired := false
		for _, id := range ids {
			if fireHeld(id) {
				fired = true
			}
		}
		if !fired {
			return
		}
	}
	t.Fatal("held appends kept coming for 100 rounds")
}

func (g *coreGroup) elect(id uint64) {
	g.t.Helper()
	require.NoError(g.t, g.core(id).Campaign())
	g.handle(id)
	g.quiet()
	require.NotZero(g.t, g.core(id).LeaderTerm(), "node %d did not become leader", id)
}

// electAmong ticks the given nodes in turn, delivering after each round,
// until one of them leads, and returns it.
func (g *coreGroup) electAmong(ids ...uint64) uint64 {
	g.t.Helper()
	for range 200 {
		for _, id := range ids {
			g.tick(id, 1)
		}
		g.quiet()
		for _, id := range ids {
			if g.core(id).LeaderTerm() != 0 {
				return id
			}
		}
	}
	g.t.Fatalf("none of %v became leader in 200 ticks", ids)
	return 0
}

func (g *coreGroup) propose(id uint64, data ...string) error {
	g.t.Helper()
	ents := make([]*pb.Entry, len(data))
	for i, d := range data {
		ents[i] = &pb.Entry{Data: []byte(d)}
	}
	err := g.core(id).Propose(ents)
	g.handle(id)
	return err
}

func (g *coreGroup) status(id uint64) *Status { return g.core(id).Status() }

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
		run  func(t *testing.T, g *coreGroup, cx uint64)
	}{{
		name: "the timer sends them",
		run: func(t *testing.T, g *coreGroup, cx uint64) {
			require.True(t, g.fireHeld(1))
			msgs := g.outbox()
			require.Equal(t, map[uint64]uint64{2: cx, 3: cx}, commitOnly(msgs, 1))
			require.Empty(t, g.core(1).Held())
			require.False(t, g.core(1).HeldTimerArmed())
			g.out = msgs // put them back for delivery
			g.deliver()
			require.Equal(t, cx, g.status(2).Commit, "the follower learns the commit from the held append")
			require.Equal(t, cx, g.status(3).Commit)
		},
	}, {
		name: "a later append carries the commit and drops them",
		run: func(t *testing.T, g *coreGroup, cx uint64) {
			require.NoError(t, g.propose(1, "y"))
			msgs := g.outbox()
			for _, m := range msgs {
				if m.GetFrom() == 1 && m.GetType() == pb.MessageType_MsgApp {
					require.NotEmpty(t, m.GetEntries(), "an append without entries went out to %d", m.GetTo())
					require.GreaterOrEqual(t, m.GetCommit(), cx)
				}
			}
			require.Empty(t, g.core(1).Held(), "the append with entries superseded the held ones")
			require.True(t, g.fireHeld(1))
			require.Empty(t, commitOnly(g.outbox(), 1), "the timer sent a superseded append")
		},
	}, {
		name: "a newer commit replaces the held one",
		run: func(t *testing.T, g *coreGroup, cx uint64) {
			c := g.core(1)
			term := c.BasicStatus().GetTerm()
			m := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
				Term: proto.Uint64(term), Index: proto.Uint64(cx), LogTerm: proto.Uint64(term), Commit: proto.Uint64(cx + 1)}
			require.True(t, c.hold(m))
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, c.Held())
			// An older append (of an earlier commit) does not supersede it;
			// one of another term does not either, nor a heartbeat.
			c.supersede(&pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term), Commit: proto.Uint64(cx)})
			c.supersede(&pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(3), Term: proto.Uint64(term + 1), Commit: proto.Uint64(cx + 5)})
			c.supersede(&pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(3), Term: proto.Uint64(term), Commit: proto.Uint64(cx + 5)})
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, c.Held())
			require.True(t, g.fireHeld(1))
			msgs := g.outbox()
			require.Equal(t, map[uint64]uint64{2: cx + 1, 3: cx}, commitOnly(msgs, 1), "one append per follower, the newest")
			require.Len(t, msgs, 2)
			require.Equal(t, uint64(2), msgs[0].GetTo(), "held appends go out in recipient order")
		},
	}, {
		name: "only appends without entries to replicating followers are held",
		run: func(t *testing.T, g *coreGroup, cx uint64) {
			c := g.core(1)
			term := c.BasicStatus().GetTerm()
			withEntries := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term),
				Commit: proto.Uint64(cx), Entries: []*pb.Entry{{Data: []byte("z")}}}
			require.False(t, c.hold(withEntries))
			hb := &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), Term: proto.Uint64(term)}
			require.False(t, c.hold(hb))
			stranger := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(9), Term: proto.Uint64(term), Commit: proto.Uint64(cx)}
			require.False(t, c.hold(stranger), "a node not in the progress table is not replicating")
		},
	}, {
		name: "leadership loss clears them",
		run: func(t *testing.T, g *coreGroup, cx uint64) {
			g.cut[1] = true
			g.tick(1, 2*10) // CheckQuorum: an isolated leader steps down within two election timeouts
			require.Zero(t, g.core(1).LeaderTerm())
			require.Empty(t, g.core(1).Held())
			g.outbox()
			require.True(t, g.fireHeld(1), "the timer stays armed; it finds nothing to send")
			require.Empty(t, commitOnly(g.outbox(), 1), "an ex-leader sent a held append")
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newCoreGroup(t, 3)
			g.elect(1)
			require.NoError(t, g.propose(1, "x"))
			msgs := g.outbox()
			var cx uint64
			for _, m := range msgs {
				if m.GetType() == pb.MessageType_MsgApp && len(m.GetEntries()) > 0 {
					cx = m.GetEntries()[len(m.GetEntries())-1].GetIndex()
				}
			}
			require.NotZero(t, cx, "the leader sent no append with x")
			g.out = msgs
			g.deliver() // appends out, answers back: the leader commits x
			require.Equal(t, cx, g.status(1).Commit)
			require.Empty(t, commitOnly(g.outbox(), 1), "a commit-only append went out at once")
			require.Equal(t, map[uint64]uint64{2: cx, 3: cx}, g.core(1).Held())
			require.True(t, g.core(1).HeldTimerArmed())
			require.Less(t, g.status(2).Commit, cx, "the follower learnt the commit without an append")
			tc.run(t, g, cx)
		})
	}
}

// The early/late split: a leader's appends leave before its own entries
// are durable, a follower's answers only after.
func TestEarlyAndLateMessages(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	*g.works[1], *g.works[2] = nil, nil
	require.NoError(t, g.propose(1, "x"))
	w := (*g.works[1])[0]
	require.NotEmpty(t, w.Entries)
	require.NotEmpty(t, w.Send, "the leader's appends wait for its fsync")
	for _, m := range w.Send {
		require.Equal(t, pb.MessageType_MsgApp, m.GetType())
	}
	g.deliver()
	for _, w := range *g.works[2] {
		if len(w.Entries) == 0 {
			continue
		}
		require.Empty(t, w.Send, "a follower sent something before its entries were durable")
		require.NotEmpty(t, w.After)
		for _, m := range w.After {
			require.Equal(t, pb.MessageType_MsgAppResp, m.GetType())
		}
	}
}

// A leader that loses its leadership with proposals in flight never
// applies them as if committed: the entries it appended alone are replaced
// by the new leader's, and proposals made while no leader is known are
// refused.
func TestLeaderChangeWithProposalsInFlight(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	require.NoError(t, g.propose(1, "before"))
	g.quiet()
	commit := g.status(1).Commit
	oldTerm := g.status(1).Term

	// Node 1 is cut off with a proposal only it has.
	g.cut[1] = true
	require.NoError(t, g.propose(1, "lost"))
	g.outbox()
	lostIndex, err := g.nodes[1].st.LastIndex()
	require.NoError(t, err)
	require.Greater(t, lostIndex, commit, "the old leader appended the proposal")

	// 2 and 3 elect one of them, which commits its own entries over that
	// index.
	nl := g.electAmong(2, 3)
	require.NoError(t, g.propose(nl, "won"))
	require.NoError(t, g.propose(nl, "won2"))
	g.quiet()
	newCommit := g.status(nl).Commit
	require.GreaterOrEqual(t, newCommit, lostIndex)

	// The old leader, still alone, steps down (CheckQuorum) and, knowing
	// no leader, refuses a proposal.
	g.tick(1, 2*10)
	require.Zero(t, g.core(1).LeaderTerm())
	require.Equal(t, uint64(0), g.status(1).Leader)
	require.ErrorIs(t, g.propose(1, "refused"), raft.ErrProposalDropped)

	// Reconnected, it learns of the new leader and its log is overwritten.
	g.cut[1] = false
	g.outbox()
	g.tick(nl, 2) // a heartbeat
	g.quiet()
	require.Equal(t, nl, g.status(1).Leader)
	require.Greater(t, g.status(1).Term, oldTerm)
	ref := g.nodes[nl].data
	for _, id := range g.ids {
		n := g.nodes[id]
		require.GreaterOrEqual(t, n.applied, newCommit, "node %d", id)
		for idx, d := range n.data {
			require.NotEqual(t, "lost", d, "node %d applied the lost proposal at %d", id, idx)
			require.NotEqual(t, "refused", d, "node %d applied a refused proposal at %d", id, idx)
		}
		require.Equal(t, ref, n.data, "node %d applied other entries than the leader", id)
	}
	term, err := g.nodes[1].st.Term(lostIndex)
	require.NoError(t, err)
	require.Greater(t, term, oldTerm, "the old leader's entry at that index was replaced")
}

// Each Ready hands over its own commit index; the applier coalesces those
// queued behind a running Apply into one (coalesceApply), never across a
// snapshot.
func TestCoreApplyCoalescing(t *testing.T) {
	g := newCoreGroup(t, 1)
	g.elect(1)
	*g.works[1] = nil
	var queue []applyWork
	for _, d := range []string{"b", "c", "d", "e"} {
		require.NoError(t, g.propose(1, d))
	}
	for _, w := range *g.works[1] {
		if w.Commit > 0 {
			queue = append(queue, applyWork{index: w.Commit, term: w.CommitTerm})
		}
	}
	require.Len(t, queue, 4, "one commit index per Ready")
	last := queue[3]
	require.Equal(t, []applyWork{last}, coalesceApply(slices.Clone(queue)))

	snap := applyWork{snap: &pb.Snapshot{}}
	mixed := []applyWork{queue[0], queue[1], snap, queue[2], queue[3]}
	got := coalesceApply(mixed)
	require.Len(t, got, 3)
	require.Equal(t, queue[1], got[0])
	require.NotNil(t, got[1].snap, "the snapshot is applied in its place")
	require.Equal(t, queue[3], got[2])
}

// PreVote: a follower cut off from the leader campaigns without raising
// its term, so when it comes back it does not depose the leader.
// CheckQuorum: a leader cut off from the others steps down after an
// election timeout of ticks without hearing from a quorum, not before.
func TestPreVoteAndCheckQuorum(t *testing.T) {
	t.Run("prevote", func(t *testing.T) {
		g := newCoreGroup(t, 3)
		g.elect(1)
		term := g.status(1).Term
		g.cut[3] = true
		g.tick(3, 5*10) // far past any randomised election timeout
		g.deliver()
		require.Equal(t, raft.StatePreCandidate.String(), g.status(3).Role)
		require.Equal(t, term, g.status(3).Term, "a pre-candidate raised its term")

		g.cut[3] = false
		g.tick(3, 2*10) // pre-votes reach 1 and 2 now, which still follow 1
		g.deliver()
		g.tick(1, 2) // the leader's heartbeat brings 3 back
		g.quiet()
		for _, id := range g.ids {
			st := g.status(id)
			require.Equal(t, term, st.Term, "node %d: term moved", id)
			require.Equal(t, uint64(1), st.Leader, "node %d: leader", id)
		}
		require.NotZero(t, g.core(1).LeaderTerm())
	})
	t.Run("checkquorum", func(t *testing.T) {
		g := newCoreGroup(t, 3)
		g.elect(1)
		term := g.status(1).Term
		g.cut[1] = true
		steps := 0
		for g.core(1).LeaderTerm() != 0 {
			require.Less(t, steps, 2*10, "an isolated leader still leads after two election timeouts")
			g.tick(1, 1)
			steps++
		}
		require.GreaterOrEqual(t, steps, 10, "the leader stepped down before an election timeout")
		st := g.status(1)
		require.Equal(t, raft.StateFollower.String(), st.Role)
		require.Equal(t, term, st.Term, "stepping down does not raise the term")
		// The connected majority is untouched until its own timeout.
		require.Equal(t, uint64(1), g.status(2).Leader)
	})
}

// Snapshot hand-off: a follower behind the leader's compaction point gets
// a snapshot, sent before the leader's own writes like an append; the
// follower installs it before persisting anything of that Ready, answers
// only after, and then follows the log from the snapshot on.
func TestSnapshotHandoff(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.withSnapshots()
	g.elect(1)
	g.cut[3] = true
	pad := strings.Repeat("p", 900)
	for i := range 60 { // several 16 KiB segments
		require.NoError(t, g.propose(1, fmt.Sprintf("%d%s", i, pad)))
		g.quiet()
	}
	l1 := g.nodes[1]
	behind, err := g.nodes[3].st.LastIndex()
	require.NoError(t, err)
	compact, err := l1.st.Compact(l1.applied)
	require.NoError(t, err)
	require.Greater(t, compact, behind+1, "the leader did not compact past the follower")

	*g.works[1], *g.works[3] = nil, nil
	g.cut[3] = false
	g.tick(1, 2) // a heartbeat: 3 answers, the leader finds it needs a snapshot
	var snapIndex uint64
	for range 100 {
		msgs := g.outbox()
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			g.core(m.GetTo()).Step(m)
			g.handle(m.GetTo())
			if m.GetType() == pb.MessageType_MsgSnap {
				snapIndex = m.GetSnapshot().GetMetadata().GetIndex()
				g.core(m.GetFrom()).ReportSnapshot(m.GetTo(), false) // as the transport does once sent
				g.handle(m.GetFrom())
			}
		}
	}
	require.NotZero(t, snapIndex, "no snapshot was sent")
	sentEarly := false
	for _, w := range *g.works[1] {
		for _, m := range w.After {
			require.NotEqual(t, pb.MessageType_MsgSnap, m.GetType(), "a snapshot waited for the leader's fsync")
		}
		for _, m := range w.Send {
			sentEarly = sentEarly || m.GetType() == pb.MessageType_MsgSnap
		}
	}
	require.True(t, sentEarly)
	installed := false
	for _, w := range *g.works[3] {
		if w.Snapshot == nil {
			continue
		}
		installed = true
		require.Equal(t, snapIndex, w.Snapshot.GetMetadata().GetIndex())
		require.Empty(t, w.Send, "the follower sent before installing")
		require.NotEmpty(t, w.After, "the follower did not answer the snapshot")
	}
	require.True(t, installed, "the follower's Ready carried no snapshot")
	first, err := g.nodes[3].st.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, snapIndex+1, first, "the follower's log does not continue after the snapshot")

	require.NoError(t, g.propose(1, "after"))
	g.quiet()
	require.Equal(t, g.nodes[1].applied, g.nodes[3].applied)
	require.Equal(t, g.nodes[1].data, g.nodes[3].data, "the follower's state differs from the leader's")
}

// A leader whose Ready waits for disk space (the owner neither persists
// nor advances) still hears the group through StepWhileStalled: it learns
// of a newer leader and stops claiming to lead, while appends with entries
// are dropped rather than grown in memory. Once the write succeeds it
// follows the new leader, whose log replaces its unpersisted entry.
func TestStepWhileStalled(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	g.quiet()
	g.cut[1] = true
	c1 := g.core(1)
	require.NoError(t, c1.Propose([]*pb.Entry{{Data: []byte("stuck")}}))
	w := c1.Ready() // the disk is full: not persisted, not advanced
	require.NotEmpty(t, w.Entries)
	stuckIndex := w.Entries[0].GetIndex()
	oldTerm := g.status(1).Term

	nl := g.electAmong(2, 3)
	require.NoError(t, g.propose(nl, "new"))
	g.quiet()
	g.cut[1] = false
	// An append with entries from the new leader is dropped unread: the
	// stalled node does not even learn the new term from it.
	newTerm := g.status(nl).Term
	app := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: proto.Uint64(nl), To: proto.Uint64(1),
		Term: proto.Uint64(newTerm), Index: proto.Uint64(stuckIndex - 1), LogTerm: proto.Uint64(oldTerm),
		Commit: proto.Uint64(stuckIndex - 1), Entries: []*pb.Entry{{Index: proto.Uint64(stuckIndex), Term: proto.Uint64(newTerm), Data: []byte("x")}}}
	require.False(t, c1.StepWhileStalled(app))
	require.Equal(t, oldTerm, g.status(1).Term, "the stalled node stepped an append with entries")
	require.NotZero(t, c1.LeaderTerm())
	// A heartbeat is stepped.
	g.tick(nl, 2)
	steppedDown := false
	for _, m := range g.outbox() {
		if m.GetTo() == 1 {
			steppedDown = c1.StepWhileStalled(m) || steppedDown
		}
	}
	require.True(t, steppedDown, "the stalled leader did not step down")
	require.Zero(t, c1.LeaderTerm())
	require.Equal(t, nl, g.status(1).Leader)
	require.Greater(t, g.status(1).Term, oldTerm)

	// Space again: the stalled Work is done, then the rest.
	require.NoError(t, g.nodes[1].do(w, 0))
	g.handle(1)
	g.tick(nl, 2)
	g.quiet()
	require.NoError(t, g.propose(nl, "after"))
	g.quiet()
	require.Equal(t, g.nodes[nl].data, g.nodes[1].data)
	term, err := g.nodes[1].st.Term(stuckIndex)
	require.NoError(t, err)
	require.Greater(t, term, oldTerm, "the stuck entry was not replaced")
	for _, d := range g.nodes[1].data {
		require.NotEqual(t, "stuck", d)
	}
}

// An answer to a read-index request of a node's earlier incarnation (held
// at the leader or on the network across the node's restart) must not
// answer a request of the new one: read ids do not restart with the node.
// The simulator found this (seed 4203 before the fix): a restarted
// follower's first read got an index older than an acknowledged write.
func TestReadAnswerOfEarlierIncarnation(t *testing.T) {
	g := newCoreGroup(t, 3)
	g.elect(1)
	require.NoError(t, g.propose(1, "a"))
	g.quiet()
	// Node 2 asks; the leader's answer is held back.
	g.core(2).ReadIndex(func(uint64) {})
	g.handle(2)
	var held []*pb.Message
	for range 100 {
		msgs := g.outbox()
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.GetType() == pb.MessageType_MsgReadIndexResp && m.GetTo() == 2 {
				held = append(held, m)
				continue
			}
			g.core(m.GetTo()).Step(m)
			g.handle(m.GetTo())
		}
	}
	require.Len(t, held, 1, "the leader did not answer the read")
	stale := held[0].GetIndex()

	// Node 2 restarts; more is committed; it asks again.
	n2 := g.nodes[2]
	n2.crash(rand.New(rand.NewPCG(1, 2)), 0.5)
	require.NoError(t, n2.open())
	g.handle(2)
	require.NoError(t, g.propose(1, "b", "c"))
	g.quiet()
	var got []uint64
	g.core(2).ReadIndex(func(i uint64) { got = append(got, i) })
	g.handle(2)
	g.core(2).Step(held[0])
	g.handle(2)
	require.Empty(t, got, "the earlier incarnation's answer (index %d) answered the new request", stale)
	g.quiet()
	require.Len(t, got, 1)
	require.Greater(t, got[0], stale)
	require.GreaterOrEqual(t, got[0], g.status(1).Commit)
}
