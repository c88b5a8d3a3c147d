//go:build mutant

package cluster

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// The failpoints of a broker (internal/failpoint) and its fault endpoint,
// compiled only with -tags mutant. Each function below is called from a
// one-line hook in the product's files, named in its comment.

// fpState is the state of the failpoints and of the fault endpoint, one
// per broker (Broker.fps).
type fpState struct {
	memberTerm atomic.Uint64  // forget-members: the last term seen leading
	memOffs    memOffsets     // offsets-in-memory: the node's own offset table
	memSched   memSchedule    // schedule-in-memory: the leader's cursors
	memAcks    memAcks        // ack-in-memory: the records this node acked
	clock      *skewClock     // the fault endpoint's clock; nil without it
	ballast    *vfs.BallastFS // the fault endpoint's virtual ballast; nil without it
}

// warnFailpoints logs, at start (Start), that this broker runs failpoints,
// if it does.
func (b *Broker) warnFailpoints() {
	if !b.fp.Any() {
		return
	}
	b.log.Warn("cluster: MUTANT broker: known-bad behaviours are on, for harness self-tests only", "mutants", b.fp.String())
}

// startFaultEndpoint sets up the fault endpoint (Start, with
// Config.FaultEndpoint): the store's clock becomes a skewable one unless the
// configuration brings its own, and its file system gets a virtual ballast,
// the disk-full nemesis's quota seam.
func (b *Broker) startFaultEndpoint(scfg *store.Config) {
	if scfg.Clock == nil {
		b.fps.clock = &skewClock{}
		scfg.Clock = b.fps.clock
	}
	b.fps.ballast = vfs.WithBallast(scfg.FS, b.cfg.Dir)
	scfg.FS = b.fps.ballast
}

// skewClock is the store's clock with an adjustable offset (the fault
// endpoint's clock skew).
type skewClock struct{ offset atomic.Int64 } // nanoseconds

func (c *skewClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// injectFault carries out a FAULT request (handleFault).
func (b *Broker) injectFault(req *remoting.Command) *remoting.Command {
	if !b.cfg.FaultEndpoint {
		return remoting.NewResponse(req, remoting.NoPermission, "fault injection is not enabled on this broker (--fault-endpoint)")
	}
	var fr FaultRequest
	if err := json.Unmarshal(req.Body, &fr); err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, "fault: bad body: "+err.Error())
	}
	if fr.TickRate < 0 || fr.TickRate > 100 {
		return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("fault: tick rate %g outside (0, 100]", fr.TickRate))
	}
	base := b.rep.Node().Timing().TickInterval
	if fr.ClockOffsetMillis != 0 && b.fps.clock == nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, "fault: this broker's store has its own clock; it cannot be skewed")
	}
	if fr.Reset {
		if b.fps.clock != nil {
			b.fps.clock.offset.Store(0)
		}
		b.rep.Node().SetTickInterval(base)
		b.fps.ballast.SetBallast(0)
	}
	if fr.DiskBallastBytes != 0 {
		b.fps.ballast.SetBallast(fr.DiskBallastBytes)
	}
	if fr.TickRate > 0 {
		b.rep.Node().SetTickInterval(time.Duration(float64(base) / fr.TickRate))
	}
	if fr.ClockOffsetMillis != 0 {
		b.fps.clock.offset.Store(int64(time.Duration(fr.ClockOffsetMillis) * time.Millisecond))
	}
	b.log.Warn("cluster: fault injected", "tickRate", fr.TickRate, "clockOffsetMillis", fr.ClockOffsetMillis, "diskBallastBytes", fr.DiskBallastBytes, "reset", fr.Reset)
	st := FaultState{TickInterval: b.rep.Node().TickInterval().String(), DiskBallastBytes: b.fps.ballast.Ballast()}
	if b.fps.clock != nil {
		st.ClockOffsetMillis = time.Duration(b.fps.clock.offset.Load()).Milliseconds()
	}
	body, _ := json.Marshal(st)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// noClientDeadlines is the no-client-deadlines failpoint (Start): the
// remoting server gets no read or idle timeout.
func noClientDeadlines(srv *remoting.Server) {
	srv.ReadTimeout, srv.IdleTimeout = -1, -1
}

