package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// simNet is an in-process network between replicas whose links can be cut,
// made lossy or slow. Fault decisions come from one seeded generator.
type simNet struct {
	mu    sync.Mutex
	rng   *rand.Rand
	nodes map[uint64]*Replica
	links map[[2]uint64]*simLink
	// commitOnly counts the appends without entries handed to links.
	commitOnly atomic.Int64
}

type simLink struct {
	cut   bool
	drop  float64
	delay time.Duration
	q     chan *pb.Message
}

func newSimNet(seed uint64) *simNet {
	return &simNet{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodes: map[uint64]*Replica{}, links: map[[2]uint64]*simLink{}}
}

// transport returns node from's sending side.
func (n *simNet) transport(from uint64) raftlog.Transport { return simSender{n, from} }

type simSender struct {
	n    *simNet
	from uint64
}

func (s simSender) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		s.n.deliver(s.from, m)
	}
}

func (n *simNet) link(from, to uint64) *simLink {
	k := [2]uint64{from, to}
	l := n.links[k]
	if l == nil {
		l = &simLink{q: make(chan *pb.Message, 8192)}
		n.links[k] = l
		go func() {
			for m := range l.q {
				n.mu.Lock()
				r := n.nodes[to]
				d := l.delay
				n.mu.Unlock()
				if d > 0 {
					time.Sleep(d)
				}
				if r != nil {
					r.Step(m)
				}
			}
		}()
	}
	return l
}

func (n *simNet) deliver(from uint64, m *pb.Message) {
	if m.GetType() == pb.MessageType_MsgApp && len(m.GetEntries()) == 0 {
		n.commitOnly.Add(1)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.link(from, m.GetTo())
	if l.cut || (l.drop > 0 && n.rng.Float64() < l.drop) {
		return
	}
	select {
	case l.q <- m:
	default: // a full link loses messages, as a real one would
	}
}

func (n *simNet) set(from, to uint64, f func(l *simLink)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n.link(from, to))
}

// partition cuts every link between the groups (each a set of node ids).
func (n *simNet) partition(groups ...[]uint64) {
	side := map[uint64]int{}
	for i, g := range groups {
		for _, id := range g {
			side[id] = i
		}
	}
	for a := uint64(1); a <= 3; a++ {
		for b := uint64(1); b <= 3; b++ {
			if a != b {
				n.set(a, b, func(l *simLink) { l.cut = side[a] != side[b] })
			}
		}
	}
}

func (n *simNet) heal() {
	for a := uint64(1); a <= 3; a++ {
		for b := uint64(1); b <= 3; b++ {
			if a != b {
				n.set(a, b, func(l *simLink) { l.cut, l.drop, l.delay = false, 0, 0 })
			}
		}
	}
}

func (n *simNet) float() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.Float64()
}

func (n *simNet) intn(k int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.IntN(k)
}

// group is three replicas on real files, connected by a simNet.
type group struct {
	t    *testing.T
	net  *simNet
	dirs map[uint64]string
	mu   sync.Mutex
	reps map[uint64]*Replica
	// commitNotifyDelay is every replica's CommitNotifyDelay (0: default).
	commitNotifyDelay time.Duration
	// fs, if set for a node, is its store's file system (default: the OS's).
	fs map[uint64]vfs.FS
}

var simPeers = []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}

func newGroup(t *testing.T, seed uint64) *group {
	return newGroupWith(t, seed, 0)
}

func newGroupWith(t *testing.T, seed uint64, commitNotifyDelay time.Duration) *group {
	g := &group{t: t, net: newSimNet(seed), dirs: map[uint64]string{}, reps: map[uint64]*Replica{}, commitNotifyDelay: commitNotifyDelay}
	for id := uint64(1); id <= 3; id++ {
		g.dirs[id] = t.TempDir()
		g.start(id)
	}
	t.Cleanup(func() {
		for id := uint64(1); id <= 3; id++ {
			g.stop(id)
		}
	})
	return g
}

