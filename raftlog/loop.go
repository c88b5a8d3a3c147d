package raftlog

// # The owner loop
//
// loop is the owner's side of a Core: everything a replica does between
// raft and the world, written once. Node drives it from its raft goroutine
// with real parts (a TCP transport, the wall clock, an applier goroutine);
// the simulator (sim_test.go) drives it from one goroutine with simulated
// ones (a scheduled network, a millisecond counter, an inline applier). So
// every simulated seed runs this code: the order of a Ready's steps, the
// wait for disk space and the hand-over to the applier.
//
// The environment is loopEnv plus the storage writer (logWriter): where
// messages go, what time it is, where the held-append timer and the
// applier live. Randomness is the Core's (CoreConfig.Rand) and the batch
// table's epoch, both injected.
//
// A Ready's work is resumable. When a write fails for lack of space
// (vfs.IsNoSpace) the loop returns errStalled and remembers where it was;
// the owner then waits as it likes (Node: a backoff timer, while it steps
// messages with stepWhileStalled, refuses new requests with refuse and
// keeps sweeping timeouts), calls ready again after stallWait, and the
// Ready goes on from the write that failed. Nothing is acknowledged,
// advanced or applied in between.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
)

// loopEnv is the owner loop's surroundings, apart from the storage.
type loopEnv interface {
	// send hands msgs to the transport; it must not block.
	send(msgs []*pb.Message)
	// now is the clock: request deadlines, stall durations.
	now() time.Time
	// armHeld starts the held-append timer (after d, the owner calls
	// loop.fireHeld) unless it runs already.
	armHeld(d time.Duration)
	// apply hands w to the applier: a commit index, with this node's
	// batches up to it, or a snapshot to install. For a snapshot it
	// returns once the applier has installed it, with its error.
	apply(w applyWork) error
	// sentEarly is called once a Ready's early messages are sent and
	// before its entries are written (Node lets the transport's writers
	// run before it blocks in the fsync).
	sentEarly()
}

// logWriter is the persistence the loop does: Storage's three writes.
type logWriter interface {
	SetHardState(hs *pb.HardState) error
	Append(ents []*pb.Entry) error
	SetConfState(cs *pb.ConfState) error
}

// errStalled is loop.ready's answer while a write waits for disk space.
var errStalled = errors.New("raftlog: waiting for disk space")

// The steps of a Ready, in order (Core's file comment).
const (
	phSend = iota
	phHardState
	phEntries
	phAfter
	phConf
	phApply
)

// loop is the owner loop of one Core (see the file comment). One goroutine
// calls it; stalled may be read by any.
type loop struct {
	core *Core
	st   logWriter
	env  loopEnv
	app  *applier
	reqs *batchTable
	log  *slog.Logger

	heldDelay time.Duration
	// fp are the failpoints on (Config.Failpoints): begin's hook for
	// ack-before-commit.
	fp failpoint.Set
	// persisted, if set, observes each Ready's append plus fsync.
	persisted func(time.Duration)
	// onConfChange, if set, sees each membership change applied to raft
	// and persisted, with its entry's index.
	onConfChange func(index uint64, cc *pb.ConfChangeV2, cs *pb.ConfState)
	// statusChanged, if set, is called when the role or hard state may
	// have changed.
	statusChanged func()

	// The Ready in progress: w, the step it is at, and within phConf the
	// next committed entry and the membership state to persist (set once
	// the entry's change is applied to raft).
	w      Work
	busy   bool
	phase  int
	ci     int
	cc     *pb.ConfChangeV2
	cs     *pb.ConfState
	ackIdx uint64
	ackT   uint64

	stall   *stall
	stalled atomic.Bool
}

// stall is a wait for disk space: what failed, since when, how many tries
// and the wait before the next.
type stall struct {
	what  string
	start time.Time
	tries int
	wait  time.Duration
}

// ready does the work of every Ready the core has. It returns errStalled
// if a write waits for disk space; calling it again (after stallWait)
// retries that write and goes on.
func (l *loop) ready() error {
	if l.busy {
		if err := l.work(); err != nil {
			return err
		}
	}
	for l.core.HasReady() {
		if err := l.do(l.core.Ready()); err != nil {
			return err
		}
	}
	return nil
}

// do does w, a Work just taken from the core (Core.Ready), and only that
// one; errStalled as ready.
func (l *loop) do(w Work) error {
	if l.busy {
		return errors.New("raftlog: a Ready is still in progress")
	}
	l.begin(w)
	return l.work()
}

func (l *loop) begin(w Work) {
	l.w, l.busy, l.phase, l.ci, l.cc, l.cs = w, true, phSend, 0, nil, nil
	l.ackIdx, l.ackT = 0, 0
	l.reqs.readyAt, l.reqs.sentAt = time.Time{}, time.Time{}
	if l.reqs.tracing > 0 {
		l.reqs.readyAt = time.Now()
	}
	if failpoint.On(l.fp, failpoint.AckBeforeCommit) {
		l.ackBeforeCommit(w.Entries)
	}
}

