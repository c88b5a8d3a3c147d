package raftlog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/internal/failpoint"
)

// Transport carries raft messages to peers. Send must not block.
type Transport interface {
	Send(msgs []*pb.Message)
}

// StateMachine is the application the committed log is applied to. Both
// methods are called from the node's applier goroutine, in log order.
type StateMachine interface {
	// Apply applies every committed entry up to and including index and
	// answers the requests of batches, the entries this node proposed
	// whose index is at most index: a batch whose index now holds an entry
	// with another id was overwritten (fail it with ErrLost).
	Apply(index uint64, batches []*Batch) error
	// Restore installs a snapshot from the leader. It must make the log
	// continue after the snapshot (Storage.ApplySnapshot) and replace the
	// application state with the snapshot's.
	Restore(snap *pb.Snapshot) error
}

// Defaults of Timing's fields. They are declared here only: cluster passes
// Timing through as it is, and the command line's flags default to these.
const (
	DefaultTickInterval      = 50 * time.Millisecond
	DefaultElectionTick      = 10
	DefaultHeartbeatTick     = 2
	DefaultCommitNotifyDelay = 2 * time.Millisecond
	// DefaultWaitTimeout is Config.WaitTimeout's default.
	DefaultWaitTimeout = 5 * time.Second
)

// Timing is the node's timing. Zero fields take the defaults above.
type Timing struct {
	// TickInterval is how often raft ticks; ElectionTick and
	// HeartbeatTick count ticks (an election timeout is ElectionTick to
	// twice that, randomised by raft).
	TickInterval  time.Duration
	ElectionTick  int
	HeartbeatTick int
	// CommitNotifyDelay (negative: none) is how long a leader holds back
	// an append that carries no entries, only a new commit index, for a
	// follower it is replicating to. Raft sends one to every follower each
	// time the commit index moves, and each is answered, which doubles the
	// messages per send when sends come one at a time. If an append with
	// entries goes to that follower first, it carries the same commit
	// index or a later one and the held one is dropped, since the newer
	// message tells the follower at least as much;
	// otherwise it is sent when the delay ends. So a follower learns of a
	// commit at most this much later; the leader's own commit, and with it
	// every acknowledgement, is not delayed.
	CommitNotifyDelay time.Duration
}

func (t *Timing) fill() {
	if t.TickInterval <= 0 {
		t.TickInterval = DefaultTickInterval
	}
	if t.ElectionTick <= 0 {
		t.ElectionTick = DefaultElectionTick
	}
	if t.HeartbeatTick <= 0 {
		t.HeartbeatTick = DefaultHeartbeatTick
	}
	if t.CommitNotifyDelay == 0 {
		t.CommitNotifyDelay = DefaultCommitNotifyDelay
	}
}

// Config configures a Node.
type Config struct {
	ID      uint64
	Storage *Storage
	SM      StateMachine
	// Applied is the index the state machine has applied (entries up to it
	// are not applied again).
	Applied uint64
	// Bootstrap lists the initial voters, used only when the storage is
	// empty. Every node of a new group must pass the same list in the same
	// order: the bootstrap entries are part of the replicated log.
	Bootstrap []raft.Peer
	// Timing is raft's timing: ticks and the commit-notify delay.
	Timing
	// Clock is the source of ticks and timers (RealClock when nil).
	Clock Clock
	// Rand is the source of the core's read ids and of BatchEpoch (a
	// generator seeded from crypto/rand when nil).
	Rand Rand
	// MaxSizePerMsg (default 1 MiB) and MaxInflightMsgs (default 256) are
	// raft's flow control per follower.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// MaxProposalBytes bounds the requests collected into one proposal
	// step (default 4 MiB), MaxBatchBytes the data of requests packed into
	// one entry (default 1 MiB).
	MaxProposalBytes int
	MaxBatchBytes    int
	// Framing is the entry format requests are packed in (see Request).
	Framing Framing
	// WaitTimeout is how long a request with Expires waits before it fails
	// with a deadline error (DefaultWaitTimeout when zero).
	WaitTimeout time.Duration
	// BatchEpoch is the high half of this node's batch ids (random when
	// zero): ids differ from those of entries written before a restart.
	BatchEpoch uint64
	// PersistDuration, if set, observes the time of each Ready's append
	// plus fsync.
	PersistDuration func(time.Duration)
	// Failpoints are the known-bad behaviours on (internal/failpoint; only
	// in builds with -tags mutant): here ack-before-commit, which makes a
	// leader apply (and so acknowledge) the entries it has appended before
	// a quorum holds them. The zero value is the correct node.
	Failpoints failpoint.Set
	// OnConfChange, if set, is called from the raft goroutine after a
	// membership change has been applied to raft.
	OnConfChange func(cc *pb.ConfChangeV2, cs *pb.ConfState)
	Logger       *slog.Logger
}