// lockTwoOwners is the lock-two-owners failpoint (handleLockBatch): every
// queue asked for is granted, whatever the lock table granted.
func lockTwoOwners(granted, asked []remoting.MessageQueue) []remoting.MessageQueue {
	return asked
}

// forgetMembers is the forget-members failpoint (the member and group
// handlers): the first time this node is asked anything about members in a
// term it leads, it drops every client it knew, telling none of them.
func (b *Broker) forgetMembers() {
	if !b.rep.Node().IsLeader() {
		return
	}
	if term := b.rep.Node().Status().Term; b.fps.memberTerm.Swap(term) != term {
		b.members.Reset()
	}
}

// offsetToMemory is the offsets-in-memory failpoint's commit on a pull
// (handlePull): oc goes to this node's memory, never to raft. It reports
// that it kept the commit.
func (b *Broker) offsetToMemory(oc store.OffsetCommit) bool {
	b.fps.memOffs.set(oc)
	return true
}

// offsetFromMemory is the offsets-in-memory failpoint's offset query
// (handleQueryOffset): the offset of oc's group and queue in this node's
// memory, and whether it is known; inMemory is always true (the answer
// comes from memory).
func (b *Broker) offsetFromMemory(oc store.OffsetCommit) (off int64, ok, inMemory bool) {
	off, ok = b.fps.memOffs.get(oc)
	return off, ok, true
}

// updateOffsetInMemory is the offsets-in-memory failpoint's
// UPDATE_CONSUMER_OFFSET (handleUpdateOffset): kept in memory, answered
// success.
func (b *Broker) updateOffsetInMemory(req *remoting.Command, oc store.OffsetCommit) *remoting.Command {
	b.fps.memOffs.set(oc)
	if req.IsOneway() {
		return nil
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// memOffsets is the offsets-in-memory failpoint's consumer offset table:
// local to one node, never replicated.
type memOffsets struct {
	mu sync.Mutex
	m  map[string]int64
}

func memKey(oc store.OffsetCommit) string {
	return fmt.Sprintf("%s\x00%s\x00%d", oc.Group, oc.Topic, oc.QueueID)
}

func (o *memOffsets) set(oc store.OffsetCommit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]int64{}
	}
	o.m[memKey(oc)] = oc.Offset
}

func (o *memOffsets) get(oc store.OffsetCommit) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	off, ok := o.m[memKey(oc)]
	return off, ok
}

// uncommittedReads is the uncommitted-reads failpoint (handlePull): after
// the committed records of gr, the pull also returns records of the log's
// uncommitted tail (store.UncommittedRecords). It returns the pull's next
// offset, next if it added nothing.
func uncommittedReads(st *store.Store, gr *store.GetResult, h *remoting.PullMessageRequestHeader, maxMsgs int, next int64) int64 {
	if gr.Status != store.Found && gr.Status != store.OffsetOverflowOne && gr.Status != store.NoMessageInQueue {
		return next
	}
	from := h.QueueOffset + int64(len(gr.Records))
	extra := st.UncommittedRecords(h.Topic, h.QueueID, from, maxMsgs-len(gr.Records))
	if len(extra) == 0 {
		return next
	}
	gr.Records = append(gr.Records, extra...)
	for _, r := range extra {
		gr.Body = append(gr.Body, r...)
	}
	gr.Status, gr.NextBeginOffset = store.Found, from+int64(len(extra))
	return gr.NextBeginOffset
}

// deliverHalf is the deliver-half failpoint (divert): no message is a half
// message, so a transaction's message goes straight to its topic.
func deliverHalf(half bool) bool { return false }

// delayEarly is the delay-early failpoint (dueUnits): every unit of a
// schedule queue is due as soon as it is stored.
func delayEarly(early bool) bool { return true }

// rollbackDelivers is the rollback-delivers failpoint (endTxn): whether
// the half message is delivered is answered "yes" for a rollback as for a
// commit.
func rollbackDelivers(action txn.Action) bool {
	return action == txn.Commit || action == txn.Rollback
}

// scheduleCursor is the schedule-in-memory failpoint's cursor of schedule
// queue q (dueUnits): the leader's memory, not the replicated cursor.
func (b *Broker) scheduleCursor(q int32) int64 { return b.fps.memSched.cursor(q) }