func (g *group) start(id uint64) {
	r, err := OpenReplica(ReplicaConfig{
		ID:        id,
		Store:     store.Config{Dir: g.dirs[id], FS: g.fs[id], SegmentSize: 1 << 20, CQUnitsPerFile: 1000, IndexSlots: 64, IndexMaxEntries: 4096},
		Bootstrap: simPeers,
		ClusterID: 1,
		// Fast elections keep the test short.
		Raft:        raftlog.Timing{TickInterval: 20 * time.Millisecond, CommitNotifyDelay: g.commitNotifyDelay},
		WaitTimeout: 5 * time.Second, // TestSendAsync waits it out once; loaded CI machines commit slowly
	})
	require.NoError(g.t, err)
	g.net.mu.Lock()
	g.net.nodes[id] = r
	g.net.mu.Unlock()
	g.mu.Lock()
	g.reps[id] = r
	g.mu.Unlock()
	r.Start(g.net.transport(id))
}

func (g *group) stop(id uint64) {
	g.mu.Lock()
	r := g.reps[id]
	delete(g.reps, id)
	g.mu.Unlock()
	if r == nil {
		return
	}
	g.net.mu.Lock()
	delete(g.net.nodes, id)
	g.net.mu.Unlock()
	require.NoError(g.t, r.Close())
}

func (g *group) rep(id uint64) *Replica {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reps[id]
}

// leader waits for a node that leads and has applied its own term.
func (g *group) leader(timeout time.Duration) *Replica {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for id := uint64(1); id <= 3; id++ {
			if r := g.rep(id); r != nil && r.Node().LeaderReady() {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.t.Fatalf("no leader within %v", timeout)
	return nil
}

func createTopic(t *testing.T, r *Replica, name string, queues int32) {
	tc := offsets.NewTopicConfig(name, queues)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.Exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}))
}

func testMsg(topic string, q int32, body string) *message.Message {
	return &message.Message{Topic: topic, QueueID: q, Body: []byte(body), BornTimestamp: time.Now().UnixMilli(),
		BornHost:   netip.MustParseAddrPort("127.0.0.1:5555"),
		Properties: map[string]string{message.PropertyUniqKey: body}}
}

type acked struct {
	q      int32
	offset int64
}

func TestGroupElectsAndReplicates(t *testing.T) {
	g := newGroup(t, 1)
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := l.Send(ctx, []*message.Message{testMsg("T", 1, "a"), testMsg("T", 1, "b")})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, int64(0), res[0].QueueOffset)
	require.Equal(t, int64(1), res[1].QueueOffset)
	// A follower refuses.
	for id := uint64(1); id <= 3; id++ {
		if r := g.rep(id); r != l {
			_, err := r.Send(ctx, []*message.Message{testMsg("T", 0, "x")})
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}
	// Unknown topic: a definite, apply-time error.
	res, err = l.Send(ctx, []*message.Message{testMsg("nope", 0, "y")})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, store.ErrUnknownTopic)
	// Retry with the same unique key: same answer, not queued twice.
	res2, err := l.Send(ctx, []*message.Message{testMsg("T", 1, "a")})
	require.NoError(t, err)
	require.True(t, res2[0].Duplicate)
	require.Equal(t, int64(0), res2[0].QueueOffset)
	g.waitConverged(10 * time.Second)
	g.checkAgreement()
	for id := uint64(1); id <= 3; id++ {
		require.Equal(t, int64(2), g.rep(id).Store().MaxOffset("T", 1))
	}
}