// ErrStopped is returned by a stopped node.
var ErrStopped = errors.New("raftlog: node stopped")

// Status is a copy of the node's raft state.
type Status struct {
	ID          uint64   `json:"id"`
	Term        uint64   `json:"term"`
	Vote        uint64   `json:"vote"`
	Leader      uint64   `json:"leader"`
	Role        string   `json:"role"`
	Commit      uint64   `json:"commit"`
	Applied     uint64   `json:"applied"`
	AppliedTerm uint64   `json:"appliedTerm"`
	LastIndex   uint64   `json:"lastIndex"`
	Voters      []uint64 `json:"voters"`
	// Learners are the members that receive the log but do not vote
	// (raft learners): nodes added and not yet caught up.
	Learners []uint64          `json:"learners,omitempty"`
	Progress map[uint64]uint64 `json:"progress,omitempty"` // leader only: match index per node
	// Active (leader only) lists the nodes heard from within the last
	// election timeout, the leader itself included.
	Active     []uint64 `json:"active,omitempty"`
	Transferee uint64   `json:"transferee,omitempty"`
}

// Node runs one raft replica: the owner goroutine of a Core (core.go),
// which ticks it, steps messages and proposals into it and does the work
// of each Ready (persist with one fsync for all its entries, send), plus an
// applier goroutine that applies the commit index it hands over.
type Node struct {
	cfg  Config
	log  *slog.Logger
	core *Core

	propc  chan *Request
	recvc  chan *pb.Message
	ctlc   chan func()
	tickc  chan time.Duration
	applyc chan applyWork
	stopc  chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	// loop is the owner loop (loop.go) the raft goroutine drives; app
	// the applier its applier goroutine runs.
	loop *loop
	app  *applier

	status atomic.Pointer[Status]
	err    atomic.Pointer[error]
	// tick is the current tick interval in nanoseconds.
	tick     atomic.Int64
	stopOnce sync.Once

	// heldTimer is the timer of the core's held commit-only appends
	// (Config.CommitNotifyDelay), owned by the raft goroutine; heldc is
	// its channel while it is armed, nil otherwise.
	heldTimer Timer
	heldc     <-chan time.Time

	// transport is set by Start, before the raft goroutine runs.
	transport Transport
}

