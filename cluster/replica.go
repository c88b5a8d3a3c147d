package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/commitlog/message"
	"github.com/raftmq/raftmq/internal/mutant"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// ReplicaConfig configures one node's replicated store.
type ReplicaConfig struct {
	ID uint64
	// Store configures the local store; Store.Dir is the node's data
	// directory (raft state goes to Dir/raft).
	Store store.Config
	// Bootstrap is the initial membership of a new group (same list, same
	// order, on every node); ignored once the node has state.
	Bootstrap []raft.Peer
	// Raft is raft's timing, passed to raftlog as it is (raftlog owns
	// the defaults).
	Raft raftlog.Timing
	// MaxBatchBytes bounds the messages packed into one entry (default 1 MiB).
	MaxBatchBytes int
	// WaitTimeout bounds how long a SendAsync waits for its entry to
	// apply (DefaultWaitTimeout when zero).
	WaitTimeout time.Duration
	// Metrics receives observations (may be nil).
	Metrics *Metrics
	// OnConfChange is called from the raft goroutine after a membership
	// change is applied to raft.
	OnConfChange func(cc *pb.ConfChangeV2, cs *pb.ConfState)
	Logger       *slog.Logger
}

// Replica is one node of a group: the store, the raft log over its
// commitlog, and the raft node. Send and Exec replicate; reads go to Store.
type Replica struct {
	cfg  ReplicaConfig
	log  *slog.Logger
	st   *store.Store
	rs   *raftlog.Storage
	node *raftlog.Node
	// started is node once OpenReplica made it, for the store's retention
	// loop, which runs from store.Open on.
	started atomic.Pointer[raftlog.Node]
	pend    *pending
	sendc   chan *sendReq
	epoch   uint64
	seq     atomic.Uint64
	stopc   chan struct{}
	wg      sync.WaitGroup
	met     *Metrics
}

// sendReq is one request for the batcher: message records or a command.
type sendReq struct {
	records []byte // encoded records, for messages
	count   int
	cmd     []byte // command JSON payload, for commands; else an internal entry's payload
	kind    byte   // cmd's entry kind: store.KindCommand when 0
	w       *waiter
}

const pendingSnapName = "snapshot.pending"

// DefaultWaitTimeout is ReplicaConfig.WaitTimeout's default, and so
// Config.SendTimeout's.
const DefaultWaitTimeout = 5 * time.Second

// OpenReplica opens the store and raft state in cfg.Store.Dir.
func OpenReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 1 << 20
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.Store.FS == nil {
		cfg.Store.FS = vfs.Default()
	}
	r := &Replica{cfg: cfg, log: cfg.Logger, pend: newPending(), sendc: make(chan *sendReq, 8192), stopc: make(chan struct{}), met: cfg.Metrics}
	if r.met != nil {
		r.pend.onCommit = func(d time.Duration) { r.met.Commit.Observe(d.Seconds()) }
	}
	var eb [8]byte
	_, _ = rand.Read(eb[:])
	r.epoch = binary.BigEndian.Uint64(eb[:]) &^ 0xFFFFFFFF
	if r.epoch == 0 {
		r.epoch = 1 << 32
	}
	scfg := cfg.Store
	scfg.Logger = cfg.Logger
	// Retention goes through the raft storage, which records its
	// compaction point before segments go.
	scfg.Retention.Drop = func(keepFrom uint64) error {
		_, err := r.rs.Compact(keepFrom)
		return err
	}
	// A leader keeps the entries its live followers still need, so that
	// retention never turns a follower's catch-up into a snapshot install.
	// A follower not heard from within an election timeout does not hold
	// the log back (it gets a snapshot when it returns), and above the
	// disk's force-clean ratio the store ignores the floor.
	scfg.Retention.Floor = func() uint64 {
		n := r.started.Load()
		if n == nil {
			return 0 // nothing is deleted before raft runs
		}
		return retentionFloor(n.Status())
	}
	st, err := store.Open(scfg)
	if err != nil {
		return nil, err
	}
	r.st = st
	fs := scfg.FS
	r.rs, err = raftlog.OpenStorage(fs, vfs.Join(scfg.Dir, "raft"), st.Log())
	if err != nil {
		st.Close()
		return nil, err
	}
	r.rs.SnapshotData = st.Snapshot
	r.rs.UnsafeNoSync = mutant.Enabled && scfg.Mutants.VoteNotFsynced
	// A snapshot whose install was interrupted is installed again.
	if data, err := vfs.ReadFile(fs, vfs.Join(scfg.Dir, "raft", pendingSnapName)); err == nil {
		r.log.Warn("cluster: finishing an interrupted snapshot install")
		if err := r.installSnapshotData(data); err != nil {
			r.Close()
			return nil, err
		}
	}
	node, err := raftlog.NewNode(raftlog.Config{
		ID:                    cfg.ID,
		Storage:               r.rs,
		SM:                    r,
		Applied:               st.AppliedIndex(),
		Bootstrap:             cfg.Bootstrap,
		Timing:                cfg.Raft,
		OnAppend:              r.pend.appended,
		UnsafeAckBeforeCommit: mutant.Enabled && scfg.Mutants.AckBeforeCommit,
		OnConfChange:          cfg.OnConfChange,
		PersistDuration: func(d time.Duration) {
			if r.met != nil {
				r.met.Fsync.Observe(d.Seconds())
			}
		},
		Logger: cfg.Logger,
	})
	if err != nil {
		r.rs.Close()
		st.Close()
		return nil, err
	}
	r.node = node
	r.started.Store(node)
	return r, nil
}