// scheduleDelivered is the schedule-in-memory failpoint's bookkeeping
// (proposeDelivery): a delivery proposed without error (err nil) moves the
// leader's cursor in memory.
func (b *Broker) scheduleDelivered(d *schedule.Delivery, err error) {
	if err == nil {
		b.fps.memSched.delivered(b, d)
	}
}

// memSchedule is the schedule-in-memory failpoint's progress: each queue's
// cursor lives in the leader's memory (apply does not check it: store's
// scheduleInMemory), so a new leader starts the schedule over and delivers
// again what its predecessor delivered.
type memSchedule struct {
	mu   sync.Mutex
	next map[int32]int64
	term uint64
}

// cursor returns the leader's cursor of q, forgotten at each new term.
func (m *memSchedule) cursor(q int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next[q]
}

func (m *memSchedule) delivered(b *Broker, d *schedule.Delivery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if term := b.rep.Node().Status().Term; term != m.term || m.next == nil {
		m.next, m.term = map[int32]int64{}, term
	}
	m.next[d.Queue] = d.From + int64(d.Count)
}

// memAcks is the ack-in-memory failpoint's table: the records (queue,
// offset, pop time) this node acked without replicating the ack.
type memAcks struct {
	mu    sync.Mutex
	acked map[pop.Key]map[[2]int64]bool
}

// ackInMemory is the ack-in-memory failpoint's ack (PopAck): it notes each
// receipt in this node's memory and answers every one acked, proposing
// nothing.
func (b *Broker) ackInMemory(rs []Receipt) []error {
	a := &b.fps.memAcks
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.acked == nil {
		a.acked = map[pop.Key]map[[2]int64]bool{}
	}
	for _, r := range rs {
		k := pop.Key{Group: r.Group, Topic: r.Topic, Queue: r.QueueID}
		if a.acked[k] == nil {
			a.acked[k] = map[[2]int64]bool{}
		}
		a.acked[k][[2]int64{r.Offset, r.PopTime}] = true
	}
	return make([]error, len(rs))
}

// inlineAckInMemory is the ack-in-memory failpoint's side of the inline
// batch ack (inlineBatchAck): it declines the request, so the handler's
// PopAck acks it in memory.
func (b *Broker) inlineAckInMemory() bool { return false }

// unackedInMemory is the ack-in-memory failpoint's side of the revive
// loop (reviveDue): it leaves out the records this node acked, which stay
// hidden in the replicated state.
func (b *Broker) unackedInMemory(k pop.Key, recs []pop.Record) []pop.Record {
	a := &b.fps.memAcks
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []pop.Record
	for _, r := range recs {
		if !a.acked[k][[2]int64{r.Offset, r.PopTime}] {
			out = append(out, r)
		}
	}
	return out
}

// popBeforeCommit is the pop-before-commit failpoint's pop (popQueues): it
// proposes the ops in an entry of its own and hands out every message they
// list at once, with the entry's time as their pop time, without waiting
// for the entry to commit; its caller then unlocks the queues, so the
// next pop of a queue decides from a state that lacks this one.
func (b *Broker) popBeforeCommit(req *PopRequest, order bool, bs []builtPop, res *PopResult) error {
	now := time.Now().UnixMilli()
	batch := &pop.Batch{Now: now, Ops: make([]pop.Op, len(bs))}
	for i := range bs {
		batch.Ops[i] = bs[i].op
	}
	if err := b.rep.ProposePopAsync(batch, nil, nil, func([]pop.Result, []store.MessageResult, error) {}); err != nil {
		return err
	}
	for _, x := range bs {
		q := x.op.Queue
		if len(x.op.Offsets) == 0 {
			continue
		}
		res.StartOffsets[q] = min(x.op.From, x.op.Offsets[0])
		for _, off := range x.op.Offsets {
			receipt := Receipt{Group: req.Group, Topic: req.Topic, QueueID: q, Offset: off, PopTime: now,
				Invisible: req.Invisible.Milliseconds(), StartOffset: res.StartOffsets[q], Order: order, BrokerName: b.cfg.BrokerName}
			m, err := withReceipt(x.recs.get(off), receipt, 1)
			if err != nil {
				return err
			}
			res.Messages = append(res.Messages, Popped{Record: m, QueueID: q, QueueOffset: off, Attempt: 1, Receipt: receipt})
		}
	}
	return nil
}