func (c *Config) fill() {
	c.Timing.fill()
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Rand == nil {
		var seed [32]byte
		_, _ = rand.Read(seed[:])
		c.Rand = mrand.New(mrand.NewChaCha8(seed))
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs <= 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxProposalBytes <= 0 {
		c.MaxProposalBytes = 4 << 20
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 1 << 20
	}
	if c.Framing.AppendHeader == nil {
		c.Framing = Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize}
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	for c.BatchEpoch&^0xFFFFFFFF == 0 {
		c.BatchEpoch = c.Rand.Uint64()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// NewNode creates a node over its storage; Start runs it.
func NewNode(cfg Config) (*Node, error) {
	cfg.fill()
	core, err := NewCore(cfg.coreConfig())
	if err != nil {
		return nil, err
	}
	var appTerm uint64
	if cfg.Applied > 0 {
		if t, err := cfg.Storage.Term(cfg.Applied); err == nil {
			appTerm = t
		}
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger,
		core:   core,
		app:    newApplier(cfg.SM, cfg.Applied, appTerm),
		propc:  make(chan *Request, 8192),
		recvc:  make(chan *pb.Message, 4096),
		ctlc:   make(chan func(), 64),
		tickc:  make(chan time.Duration, 1),
		applyc: make(chan applyWork, 1024),
		stopc:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	n.loop = &loop{
		core: core, st: cfg.Storage, env: nodeEnv{n}, app: n.app, log: cfg.Logger,
		reqs:          newBatchTable(cfg.Framing, cfg.MaxBatchBytes, cfg.WaitTimeout, cfg.BatchEpoch),
		heldDelay:     cfg.CommitNotifyDelay,
		fp:            cfg.Failpoints,
		persisted:     cfg.PersistDuration,
		statusChanged: n.publishStatus,
	}
	if f := cfg.OnConfChange; f != nil {
		n.loop.onConfChange = func(_ uint64, cc *pb.ConfChangeV2, cs *pb.ConfState) { f(cc, cs) }
	}
	n.publishStatus()
	return n, nil
}

// coreConfig is the Core's part of c (filled).
func (c *Config) coreConfig() CoreConfig {
	return CoreConfig{
		ID: c.ID, Storage: c.Storage, Applied: c.Applied, Bootstrap: c.Bootstrap,
		ElectionTick: c.ElectionTick, HeartbeatTick: c.HeartbeatTick, HoldCommits: c.CommitNotifyDelay >= 0,
		MaxSizePerMsg: c.MaxSizePerMsg, MaxInflightMsgs: c.MaxInflightMsgs, Rand: c.Rand, Logger: c.Logger,
	}
}

// nodeEnv is the owner loop's environment in the broker: the transport,
// the node's clock, its held-append timer and its applier goroutine.
type nodeEnv struct{ n *Node }

// send hands msgs to the transport. While no request or message waits
// for the raft goroutine (one send at a time), a transport that can
// (nowSender) writes them on this goroutine when its writers are idle,
// rather than waking a writer goroutine and waiting for it to run; under
// load the writers keep the system calls off the raft goroutine.
func (e nodeEnv) send(msgs []*pb.Message) {
	if ns, ok := e.n.transport.(nowSender); ok && len(e.n.propc) == 0 && len(e.n.recvc) == 0 {
		ns.SendNow(msgs)
		return
	}
	e.n.transport.Send(msgs)
}

// nowSender is a Transport that can write messages on the caller's
// goroutine (transport.Transport.SendNow).
type nowSender interface{ SendNow(msgs []*pb.Message) }

func (e nodeEnv) now() time.Time { return e.n.cfg.Clock.Now() }

func (e nodeEnv) armHeld(d time.Duration) {
	n := e.n
	if n.heldc != nil {
		return
	}
	if n.heldTimer == nil {
		n.heldTimer = n.cfg.Clock.NewTimer(d)
	} else {
		n.heldTimer.Reset(d)
	}
	n.heldc = n.heldTimer.Chan()
}

func (e nodeEnv) apply(w applyWork) error {
	n := e.n
	if w.snap != nil {
		w.done = make(chan error, 1)
	}
	select {
	case n.applyc <- w:
	case <-n.stopc:
		return ErrStopped
	}
	if w.snap == nil {
		return nil
	}
	select {
	case err := <-w.done:
		return err
	case <-n.stopc:
		return ErrStopped
	}
}

// sentEarly lets the transport's writers, now runnable on this P, put
// the appends on the wire before the raft goroutine blocks in the fsync,
// rather than after a thread steals them or the fsync returns (one send
// at a time: p50 -35..-55 us on 2 vCPUs). A transport that wrote them
// itself (transport.Transport, when its writers were idle) has nothing
// waiting, and then the raft goroutine goes straight on.
func (e nodeEnv) sentEarly() {
	if q, ok := e.n.transport.(queuer); ok && !q.Queued() {
		return
	}
	runtime.Gosched()
}

// queuer is a Transport that says whether messages it took wait in its
// queues (transport.Transport).
type queuer interface{ Queued() bool }

// Start runs the raft and applier goroutines, sending raft's messages
// through t. The transport is given here rather than in Config so that it
// can be built after the node (its handlers are the node's Step and
// reports) without a construction cycle.
func (n *Node) Start(t Transport) {
	n.transport = t
	n.wg.Add(2)
	go n.run()
	go n.applier()
}

// Stop stops both goroutines and waits for them. The storage stays open.
func (n *Node) Stop() {
	n.stopOnce.Do(func() { close(n.stopc) })
	n.wg.Wait()
}

// Stopping is closed as soon as the node is asked to stop (Stop or a fatal
// error), before its goroutines have ended: for work the applier waits on.
func (n *Node) Stopping() <-chan struct{} { return n.stopc }

// Done is closed when the node has stopped, by Stop or by a fatal error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the fatal error that stopped the node, if any.
func (n *Node) Err() error {
	if p := n.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *Node) fail(err error) {
	if n.err.CompareAndSwap(nil, &err) {
		n.log.Error("raftlog: node stopping on error", "err", err)
	}
	n.stopOnce.Do(func() { close(n.stopc) })
}

// Submit queues a request (see Request). It blocks while the queue is
// full. An error means the request was not queued and its Waiter is never
// called; otherwise it gets its outcome, failures from the node and
// success from the state machine.
func (n *Node) Submit(ctx context.Context, q *Request) error {
	select {
	case <-n.stopc:
		return ErrStopped
	default:
	}
	select {
	case n.propc <- q:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return ErrStopped
	}
	// The owner drains the queue after it closes done; a request queued
	// after that drain is failed here.
	select {
	case <-n.done:
		n.dropQueued()
	default:
	}
	return nil
}

// Step hands a message from a peer to raft. It blocks while the receive
// queue is full (back-pressure on the peer's stream).
func (n *Node) Step(m *pb.Message) {
	select {
	case n.recvc <- m:
	case <-n.stopc:
	}
}

// control runs f on the raft goroutine and waits for it.
func (n *Node) control(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case n.ctlc <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return ErrStopped
	}
}

// TransferLeader asks the current leader (this node) to hand leadership to
// to; it returns once raft has taken the request. Callers poll Status to
// see it happen. A transfer to this node itself is a no-op; one to a node
// that is not a voting member is refused (raft would drop it silently).
func (n *Node) TransferLeader(ctx context.Context, to uint64) error {
	var err error
	if cerr := n.control(ctx, func() { err = n.core.TransferLeader(to) }); cerr != nil {
		return cerr
	}
	return err
}

// ProposeConfChange proposes a membership change.
func (n *Node) ProposeConfChange(ctx context.Context, cc *pb.ConfChangeV2) error {
	var err error
	if cerr := n.control(ctx, func() { err = n.core.ProposeConfChange(cc) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("raftlog: propose membership change: %w", err)
	}
	return nil
}

// Campaign makes this node start an election (tests, preferred leader).
func (n *Node) Campaign(ctx context.Context) error {
	var err error
	if cerr := n.control(ctx, func() { err = n.core.Campaign() }); cerr != nil {
		return cerr
	}
	return err
}

// ReadIndex returns an index such that a state machine that has applied
// it reflects every write committed before ReadIndex was called: raft's
// read-only safe mode (thesis §6.4), in which the leader records its commit
// index and confirms with a heartbeat round that a quorum still follows it.
// A follower asks the leader. Without a leader, or if leadership changes
// before the quorum answers, the request is lost and ReadIndex returns
// when ctx ends. Use it before answering a read that must not be stale
// (WaitApplied then waits for the state machine).
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	ch := make(chan uint64, 1)
	var id uint64
	if err := n.control(ctx, func() {
		id = n.core.ReadIndex(func(index uint64) { ch <- index })
	}); err != nil {
		return 0, err
	}
	forget := func() {
		// The raft goroutine may be gone; forgetting is best effort.
		select {
		case n.ctlc <- func() { n.core.ForgetRead(id) }:
		default:
		}
	}
	select {
	case idx := <-ch:
		return idx, nil
	case <-ctx.Done():
		forget()
		return 0, fmt.Errorf("raftlog: read index: %w", ctx.Err())
	case <-n.stopc:
		return 0, ErrStopped
	}
}

// WaitApplied blocks until the state machine has applied index, ctx ends
// or the node stops.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		ch := n.app.wait()
		if n.app.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raftlog: wait for applied index %d (at %d): %w", index, n.app.applied.Load(), ctx.Err())
		case <-n.stopc:
			return ErrStopped
		}
	}
}