// TestCommitOnlyAppendsAreHeld sends one message at a time. Raft tells the
// followers of each commit with an append carrying no entries; the leader
// holds those back (CommitNotifyDelay), and the next send's append, which
// carries the commit index too, replaces them. After the last send the held
// appends go out when the delay ends, so the followers still learn of it.
func TestCommitOnlyAppendsAreHeld(t *testing.T) {
	const delay = time.Second // far longer than a send takes, even on a loaded machine (300 ms was not, once)
	g := newGroupWith(t, 1, delay)
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := g.net.commitOnly.Load()
	const n = 30
	for i := range n {
		res, err := l.Send(ctx, []*message.Message{testMsg("T", 0, fmt.Sprint("k", i))})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	// Without holding, each send's commit costs one such append per
	// follower: 2n of them.
	require.Zero(t, g.net.commitOnly.Load()-before, "appends without entries sent while sends kept coming")
	commit := l.Node().Status().Commit
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && g.net.commitOnly.Load()-before < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, int64(2), g.net.commitOnly.Load()-before, "held appends sent after the delay, one per follower")
	g.waitConverged(5 * time.Second)
	for id := uint64(1); id <= 3; id++ {
		require.GreaterOrEqual(t, g.rep(id).Node().Status().Commit, commit, "node %d", id)
		require.Equal(t, int64(n), g.rep(id).Store().MaxOffset("T", 0), "node %d", id)
	}
}

// waitConverged waits until every running replica applied the same index
// as the leader's commit.
func (g *group) waitConverged(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var idx []uint64
		for id := uint64(1); id <= 3; id++ {
			if r := g.rep(id); r != nil {
				idx = append(idx, r.Node().Applied(), r.Node().Status().Commit)
			}
		}
		same := len(idx) > 0
		for _, v := range idx {
			same = same && v == idx[0]
		}
		if same {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatalf("replicas did not converge within %v", timeout)
}

// checkAgreement compares the committed logs of all replicas entry by
// entry: same index, term, data and byte position.
func (g *group) checkAgreement() {
	var ref *commitlog.Log
	var refID uint64
	for id := uint64(1); id <= 3; id++ {
		r := g.rep(id)
		if r == nil {
			continue
		}
		l := r.Store().Log()
		if ref == nil {
			ref, refID = l, id
			continue
		}
		hi := min(r.Node().Applied(), g.rep(refID).Node().Applied())
		lo := max(ref.FirstIndex(), l.FirstIndex())
		for i := lo; i <= hi; i++ {
			a, err := ref.Entries(i, i+1, 1)
			require.NoError(g.t, err)
			b, err := l.Entries(i, i+1, 1)
			require.NoError(g.t, err)
			require.Equal(g.t, a[0].Term, b[0].Term, "term of %d on %d and %d", i, refID, id)
			require.Equal(g.t, a[0].Pos, b[0].Pos, "position of %d on %d and %d", i, refID, id)
			require.True(g.t, bytes.Equal(a[0].Data, b[0].Data), "data of %d on %d and %d", i, refID, id)
		}
	}
}

// TestGroupUnderFaults runs producers against a group while a seeded
// nemesis partitions, drops, delays and restarts nodes, then checks that
// every acknowledged send is on every node at its acknowledged offset and
// that the logs agree.
func TestGroupUnderFaults(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runFaults(t, seed) })
	}
}