// Start starts raft, sending its messages through t, and the batcher.
func (r *Replica) Start(t raftlog.Transport) {
	r.node.Start(t)
	r.wg.Add(2)
	go r.batcher()
	go r.janitor()
}

// Close stops raft and closes the store. Outstanding requests fail.
func (r *Replica) Close() error {
	select {
	case <-r.stopc:
	default:
		close(r.stopc)
	}
	r.st.StopWaiting() // an apply waiting for disk space must not hold up Stop
	if r.node != nil {
		r.node.Stop()
	}
	r.wg.Wait()
	for drained := false; !drained; {
		select {
		case q := <-r.sendc:
			q.w.finish(outcome{err: ErrStopping})
		default:
			drained = true
		}
	}
	r.pend.failAll(ErrStopping)
	var err error
	if r.rs != nil {
		err = r.rs.Close()
	}
	if cerr := r.st.Close(); err == nil {
		err = cerr
	}
	return err
}

// Node returns the raft node.
func (r *Replica) Node() *raftlog.Node { return r.node }

// Store returns the local store (committed data only).
func (r *Replica) Store() *store.Store { return r.st }

// Step hands a raft message from a peer to the node.
func (r *Replica) Step(m *pb.Message) { r.node.Step(m) }

// Apply implements raftlog.StateMachine.
func (r *Replica) Apply(index uint64) error {
	start := time.Now()
	rs, err := r.st.Apply(index)
	if r.met != nil {
		r.met.applied(start)
	}
	r.pend.applied(rs, start)
	return err
}

// Restore implements raftlog.StateMachine. The snapshot is written to a
// file first so that an install cut short by a crash is finished at the
// next start.
func (r *Replica) Restore(snap *pb.Snapshot) error {
	dir := vfs.Join(r.cfg.Store.Dir, "raft")
	data := encodeSnapFile(snap)
	if err := r.untilSpace("save snapshot", func() error {
		return vfs.WriteFileAtomic(r.cfg.Store.FS, dir, pendingSnapName, data)
	}); err != nil {
		return fmt.Errorf("cluster: save snapshot: %w", err)
	}
	// An install cut short is finished from the saved file, by this retry
	// or after a restart (OpenReplica).
	return r.untilSpace("install snapshot", func() error { return r.installSnapshotData(data) })
}