// ReportUnreachable tells raft a message to id could not be sent.
func (n *Node) ReportUnreachable(id uint64) {
	select {
	case n.ctlc <- func() { n.core.ReportUnreachable(id) }:
	default: // raft finds out by itself; never block the transport
	}
}

// ReportSnapshot tells raft whether a snapshot reached id.
func (n *Node) ReportSnapshot(id uint64, failure bool) {
	select {
	case n.ctlc <- func() { n.core.ReportSnapshot(id, failure) }:
	case <-n.stopc:
	}
}

// Status returns the node's state as of its last loop iteration.
func (n *Node) Status() Status {
	st := *n.status.Load()
	st.Applied, st.AppliedTerm = n.app.applied.Load(), n.app.term.Load()
	return st
}

// Applied returns the state machine's applied index.
func (n *Node) Applied() uint64 { return n.app.applied.Load() }

// LeaderReady reports whether this node leads and has applied everything
// committed before its term began (it has applied an entry of its own
// term), so its state machine answers as the group would. A leader whose
// raft goroutine waits for disk space (DiskStalled) is not ready: it
// cannot replicate, and the others are about to elect a new leader.
func (n *Node) LeaderReady() bool {
	t := n.core.LeaderTerm()
	return t != 0 && n.app.term.Load() == t && n.app.applied.Load() >= n.core.FirstOwnIndex() && !n.loop.stalled.Load()
}

