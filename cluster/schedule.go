package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// Delayed, timer and transactional messages (packages schedule and txn).
// A send that must not reach its topic yet is diverted by the leader
// before it is proposed (divert): rewritten to the schedule topic or to the
// half topic, with its real topic and queue in REAL_TOPIC and REAL_QID. The
// leader's scheduler (scheduleLoop) proposes each delivery when it is due;
// apply carries it out once, from log order, on every replica.

// Scheduler settings.
const (
	// scheduleTick is how often the leader looks for due units.
	scheduleTick = 10 * time.Millisecond
	// deliveryUnits and deliveryBytes bound one delivery entry, so that a
	// backlog of due messages drains in entries that do not crowd out
	// sends.
	deliveryUnits = 256
	deliveryBytes = 256 << 10
)

// Properties a delivered copy loses: it is no longer delayed.
var scheduleProps = []string{
	message.PropertyDelayTimeLevel, message.PropertyTimerDeliverMS,
	message.PropertyTimerDelaySec, message.PropertyTimerDelayMS,
}

// systemTopics are created through raft the first time a message needs
// them.
var systemTopics = map[string]int32{
	schedule.Topic: schedule.QueueCount,
	txn.HalfTopic:  1,
	txn.OpTopic:    1,
}

// systemTopic returns the config to create for a missing system topic.
func systemTopic(name string) offsets.TopicConfig {
	return offsets.NewTopicConfig(name, systemTopics[name])
}

// divert rewrites m, a message a client sent, if it must wait: a half
// message (TRAN_MSG, or the prepared sysFlag) goes to the half topic, a
// delayed or timer message to its schedule queue. It returns the system
// topic m now goes to, or "" if m goes to its own topic. nowMs is the
// leader's clock, from which timer delays count.
func (b *Broker) divert(m *message.Message, nowMs int64) (string, error) {
	raw := m.RawProperties
	val := func(k string) string { v, _ := message.RawPropertyValue(raw, k); return v }
	half := m.SysFlag&txn.SysFlagTypeMask == txn.SysFlagPrepared || val(message.PropertyTransactionPrepared) == "true"
	if failpoint.On(b.fp, failpoint.DeliverHalf) {
		half = deliverHalf(half)
	}
	if half {
		raw = message.SetRawProperty(raw, message.PropertyRealTopic, m.Topic)
		raw = message.SetRawProperty(raw, message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
		m.RawProperties, m.Topic, m.QueueID = raw, txn.HalfTopic, 0
		m.SysFlag &^= txn.SysFlagTypeMask
		return txn.HalfTopic, nil
	}
	plan, err := schedule.Decide(schedule.Props{
		Delay: val(message.PropertyDelayTimeLevel), DeliverMs: val(message.PropertyTimerDeliverMS),
		DelaySec: val(message.PropertyTimerDelaySec), DelayMs: val(message.PropertyTimerDelayMS),
		MaxDelayMs: b.cfg.MaxTimerDelay.Milliseconds(),
	}, nowMs)
	if err != nil || plan.Kind == schedule.None {
		return "", err
	}
	if plan.Kind == schedule.Timer {
		raw = message.SetRawProperty(raw, message.PropertyTimerDeliverMS, strconv.FormatInt(plan.Due, 10))
	}
	raw = message.SetRawProperty(raw, message.PropertyRealTopic, m.Topic)
	raw = message.SetRawProperty(raw, message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.RawProperties, m.Topic, m.QueueID = raw, schedule.Topic, plan.Queue
	return schedule.Topic, nil
}

// waits reports whether a message's properties ask to hold it back
// (delay, timer or transaction): such messages cannot be sent in a batch.
func waits(raw string, sysFlag int32) bool {
	if sysFlag&txn.SysFlagTypeMask == txn.SysFlagPrepared {
		return true
	}
	for _, k := range []string{message.PropertyDelayTimeLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec,
		message.PropertyTimerDelayMS, message.PropertyTransactionPrepared} {
		if v, ok := message.RawPropertyValue(raw, k); ok && v != "" && v != "0" && v != "false" {
			return true
		}
	}
	return false
}

// ensureTopic creates a system topic (systemTopics) through raft if it is
// missing; other names are left alone. Leader only.
func (b *Broker) ensureTopic(ctx context.Context, name string) error {
	if _, ok := systemTopics[name]; !ok {
		return nil
	}
	if _, ok := b.rep.Store().Topic(name); ok {
		return nil
	}
	tc := systemTopic(name)
	if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
		return fmt.Errorf("create system topic %s: %w", name, err)
	}
	return nil
}

// whileLeader runs on every node: every tick, while the node leads, it
// calls work with a context that ends when the broker stops. A term's
// first call comes only after a read barrier, so that work sees what
// every earlier leader committed. work returns false to end the loop.
func (b *Broker) whileLeader(tick time.Duration, work func(ctx context.Context) bool) {
	t := time.NewTicker(tick)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-b.stopc; cancel() }()
	var readyTerm uint64
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		node := b.rep.Node()
		if !node.IsLeader() {
			continue
		}
		if term := node.Status().Term; term != readyTerm {
			if err := b.readBarrier(ctx); err != nil {
				continue
			}
			readyTerm = term
		}
		if !work(ctx) {
			return
		}
	}
}

