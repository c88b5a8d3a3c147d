package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
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
	// ClusterID is the group's cluster ID as given (Config.ClusterID), 0
	// if none was; Names is "clusterName/brokerName", for the ID derived
	// for data from before cluster IDs (clusterid.go).
	ClusterID uint64
	Names     string
	// Raft is raft's timing, passed to raftlog as it is (raftlog owns
	// the defaults).
	Raft raftlog.Timing
	// MaxBatchBytes bounds the messages packed into one entry (raftlog's
	// default when zero).
	MaxBatchBytes int
	// WaitTimeout bounds how long a SendAsync waits for its entry to
	// apply (raftlog.DefaultWaitTimeout when zero).
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
//
// A send is encoded here (encodeSend) on the caller's goroutine, queued
// with raftlog.Node.Submit, packed into an entry, proposed, persisted and
// tracked by the node's owner goroutine, and answered by Apply on the
// node's applier goroutine once the store has applied its entry.
type Replica struct {
	cfg  ReplicaConfig
	log  *slog.Logger
	st   *store.Store
	rs   *raftlog.Storage
	node *raftlog.Node
	// started is node once OpenReplica made it, for the store's retention
	// loop, which runs from store.Open on.
	started atomic.Pointer[raftlog.Node]
	met     *Metrics
	// clusterID is the group's cluster ID (clusterid.go); 0 until a
	// joining node learns it.
	clusterID atomic.Uint64
}

const pendingSnapName = "snapshot.pending"