// IsLeader reports whether this node currently believes it leads.
func (n *Node) IsLeader() bool { return n.core.LeaderTerm() != 0 }

func (n *Node) publishStatus() { n.status.Store(n.core.Status()) }

// run is the owner goroutine: it ticks the core, steps messages into it,
// packs and proposes queued requests, does each Ready's work and tracks
// the batches it proposed until they are answered.
func (n *Node) run() {
	defer n.wg.Done()
	defer n.exit()
	defer n.recoverLostLog()
	ticker := n.cfg.Clock.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	n.tick.Store(int64(n.cfg.TickInterval))
	statusEvery := 0
	for {
		select {
		case <-ticker.Chan():
			n.loop.tick()
			if statusEvery++; statusEvery%4 == 0 {
				n.publishStatus()
			}
		case m := <-n.recvc:
			n.step(m)
			for i := 0; i < 1024; i++ {
				select {
				case m := <-n.recvc:
					n.step(m)
					continue
				default:
				}
				break
			}
		case q := <-n.propc:
			n.propose(q)
		case f := <-n.ctlc:
			f()
		case d := <-n.tickc:
			ticker.Reset(d)
		case <-n.heldc:
			n.heldc = nil
			n.loop.fireHeld()
		case <-n.stopc:
			return
		}
		err := n.loop.ready()
		if errors.Is(err, errStalled) {
			err = n.waitSpace()
		}
		if err != nil {
			n.fail(err)
			return
		}
	}
}

func (n *Node) step(m *pb.Message) {
	n.core.Step(m)
	n.loop.stepped(m)
}

// ErrLogLost stops a node whose log lacks entries the group has already
// committed on it: raft's durability rule was broken underneath it (its
// data directory wiped, replaced or restored from an older copy).
var ErrLogLost = errors.New("raftlog: this node lost log entries the group had committed on it")

// recoverLostLog turns raft's panic at a leader's commit index beyond this
// node's log into ErrLogLost with what the operator can do about it, so
// that the node stops with an error instead of a crash. Any other panic
// goes on.
func (n *Node) recoverLostLog() {
	r := recover()
	if r == nil {
		return
	}
	msg := fmt.Sprint(r)
	if !strings.Contains(msg, "is out of range [lastIndex(") {
		panic(r)
	}
	n.fail(fmt.Errorf("%w (%s): raft cannot repair that in place; remove the node from the group (raftmq admin node remove %d), empty its data directory, add it back (raftmq admin node add ID=CLIENT/RAFT) and start it with --join",
		ErrLogLost, msg, n.cfg.ID))
}

// exit ends the owner goroutine: requests still queued fail with
// ErrStopped, as do proposed entries never persisted here; entries
// persisted but not applied may yet commit (on another node), so theirs
// fail with ErrOutcomeUnknown.
func (n *Node) exit() {
	close(n.done)
	n.dropQueued()
	n.loop.stop()
}

// propose collects the queued requests (up to MaxProposalBytes) and packs
// them into entries, proposed in one MsgProp so that they share one Ready
// and one fsync.
func (n *Node) propose(first *Request) {
	reqs := []*Request{first}
	size := len(first.Data)
	for size < n.cfg.MaxProposalBytes {
		select {
		case q := <-n.propc:
			reqs = append(reqs, q)
			size += len(q.Data)
			continue
		default:
		}
		break
	}
	_ = n.loop.propose(reqs) // a refusal has failed them
}

// dropQueued fails the requests still queued.
func (n *Node) dropQueued() {
	for {
		select {
		case q := <-n.propc:
			q.Waiter.Fail(ErrStopped)
		default:
			return
		}
	}
}