func runFaults(t *testing.T, seed uint64) {
	g := newGroup(t, seed)
	createTopic(t, g.leader(5*time.Second), "T", 4)

	var (
		mu   sync.Mutex
		acks = map[string]acked{}
		sent atomic.Int64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("p%d-%d", p, i)
				m := testMsg("T", int32(i%4), body)
				for try := 0; try < 200; try++ {
					var l *Replica
					for id := uint64(1); id <= 3; id++ {
						if r := g.rep(id); r != nil && r.Node().IsLeader() {
							l = r
						}
					}
					if l == nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					res, err := l.Send(ctx, []*message.Message{testMsg("T", m.QueueID, body)})
					cancel()
					if err == nil && res[0].Err == nil {
						mu.Lock()
						if prev, ok := acks[body]; ok && prev != (acked{res[0].QueueID, res[0].QueueOffset}) {
							t.Errorf("%s acknowledged at %v and at %v", body, prev, res[0])
						}
						acks[body] = acked{res[0].QueueID, res[0].QueueOffset}
						mu.Unlock()
						sent.Add(1)
						break
					}
					// Indeterminate or refused: retry the same unique key
					// (dedupe makes the retry safe).
					time.Sleep(5 * time.Millisecond)
				}
			}
		}(p)
	}

	faults := []string{"isolate-leader", "minority", "drop", "delay", "restart", "restart-leader"}
	end := time.Now().Add(4 * time.Second)
	for time.Now().Before(end) {
		f := faults[g.net.intn(len(faults))]
		switch f {
		case "isolate-leader":
			if l := g.leader(5 * time.Second); l != nil {
				id := l.cfg.ID
				var rest []uint64
				for o := uint64(1); o <= 3; o++ {
					if o != id {
						rest = append(rest, o)
					}
				}
				g.net.partition([]uint64{id}, rest)
			}
		case "minority":
			id := uint64(1 + g.net.intn(3))
			g.net.partition([]uint64{id}, others(id))
		case "drop":
			for a := uint64(1); a <= 3; a++ {
				for b := uint64(1); b <= 3; b++ {
					if a != b {
						g.net.set(a, b, func(l *simLink) { l.drop = 0.2 })
					}
				}
			}
		case "delay":
			id := uint64(1 + g.net.intn(3))
			for _, o := range others(id) {
				g.net.set(id, o, func(l *simLink) { l.delay = 20 * time.Millisecond })
			}
		case "restart":
			id := uint64(1 + g.net.intn(3))
			g.stop(id)
			time.Sleep(100 * time.Millisecond)
			g.start(id)
		case "restart-leader":
			l := g.leader(5 * time.Second)
			id := l.cfg.ID
			g.stop(id)
			time.Sleep(100 * time.Millisecond)
			g.start(id)
		}
		time.Sleep(time.Duration(200+g.net.intn(300)) * time.Millisecond)
		g.net.heal()
		time.Sleep(150 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	g.net.heal()
	g.leader(10 * time.Second)
	// A final write from the leader commits everything before it.
	createTopic(t, g.leader(10*time.Second), "fence", 1)
	g.waitConverged(15 * time.Second)
	g.checkAgreement()
	require.Greater(t, sent.Load(), int64(20), "too few acknowledged sends to mean anything")

	for id := uint64(1); id <= 3; id++ {
		st := g.rep(id).Store()
		for body, a := range acks {
			gr, err := st.GetMessages("T", a.q, a.offset, 1, 1<<20, nil)
			require.NoError(t, err)
			require.Len(t, gr.Records, 1, "node %d: %s missing at %d/%d", id, body, a.q, a.offset)
			v, err := message.Parse(gr.Records[0], true)
			require.NoError(t, err)
			require.Equal(t, body, string(v.Body), "node %d at %d/%d", id, a.q, a.offset)
		}
		// No acknowledged message is queued twice.
		seen := map[string]bool{}
		for q := int32(0); q < 4; q++ {
			for off := st.MinOffset("T", q); off < st.MaxOffset("T", q); off++ {
				gr, err := st.GetMessages("T", q, off, 1, 1<<20, nil)
				require.NoError(t, err)
				v, err := message.Parse(gr.Records[0], true)
				require.NoError(t, err)
				require.False(t, seen[string(v.Body)], "node %d: %s queued twice", id, v.Body)
				seen[string(v.Body)] = true
			}
		}
	}
	t.Logf("seed %d: %d acknowledged sends", seed, sent.Load())
}

func others(id uint64) []uint64 {
	var o []uint64
	for x := uint64(1); x <= 3; x++ {
		if x != id {
			o = append(o, x)
		}
	}
	return o
}

// compactPastFollower creates topic T (2 queues), stops a follower,
// sends 3,000 messages of about 1 KiB (bodies "k-xxx…" followed by
// suffix(k)'s text when suffix is set), with commitOffset also commits
// offset 42 of group g in T's queue 1, then checkpoints and compacts the
// leader's log past all of it: started again, the follower must install a
// snapshot. It returns the leader, the stopped follower and the first
// index the leader's log keeps.
func (g *group) compactPastFollower(t *testing.T, suffix string, commitOffset bool) (l *Replica, lag, at uint64) {
	t.Helper()
	l = g.leader(5 * time.Second)
	createTopic(t, l, "T", 2)
	for id := uint64(1); id <= 3; id++ {
		if id != l.cfg.ID {
			lag = id
		}
	}
	g.stop(lag)
	body := strings.Repeat("x", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3000; i += 50 {
		var ms []*message.Message
		for k := i; k < i+50; k++ {
			text := fmt.Sprintf("%d-%s", k, body)
			if suffix != "" {
				text += fmt.Sprintf(suffix, k)
			}
			ms = append(ms, testMsg("T", int32(k%2), text))
		}
		_, err := l.Send(ctx, ms)
		require.NoError(t, err)
	}
	if commitOffset {
		require.NoError(t, l.Exec(ctx, &store.Command{Op: store.OpCommitOffsets, Offsets: []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 1, Offset: 42}}}))
	}
	require.NoError(t, l.Store().Persist())
	at, err := l.rs.Compact(l.Node().Applied())
	require.NoError(t, err)
	require.Greater(t, at, uint64(10), "compaction must drop segments for this test to mean anything")
	return l, lag, at
}