// work goes on with the current Ready from the step it is at.
func (l *loop) work() error {
	w := &l.w
	for {
		switch l.phase {
		case phSend:
			if l.core.HeldTimerArmed() {
				l.env.armHeld(l.heldDelay)
			}
			if len(w.Send) > 0 {
				l.env.send(w.Send)
				if l.reqs.tracing > 0 {
					l.reqs.sentAt = time.Now()
				}
				if len(w.Entries) > 0 {
					l.env.sentEarly()
				}
			}
			if w.Snapshot != nil {
				md := w.Snapshot.GetMetadata()
				if err := l.env.apply(applyWork{snap: w.Snapshot}); err != nil {
					return fmt.Errorf("raftlog: install snapshot at %d: %w", md.GetIndex(), err)
				}
				l.log.Info("raftlog: installed snapshot", "index", md.GetIndex(), "term", md.GetTerm())
				l.reqs.snapshotted(md.GetIndex())
			}
			l.phase = phHardState
		case phHardState:
			// A new term or vote is made durable before the entries of
			// this Ready, so that on disk the term is never behind the
			// log (OpenStorage checks it).
			if w.HardState != nil {
				if err := l.persist("term and vote", func() error { return l.st.SetHardState(w.HardState) }); err != nil {
					return err
				}
			}
			l.phase = phEntries
		case phEntries:
			if len(w.Entries) > 0 {
				var start time.Time
				if l.persisted != nil {
					start = time.Now()
				}
				if err := l.persist("entries", func() error { return l.st.Append(w.Entries) }); err != nil {
					return err
				}
				if l.persisted != nil {
					l.persisted(time.Since(start))
				}
				l.core.Appended(w.Entries)
				l.reqs.appended(w.Entries)
			}
			l.phase = phAfter
		case phAfter:
			if len(w.After) > 0 {
				l.env.send(w.After)
			}
			l.phase = phConf
		case phConf:
			for ; l.ci < len(w.Committed); l.ci++ {
				if l.cs == nil {
					cc, cs, err := l.core.ApplyConfChange(w.Committed[l.ci])
					if err != nil {
						return err
					}
					if cs == nil {
						continue
					}
					l.cc, l.cs = cc, cs
				}
				if err := l.persist("membership", func() error { return l.st.SetConfState(l.cs) }); err != nil {
					return err
				}
				if l.onConfChange != nil {
					l.onConfChange(w.Committed[l.ci].GetIndex(), l.cc, l.cs)
				}
				l.cc, l.cs = nil, nil
			}
			l.phase = phApply
		case phApply:
			if w.Commit > 0 {
				bs := l.reqs.take(w.Commit)
				stampCommitted(bs)
				if err := l.env.apply(applyWork{index: w.Commit, term: w.CommitTerm, batches: bs}); err != nil {
					return err
				}
			}
			if l.ackIdx > 0 {
				if err := l.env.apply(applyWork{index: l.ackIdx, term: l.ackT, batches: l.reqs.take(l.ackIdx)}); err != nil {
					return err
				}
			}
			l.core.Advance()
			l.busy = false
			if w.StatusChanged && l.statusChanged != nil {
				l.statusChanged()
			}
			l.w = Work{}
			return nil
		}
	}
}

// stampCommitted stamps the traced batches among bs as committed.
func stampCommitted(bs []*Batch) {
	var now time.Time
	for _, b := range bs {
		if b.traced {
			if now.IsZero() {
				now = time.Now()
			}
			b.stampAll(StageCommitted, now)
		}
	}
}

// stepped sees a message the owner stepped: a follower's acknowledgement
// of appends stamps the traced batches it covers.
func (l *loop) stepped(m *pb.Message) {
	if len(l.reqs.acking) > 0 && m.GetType() == pb.MessageType_MsgAppResp && !m.GetReject() {
		l.reqs.acked(m.GetFrom(), m.GetIndex())
	}
}

// persist runs write, a persistence step of the Ready. If it fails for
// lack of space it starts (or goes on with) a stall and returns
// errStalled: the Ready is neither advanced nor acknowledged meanwhile, so
// a follower stops answering appends (raft tolerates a silent member) and
// a leader stops heartbeating and loses its leadership to a member that
// can write. The stall is logged once when it starts and once when it
// ends. Other errors return as they are.
func (l *loop) persist(what string, write func() error) error {
	err := write()
	if vfs.IsNoSpace(err) {
		if l.stall == nil {
			l.stall = &stall{what: what, start: l.env.now(), tries: 1, wait: 10 * time.Millisecond}
			l.stalled.Store(true)
			l.log.Error("raftlog: disk full: cannot persist; not acknowledging until space frees", "what", what, "err", err)
		} else {
			l.stall.tries++
			l.stall.wait = min(2*l.stall.wait, time.Second)
		}
		return fmt.Errorf("%w: %s: %w", errStalled, what, err)
	}
	if err != nil {
		return err
	}
	if s := l.stall; s != nil {
		l.log.Info("raftlog: disk space available again: persisted", "what", s.what,
			"stalled", l.env.now().Sub(s.start).Round(time.Millisecond), "tries", s.tries+1)
		l.stall = nil
		l.stalled.Store(false)
	}
	return nil
}