// scheduleLoop proposes, while the node leads, the deliveries of due
// units every scheduleTick, each schedule queue in an entry of its own.
func (b *Broker) scheduleLoop() {
	b.whileLeader(scheduleTick, func(ctx context.Context) bool {
		// A backlog is drained at the pace of commits, not of ticks: go
		// again at once while some queue had more due than one entry
		// takes.
		for b.deliverDue(ctx, time.Now().UnixMilli()) && b.rep.Node().IsLeader() && ctx.Err() == nil {
		}
		return true
	})
}

// deliverDue proposes, for each schedule queue with due units in turn,
// one delivery entry, and waits for it before the next: one delivery in
// flight at a time, so that a backlog falling due drains beside the sends
// rather than ahead of them. It reports whether a queue had more due units
// than its entry took.
func (b *Broker) deliverDue(ctx context.Context, nowMs int64) (more bool) {
	for q := int32(0); q < schedule.QueueCount && ctx.Err() == nil; q++ {
		d, msgs, full, ok := b.dueUnits(q, nowMs)
		if !ok {
			continue
		}
		more = more || full
		b.proposeDelivery(ctx, d, msgs)
	}
	return more
}

// dueUnits builds the delivery of queue q's due units at nowMs: the
// messages to deliver and the hops of timer messages not due yet, as
// records in unit order. full reports that it stopped at its limits with
// more units due.
func (b *Broker) dueUnits(q int32, nowMs int64) (d *schedule.Delivery, msgs []*message.Message, full, ok bool) {
	st := b.rep.Store()
	cur := st.ScheduleOffset(q)
	if failpoint.On(b.fp, failpoint.ScheduleInMemory) {
		cur = b.scheduleCursor(q)
	}
	early := false // deliver units before they are due
	if failpoint.On(b.fp, failpoint.DelayEarly) {
		early = delayEarly(early)
	}
	units, err := st.ScheduleUnits(q, cur, deliveryUnits)
	if err != nil {
		b.log.Warn("cluster: schedule: read queue", "queue", q, "err", err)
	}
	if len(units) == 0 || units[0].TagsCode > nowMs && !early {
		return nil, nil, false, false
	}
	if units[0].Offset != cur {
		// Retention removed units the cursor had not reached: skip to the
		// first left (the delivery entry moves the cursor over the gap).
		b.log.Warn("cluster: schedule: units removed before delivery", "queue", q, "cursor", cur, "first", units[0].Offset)
	}
	d = &schedule.Delivery{Queue: q, From: cur, Now: nowMs}
	size := 0
	hopMin := schedule.HopMin.Milliseconds()
units:
	for _, u := range units {
		if u.TagsCode > nowMs && !early {
			break
		}
		if size >= deliveryBytes {
			full = true
			break
		}
		m, err := st.RecordAt(u.PhyOffset)
		switch {
		case err != nil:
			b.log.Error("cluster: schedule: a due message cannot be read; skipped", "queue", q, "offset", u.Offset, "phy", u.PhyOffset, "err", err)
		case st.Recalled(m.Properties[message.PropertyRealTopic], m.UniqKey()):
			b.log.Info("cluster: schedule: a recalled message is dropped", "queue", q, "offset", u.Offset, "msg_id", m.UniqKey())
		case schedule.IsTimerQueue(q):
			due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerDeliverMS], 10, 64)
			left := due - nowMs
			if left > 0 && !early {
				if left < hopMin {
					break units // wait at the head: due within a tick or two
				}
				hop := m
				hop.QueueID, hop.StoreTimestamp, hop.RawProperties = schedule.Bucket(left), 0, ""
				msgs = append(msgs, &hop)
				break
			}
			fallthrough
		default:
			out, err := deliveredCopy(&m)
			if err != nil {
				b.log.Error("cluster: schedule: a due message has no real topic; skipped", "queue", q, "offset", u.Offset, "err", err)
				break
			}
			b.met.ScheduleLateness.Observe(float64(nowMs-max(u.TagsCode, dueOf(&m))) / 1e3)
			msgs = append(msgs, out)
		}
		d.Count = int32(u.Offset - cur + 1)
		size += int(u.Size)
	}
	d.Skips = d.Count - int32(len(msgs))
	full = full || int(d.Count) == deliveryUnits
	return d, msgs, full, d.Count > 0
}