// TestSnapshotCatchUp: a node that was down while the leader's log was
// compacted past its position catches up by snapshot (offsets, config,
// queue positions), then by log, and its log positions match the leader's.
func TestSnapshotCatchUp(t *testing.T) {
	g := newGroup(t, 7)
	l, lag, at := g.compactPastFollower(t, "", true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	g.start(lag)
	g.waitConverged(15 * time.Second)
	f := g.rep(lag)
	require.Greater(t, f.Store().Log().FirstIndex(), at, "the lagging node must have installed a snapshot")
	require.Equal(t, l.Store().MaxOffset("T", 0), f.Store().MaxOffset("T", 0))
	require.Greater(t, f.Store().MinOffset("T", 0), int64(0), "messages below the snapshot are gone on the new node")
	off, ok := f.Store().ConsumerOffset("g", "T", 1)
	require.True(t, ok)
	require.Equal(t, int64(42), off)
	// New messages after the snapshot land at the same offsets and positions.
	res, err := l.Send(ctx, []*message.Message{testMsg("T", 0, "after-snapshot")})
	require.NoError(t, err)
	g.waitConverged(10 * time.Second)
	gr, err := f.Store().GetMessages("T", 0, res[0].QueueOffset, 1, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, gr.Records, 1)
	v, err := message.Parse(gr.Records[0], true)
	require.NoError(t, err)
	require.Equal(t, "after-snapshot", string(v.Body))
	require.Equal(t, res[0].PhyOffset, v.PhysicalOffset)
	g.checkAgreement()

	// And the installed node survives a restart.
	g.stop(lag)
	g.start(lag)
	g.waitConverged(10 * time.Second)
	require.Equal(t, l.Store().MaxOffset("T", 0), g.rep(lag).Store().MaxOffset("T", 0))
}

// TestSendAsync covers the path inline sends take: results arrive through
// the callback after commit; a leader cut off from its followers times the
// wait out as indeterminate (context.DeadlineExceeded), and the entry still
// lands if the leader keeps its term; closing fails what is still queued.
func TestSendAsync(t *testing.T) {
	g := newGroup(t, 7)
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 1)

	type answer struct {
		res []store.MessageResult
		err error
	}
	send := func(r *Replica, body string) chan answer {
		ch := make(chan answer, 1)
		err := r.SendAsync([]*message.Message{testMsg("T", 0, body)}, func(res []store.MessageResult, err error) {
			ch <- answer{res, err}
		})
		require.NoError(t, err)
		return ch
	}
	wait := func(ch chan answer) answer {
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
			return answer{}
		}
	}
	a := wait(send(l, "a1"))
	require.NoError(t, a.err)
	require.Equal(t, int64(0), a.res[0].QueueOffset)
	a = wait(send(l, "a1"))
	require.NoError(t, a.err)
	require.True(t, a.res[0].Duplicate, "a retry is answered with the original")

	// A follower refuses at once: no callback.
	for id := uint64(1); id <= 3; id++ {
		if r := g.rep(id); r != l {
			err := r.SendAsync([]*message.Message{testMsg("T", 0, "x")}, func([]store.MessageResult, error) {
				t.Error("callback of a refused send")
			})
			require.ErrorIs(t, err, ErrNotLeader)
		}
	}

	// Cut the leader off: the wait times out (indeterminate).
	var lid uint64
	for id := uint64(1); id <= 3; id++ {
		if g.rep(id) == l {
			lid = id
		}
	}
	g.net.partition([]uint64{lid}, others(lid))
	a = wait(send(l, "b1"))
	require.ErrorIs(t, a.err, context.DeadlineExceeded)
	g.net.heal()
}