// stallWait is how long the owner waits before it calls ready again: from
// 10 ms, doubling with each failed try, up to 1 s.
func (l *loop) stallWait() time.Duration {
	if l.stall == nil {
		return 0
	}
	return l.stall.wait
}

// stepWhileStalled steps a message received while a write waits for disk
// space (Core.StepWhileStalled).
func (l *loop) stepWhileStalled(m *pb.Message) {
	l.core.StepWhileStalled(m)
	if l.statusChanged != nil {
		l.statusChanged()
	}
}

// refuse fails a request that arrives while a write waits for disk space:
// new requests are refused rather than left queued behind the stall.
func (l *loop) refuse(q *Request) {
	q.Waiter.Fail(fmt.Errorf("%w: the node cannot persist (disk full)", ErrDropped))
}

// tick advances raft's clock by one tick and sweeps the request table.
func (l *loop) tick() {
	l.core.Tick()
	l.sweep()
}

// sweep lets the request table time out what waited too long.
func (l *loop) sweep() { l.reqs.sweep(l.env.now(), l.app.applied.Load()) }

// propose packs reqs into entries and proposes them as one step, so that
// they share one Ready and one fsync. Raft's refusal fails them, and is
// returned.
func (l *loop) propose(reqs []*Request) error {
	ents, bs := l.reqs.pack(reqs, l.env.now())
	err := l.core.Propose(ents)
	if err != nil {
		l.reqs.dropped(bs, err)
	}
	return err
}

// fireHeld is the held-append timer firing: the held appends go out.
func (l *loop) fireHeld() {
	if msgs := l.core.FireHeld(); len(msgs) > 0 {
		l.env.send(msgs)
	}
}

// stop fails the requests still in the table (the owner is ending).
func (l *loop) stop() { l.reqs.stop(l.app.applied.Load()) }

type applyWork struct {
	index, term uint64
	batches     []*Batch // this node's entries up to index
	snap        *pb.Snapshot
	done        chan error
}

// applier applies commit indexes and installs snapshots, in order, to the
// state machine, and publishes the applied index. Node calls it from its
// applier goroutine, the simulator inline from the owner's.
type applier struct {
	sm StateMachine

	applied atomic.Uint64
	term    atomic.Uint64
	// changed is closed (and replaced) whenever the applied index moves.
	mu      sync.Mutex
	changed chan struct{}
}

func newApplier(sm StateMachine, applied, term uint64) *applier {
	a := &applier{sm: sm, changed: make(chan struct{})}
	a.applied.Store(applied)
	a.term.Store(term)
	return a
}

// do applies w: up to its commit index, or its snapshot.
func (a *applier) do(w applyWork) error {
	if w.snap != nil {
		if err := a.sm.Restore(w.snap); err != nil {
			return err
		}
		md := w.snap.GetMetadata()
		a.set(md.GetIndex(), md.GetTerm())
		return nil
	}
	if w.index <= a.applied.Load() {
		// Applied already (the ack-before-commit mutant applies early).
		for _, b := range w.batches {
			b.Fail(fmt.Errorf("entry %d applied before its commit was handed over: %w", b.Index, ErrOutcomeUnknown))
		}
		return nil
	}
	if err := a.sm.Apply(w.index, w.batches); err != nil {
		return fmt.Errorf("raftlog: apply up to %d: %w", w.index, err)
	}
	a.set(w.index, w.term)
	return nil
}

// set publishes a new applied index and wakes its waiters.
func (a *applier) set(index, term uint64) {
	a.applied.Store(index)
	a.term.Store(term)
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// wait returns a channel closed when the applied index next moves.
func (a *applier) wait() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// coalesceApply replaces each run of commit indexes in ws by its last (the
// newest: applying up to it applies the others), in place; snapshots stay
// where they are. The applier goroutine calls it on what it found queued,
// so that commits queued while an Apply runs become one Apply.
func coalesceApply(ws []applyWork) []applyWork {
	out := ws[:0]
	for _, w := range ws {
		if k := len(out); k > 0 && w.snap == nil && out[k-1].snap == nil {
			w.batches = append(out[k-1].batches, w.batches...)
			out[k-1] = w
			continue
		}
		out = append(out, w)
	}
	return out
}