// dueOf returns a timer message's due time (0 for others).
func dueOf(m *message.Message) int64 {
	due, _ := strconv.ParseInt(m.Properties[message.PropertyTimerDeliverMS], 10, 64)
	return due
}

// deliveredCopy returns the message a schedule unit delivers: the stored
// one back in its real topic and queue, no longer delayed, with a new
// store time; its UNIQ_KEY and other properties stay.
func deliveredCopy(m *message.Message) (*message.Message, error) {
	topic := m.Properties[message.PropertyRealTopic]
	qid, err := strconv.Atoi(m.Properties[message.PropertyRealQueueID])
	if topic == "" || err != nil || qid < 0 {
		return nil, fmt.Errorf("REAL_TOPIC %q REAL_QID %q", topic, m.Properties[message.PropertyRealQueueID])
	}
	props := maps.Clone(m.Properties)
	for _, k := range scheduleProps {
		delete(props, k)
	}
	return &message.Message{Topic: topic, QueueID: int32(qid), Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp,
		BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, PreparedTransactionOffset: m.PreparedTransactionOffset,
		Body: m.Body, Properties: props}, nil
}

func (b *Broker) proposeDelivery(ctx context.Context, d *schedule.Delivery, msgs []*message.Message) {
	recs, err := b.rep.encodeSend(msgs)
	if err != nil {
		b.log.Warn("cluster: schedule: encode delivery", "queue", d.Queue, "err", err)
		return
	}
	recs = recs[store.BodyHeaderSize:] // after the room for a header of their own
	payload := append(schedule.AppendDelivery(make([]byte, 0, 64+len(recs)), d), recs...)
	pctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	res, err := b.rep.ProposeInternal(pctx, store.KindSchedule, payload, len(msgs))
	if failpoint.On(b.fp, failpoint.ScheduleInMemory) {
		b.scheduleDelivered(d, err)
	}
	switch {
	case errors.Is(err, store.ErrScheduleMoved), errors.Is(err, ErrNotLeader):
		b.log.Debug("cluster: schedule: delivery not applied", "queue", d.Queue, "from", d.From, "err", err)
	case err != nil:
		b.log.Warn("cluster: schedule: delivery failed; retried at the next tick", "queue", d.Queue, "from", d.From, "err", err)
	}
	for i, r := range res {
		if r.Err != nil {
			b.log.Error("cluster: schedule: a due message could not be stored in its topic; dropped", "queue", d.Queue, "topic", msgs[i].Topic, "err", r.Err)
		}
	}
	b.met.ScheduleDelivered.Add(float64(len(res)))
}