// TestReadIndexRefusesStaleLeader: a read barrier (raft ReadIndex, then the
// apply) on a leader cut off from the quorum does not complete, not even
// before it notices and steps down; once healed, a barrier on it (now a
// follower) reflects the commit the new leader made meanwhile.
func TestReadIndexRefusesStaleLeader(t *testing.T) {
	g := newGroup(t, 11)
	l := g.leader(5 * time.Second)
	createTopic(t, l, "T", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ms []*message.Message
	for i := 0; i < 20; i++ {
		ms = append(ms, testMsg("T", 0, fmt.Sprint("m", i)))
	}
	_, err := l.Send(ctx, ms)
	require.NoError(t, err)
	commit := func(r *Replica, off int64) {
		require.NoError(t, r.Exec(ctx, &store.Command{Op: store.OpAdvanceOffsets, Offsets: []store.OffsetCommit{{Group: "g", Topic: "T", QueueID: 0, Offset: off}}}))
	}
	// readOffset is what a linearizable offset query answers on r.
	readOffset := func(r *Replica, timeout time.Duration) (int64, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		idx, err := r.Node().ReadIndex(rctx)
		if err != nil {
			return 0, err
		}
		if err := r.Node().WaitApplied(rctx, idx); err != nil {
			return 0, err
		}
		off, _ := r.Store().ConsumerOffset("g", "T", 0)
		return off, nil
	}
	commit(l, 5)
	for id := uint64(1); id <= 3; id++ {
		off, err := readOffset(g.rep(id), 5*time.Second)
		require.NoError(t, err, "node %d", id)
		require.Equal(t, int64(5), off, "node %d", id)
	}

	old := l.cfg.ID
	g.net.partition([]uint64{old}, others(old))
	// At once, while the old leader still believes it leads.
	require.True(t, l.Node().IsLeader())
	_, err = readOffset(l, 150*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a leader without a quorum answered a read")

	var nl *Replica
	require.Eventually(t, func() bool {
		for _, id := range others(old) {
			if r := g.rep(id); r.Node().LeaderReady() {
				nl = r
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	commit(nl, 9)
	_, err = readOffset(l, 150*time.Millisecond)
	require.Error(t, err, "the cut-off node answered a read")
	off, _ := l.Store().ConsumerOffset("g", "T", 0)
	require.Equal(t, int64(5), off, "the cut-off node's own state is stale, which is why it must not answer")

	g.net.heal()
	require.Eventually(t, func() bool {
		off, err := readOffset(l, time.Second)
		return err == nil && off == 9
	}, 10*time.Second, 20*time.Millisecond)
}