// waitSpace waits while the loop's Ready waits for disk space (loop.go),
// retrying it with the loop's backoff until it goes on or the node stops.
// Meanwhile messages are stepped (Core.StepWhileStalled), queued requests
// are refused (ErrDropped) and the proposed ones still time out; raft does
// not tick and control calls wait. DiskStalled reports the stall.
func (n *Node) waitSpace() error {
	t := n.cfg.Clock.NewTimer(n.loop.stallWait())
	defer t.Stop()
	sweep := n.cfg.Clock.NewTicker(n.cfg.WaitTimeout / 10)
	defer sweep.Stop()
	for {
		select {
		case <-n.stopc:
			return ErrStopped
		case m := <-n.recvc:
			n.loop.stepWhileStalled(m)
			continue
		case q := <-n.propc:
			n.loop.refuse(q)
			continue
		case <-sweep.Chan():
			n.loop.sweep()
			continue
		case <-t.Chan():
		}
		err := n.loop.ready()
		if !errors.Is(err, errStalled) {
			return err
		}
		t.Reset(n.loop.stallWait())
	}
}

// DiskStalled reports whether the raft goroutine is waiting for space to
// persist a Ready (see waitSpace).
func (n *Node) DiskStalled() bool { return n.loop.stalled.Load() }

// LeaderChanges returns how many leaders this node has learnt of since it
// started: one per term in which it knew a leader.
func (n *Node) LeaderChanges() uint64 { return n.core.LeaderChanges() }

// applier applies commit indexes in order, coalescing queued ones
// (coalesceApply).
func (n *Node) applier() {
	defer n.wg.Done()
	var batch []applyWork
	for {
		var w applyWork
		select {
		case w = <-n.applyc:
		case <-n.stopc:
			return
		}
		batch = append(batch[:0], w)
		if w.snap == nil {
			// Take what is queued behind it, up to a snapshot.
		drain:
			for {
				select {
				case w2 := <-n.applyc:
					batch = append(batch, w2)
					if w2.snap != nil {
						break drain
					}
				default:
					break drain
				}
			}
		}
		ws := coalesceApply(batch)
		for i, w := range ws {
			err := n.app.do(w)
			if w.snap != nil {
				w.done <- err // the owner loop waits for it
			} else if err != nil {
				n.fail(err)
				if i+1 < len(ws) && ws[i+1].snap != nil {
					ws[i+1].done <- err
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// slogRaftLogger adapts slog to raft.Logger. etcd raft's Info lines are
// its election chatter (votes asked, granted, rejected, terms changed):
// they go to DEBUG, as the node logs each role change it sees at INFO
// itself ("raftlog: role").
type slogRaftLogger struct{ l *slog.Logger }

func (s *slogRaftLogger) Debug(v ...any)              { s.l.Debug(fmt.Sprint(v...)) }
func (s *slogRaftLogger) Debugf(f string, v ...any)   { s.l.Debug(fmt.Sprintf(f, v...)) }
func (s *slogRaftLogger) Error(v ...any)              { s.l.Error(fmt.Sprint(v...)) }
func (s *slogRaftLogger) Errorf(f string, v ...any)   { s.l.Error(fmt.Sprintf(f, v...)) }
func (s *slogRaftLogger) Info(v ...any)               { s.l.Debug(fmt.Sprint(v...)) }
func (s *slogRaftLogger) Infof(f string, v ...any)    { s.l.Debug(fmt.Sprintf(f, v...)) }
func (s *slogRaftLogger) Warning(v ...any)            { s.l.Warn(fmt.Sprint(v...)) }
func (s *slogRaftLogger) Warningf(f string, v ...any) { s.l.Warn(fmt.Sprintf(f, v...)) }
func (s *slogRaftLogger) Fatal(v ...any)              { s.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (s *slogRaftLogger) Fatalf(f string, v ...any)   { s.Fatal(fmt.Sprintf(f, v...)) }
func (s *slogRaftLogger) Panic(v ...any)              { s.Fatal(v...) }
func (s *slogRaftLogger) Panicf(f string, v ...any)   { s.Fatal(fmt.Sprintf(f, v...)) }

// SetTickInterval changes how often raft ticks (the chaos harness's
// tick-rate skew: elections and heartbeats are counted in ticks, so a
// faster tick makes this node time out sooner). It takes effect at once.
func (n *Node) SetTickInterval(d time.Duration) {
	if d <= 0 {
		return
	}
	n.tick.Store(int64(d))
	select {
	case <-n.tickc:
	default:
	}
	select {
	case n.tickc <- d:
	case <-n.stopc:
	}
}

// Timing is the node's configured timing, defaults filled in (the tick
// interval as configured, not as SetTickInterval changed it).
func (n *Node) Timing() Timing { return n.cfg.Timing }

// TickInterval is the current tick interval.
func (n *Node) TickInterval() time.Duration {
	if d := n.tick.Load(); d > 0 {
		return time.Duration(d)
	}
	return n.cfg.TickInterval
}