func (r *Replica) installSnapshotData(data []byte) error {
	snap, err := decodeSnapFile(data)
	if err != nil {
		return err
	}
	err = r.st.Restore(snap.GetData(), func(info store.SnapshotInfo) error {
		err := r.rs.ApplySnapshot(snap.GetMetadata(), info.Pos)
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil // recorded before the interruption
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: install snapshot: %w", err)
	}
	fs := r.cfg.Store.FS
	dir := vfs.Join(r.cfg.Store.Dir, "raft")
	if err := fs.Remove(vfs.Join(dir, pendingSnapName)); err != nil {
		return fmt.Errorf("cluster: remove installed snapshot: %w", err)
	}
	return fs.SyncDir(dir)
}

// Send replicates messages as part of one entry and returns where each
// landed once the entry is committed and applied. The messages are stamped
// (store timestamp and host) and checked first.
func (r *Replica) Send(ctx context.Context, msgs []*message.Message) ([]store.MessageResult, error) {
	recs, err := r.encodeSend(msgs)
	if err != nil {
		return nil, err
	}
	o, err := r.submit(ctx, &sendReq{records: recs, count: len(msgs), w: newWaiter(len(msgs))})
	return o.msgs, err
}

// SendAsync is Send for callers that must not block until commit: it
// returns once the messages are queued for replication, and done gets
// their results (or the error) later, on another goroutine; done must not
// block. When the entry is not applied within ReplicaConfig.WaitTimeout,
// done gets an error wrapping context.DeadlineExceeded: the outcome is
// then unknown, as for Send's context. It blocks only while the
// replication queue is full. An error return means done is never called.
func (r *Replica) SendAsync(msgs []*message.Message, done func([]store.MessageResult, error)) error {
	recs, err := r.encodeSend(msgs)
	if err != nil {
		return err
	}
	w := newAsyncWaiter(len(msgs), func(o outcome) { done(o.msgs, o.err) })
	select {
	case r.sendc <- &sendReq{records: recs, count: len(msgs), w: w}:
		return nil
	case <-r.stopc:
		return ErrStopping
	}
}

// encodeSend stamps and checks msgs and encodes them as records.
func (r *Replica) encodeSend(msgs []*message.Message) ([]byte, error) {
	if !r.node.IsLeader() {
		return nil, ErrNotLeader
	}
	est := 0
	for _, m := range msgs {
		est += len(m.Body) + len(m.Topic) + 256 // record header and typical properties
	}
	if err := r.checkSpace(est); err != nil {
		return nil, err
	}
	recs := make([]byte, 0, est)
	for i, m := range msgs {
		r.st.StoreStamp(m)
		if err := r.st.CheckMessage(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		var err error
		if recs, err = message.Append(recs, m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return recs, nil
}

// Exec replicates a command and returns its apply-time error.
func (r *Replica) Exec(ctx context.Context, c *store.Command) error {
	if !r.node.IsLeader() {
		return ErrNotLeader
	}
	body, err := store.EncodeCommand(0, c)
	if err != nil {
		return err
	}
	_, err = r.submit(ctx, &sendReq{cmd: body[store.BodyHeaderSize:], w: newWaiter(0)})
	return err
}

// ProposeInternal replicates an entry the broker makes itself, of kind
// store.KindSchedule or store.KindTxn: payload is the entry after its body
// header, holding records records. It returns the records' results once
// applied, or the entry's apply-time error (store.ErrScheduleMoved,
// store.ErrTxnNotPending, ...).
func (r *Replica) ProposeInternal(ctx context.Context, kind byte, payload []byte, records int) ([]store.MessageResult, error) {
	if !r.node.IsLeader() {
		return nil, ErrNotLeader
	}
	if kind != store.KindSchedule && kind != store.KindTxn {
		return nil, fmt.Errorf("cluster: propose internal entry of kind %d", kind)
	}
	o, err := r.submit(ctx, &sendReq{cmd: payload, kind: kind, count: records, w: newWaiter(records)})
	return o.msgs, err
}

func (r *Replica) submit(ctx context.Context, q *sendReq) (outcome, error) {
	select {
	case r.sendc <- q:
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	case <-r.stopc:
		return outcome{}, ErrStopping
	}
	select {
	case o := <-q.w.ch:
		return o, o.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	case <-r.stopc:
		return outcome{}, ErrStopping
	}
}

func (r *Replica) nextBatchID() uint64 { return r.epoch | (r.seq.Add(1) & 0xFFFFFFFF) }

// batcher packs queued sends into entries: every request waiting when it
// looks is packed (messages into one entry up to MaxBatchBytes; each
// command alone), so that load turns into large entries rather than many.
func (r *Replica) batcher() {
	defer r.wg.Done()
	var next *sendReq
	var gathered []*sendReq
	for {
		q := next
		next = nil
		if q == nil {
			select {
			case q = <-r.sendc:
			case <-r.stopc:
				return
			}
		}
		if q.cmd != nil {
			id := r.nextBatchID()
			kind := q.kind
			if kind == 0 {
				kind = store.KindCommand
			}
			body := append(store.AppendBodyHeader(make([]byte, 0, store.BodyHeaderSize+len(q.cmd)), kind, id), q.cmd...)
			r.propose(&batch{id: id, waiters: []*waiter{q.w}}, body)
			continue
		}
		// Gather first, then copy every request's records once into a
		// body of the right size (appending as they come would regrow
		// and recopy a body of up to MaxBatchBytes several times).
		reqs := append(gathered[:0], q)
		size := len(q.records)
	gather:
		for size < r.cfg.MaxBatchBytes {
			select {
			case q2 := <-r.sendc:
				if q2.cmd != nil || size+len(q2.records) > r.cfg.MaxBatchBytes {
					next = q2
					break gather
				}
				reqs = append(reqs, q2)
				size += len(q2.records)
			default:
				break gather
			}
		}
		b := &batch{id: r.nextBatchID(), waiters: make([]*waiter, len(reqs))}
		body := store.AppendBodyHeader(make([]byte, 0, store.BodyHeaderSize+size), store.KindMessages, b.id)
		for i, q := range reqs {
			body = append(body, q.records...)
			b.waiters[i] = q.w
		}
		clear(reqs) // drop the references until the next batch
		gathered = reqs[:0]
		r.propose(b, body)
	}
}

func (r *Replica) propose(b *batch, body []byte) {
	b.created = time.Now()
	r.pend.add(b)
	if r.met != nil {
		r.met.BatchSize.Observe(float64(len(b.waiters)))
	}
	err := r.node.Propose(context.Background(), raftlog.Proposal{Data: body, Dropped: func(err error) {
		r.pend.drop(b.id, fmt.Errorf("%w: %w", ErrDropped, err))
	}})
	if err != nil {
		r.pend.drop(b.id, fmt.Errorf("%w: %w", ErrDropped, err))
	}
}

// janitor fails proposals that never reached the log (raft accepted them,
// then lost leadership before writing them), and times out asynchronous
// sends waiting longer than WaitTimeout (to a tenth of it).
func (r *Replica) janitor() {
	defer r.wg.Done()
	every := min(r.cfg.WaitTimeout/10, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	timedOut := fmt.Errorf("not applied within %v: %w", r.cfg.WaitTimeout, context.DeadlineExceeded)
	var lastExpire time.Time
	for {
		select {
		case now := <-t.C:
			r.pend.timeout(now.Add(-r.cfg.WaitTimeout), timedOut)
			if now.Sub(lastExpire) >= time.Second {
				lastExpire = now
				r.pend.expire(now.Add(-30*time.Second), ErrLost)
			}
		case <-r.stopc:
			return
		}
	}
}

// retentionFloor is the highest raft index retention may delete as far as
// replication is concerned: on a leader, just below the lowest match index
// of the recently active followers; elsewhere no bound (math.MaxUint64).
func retentionFloor(st raftlog.Status) uint64 {
	floor := uint64(math.MaxUint64)
	if st.Progress == nil {
		return floor
	}
	for _, id := range st.Active {
		if m, ok := st.Progress[id]; ok && id != st.ID && m < floor {
			floor = m
		}
	}
	return floor
}