// OpenReplica opens the store and raft state in cfg.Store.Dir.
func OpenReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Store.FS == nil {
		cfg.Store.FS = vfs.Default()
	}
	r := &Replica{cfg: cfg, log: cfg.Logger, met: cfg.Metrics}
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
	if err := r.resolveClusterID(cfg); err != nil {
		r.rs.Close()
		st.Close()
		return nil, err
	}
	// A follower's snapshot is built off the raft goroutine, and logged:
	// it is rare, and its cost grows with the store's state.
	r.rs.SnapshotInBackground = true
	r.rs.SnapshotData = func() (uint64, []byte, error) {
		start := time.Now()
		idx, data, err := st.Snapshot()
		r.log.Info("cluster: built a snapshot for a follower", "index", idx, "bytes", len(data), "took", time.Since(start).Round(time.Millisecond), "err", err)
		return idx, data, err
	}
	r.rs.Failpoints = scfg.Failpoints
	// A snapshot whose install was interrupted is installed again.
	if data, err := vfs.ReadFile(fs, vfs.Join(scfg.Dir, "raft", pendingSnapName)); err == nil {
		r.log.Warn("cluster: finishing an interrupted snapshot install")
		if err := r.installSnapshotData(data); err != nil {
			r.Close()
			return nil, err
		}
	}
	node, err := raftlog.NewNode(raftlog.Config{
		ID:            cfg.ID,
		Storage:       r.rs,
		SM:            r,
		Applied:       st.AppliedIndex(),
		Bootstrap:     cfg.Bootstrap,
		Timing:        cfg.Raft,
		MaxBatchBytes: cfg.MaxBatchBytes,
		WaitTimeout:   cfg.WaitTimeout,
		Framing: raftlog.Framing{
			AppendHeader: store.AppendBodyHeader,
			BatchID:      store.BodyBatchID,
			HeaderSize:   store.BodyHeaderSize,
			Merge:        store.KindMessages,
		},
		Failpoints:   scfg.Failpoints,
		OnConfChange: cfg.OnConfChange,
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

// Start starts raft, sending its messages through t.
func (r *Replica) Start(t raftlog.Transport) { r.node.Start(t) }

// Close stops raft and closes the store. Outstanding requests fail (the
// node fails them as it stops).
func (r *Replica) Close() error {
	r.st.StopWaiting() // an apply waiting for disk space must not hold up Stop
	if r.node != nil {
		r.node.Stop()
	}
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

// Apply implements raftlog.StateMachine: it applies the committed entries
// and answers the requests of this node's batches among them.
func (r *Replica) Apply(index uint64, batches []*raftlog.Batch) error {
	start := time.Now()
	rs, err := r.st.Apply(index)
	if r.met != nil {
		r.met.applied(start)
	}
	var applied time.Time
	answerBatches(batches, rs, err == nil, func(b *raftlog.Batch) {
		if b.Traced() {
			if applied.IsZero() {
				applied = time.Now()
			}
			b.StampTraced(raftlog.StageApplied, applied)
		}
		if r.met != nil {
			r.met.Commit.Observe(start.Sub(b.Proposed).Seconds())
			r.met.BatchSize.Observe(float64(len(b.Requests)))
		}
	})
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
	o, err := r.submit(ctx, &raftlog.Request{Kind: store.KindMessages, Data: recs, Headroom: true}, len(msgs))
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
	return r.sendAsync(msgs, nil, done)
}

// sendAsync is SendAsync with tr, the send's trace if it is sampled.
func (r *Replica) sendAsync(msgs []*message.Message, tr *raftlog.Trace, done func([]store.MessageResult, error)) error {
	recs, err := r.encodeSend(msgs)
	if err != nil {
		return err
	}
	w := newAsyncWaiter(len(msgs), func(o outcome) { done(o.msgs, o.err) })
	return r.node.Submit(context.Background(), &raftlog.Request{Kind: store.KindMessages, Data: recs, Headroom: true, Waiter: w, Expires: true, Trace: tr})
}

// encodeSend stamps and checks msgs and encodes them as records, after
// store.BodyHeaderSize bytes of room for the entry header (see
// raftlog.Request.Headroom).
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
	// The records follow room for the entry header (raftlog.Request.Headroom).
	recs := make([]byte, store.BodyHeaderSize, store.BodyHeaderSize+est)
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
	_, err = r.submit(ctx, &raftlog.Request{Kind: store.KindCommand, Data: body, Headroom: true}, 0)
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
	o, err := r.submit(ctx, &raftlog.Request{Kind: kind, Data: payload}, records)
	return o.msgs, err
}

// ProposePopAsync replicates a pop entry (package pop): b's head, then
// the dead-letter copies of its DLQ revives, in op order, stamped and
// checked here like sends; tr, if not nil, traces the entry's stages. done gets the ops' results and the stored
// copies' results once the entry applied, or the error (on another
// goroutine; it must not block). An error return means done is never
// called.
func (r *Replica) ProposePopAsync(b *pop.Batch, dlq []*message.Message, tr *raftlog.Trace, done func([]pop.Result, []store.MessageResult, error)) error {
	recs, err := r.encodeSend(dlq)
	if err != nil {
		return err
	}
	// The binary head only once every member reads it (level.go).
	v1 := r.groupFormatLevel() >= store.FormatLevelAcks
	payload, err := pop.AppendBatchAs(make([]byte, 0, 256+len(recs)), b, v1)
	if err != nil {
		return err
	}
	payload = append(payload, recs[store.BodyHeaderSize:]...)
	w := newAsyncWaiter(len(dlq), func(o outcome) { done(o.pops, o.msgs, o.err) })
	return r.node.Submit(context.Background(), &raftlog.Request{Kind: store.KindPop, Data: payload, Waiter: w, Expires: true, Trace: tr})
}

// submit queues q, expecting count message results, and waits for its
// outcome.
func (r *Replica) submit(ctx context.Context, q *raftlog.Request, count int) (outcome, error) {
	w := newWaiter(count)
	q.Waiter = w
	if err := r.node.Submit(ctx, q); err != nil {
		return outcome{}, err
	}
	select {
	case o := <-w.ch:
		return o, o.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	case <-r.node.Done():
		return outcome{}, ErrStopping
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
