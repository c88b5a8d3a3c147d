package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// retrySoon is how long the run loop waits before rebalancing again when
// a queue it should own could not be started yet (its lock is held by
// another consumer, or its previous worker is still finishing).
const retrySoon = time.Second

// run is the goroutine that owns the queue table (p.queues, p.finishing):
// it rebalances at start, every RebalanceInterval and when notified,
// renews orderly queue locks, and starts and drops queue workers. At
// Shutdown it stops every worker's pulling and returns, leaving the table
// to Shutdown.
func (p *PushConsumer) run() {
	defer p.loops.Done()
	rebalanceT := time.NewTicker(p.o.RebalanceInterval)
	defer rebalanceT.Stop()
	var lockC <-chan time.Time
	if p.locking() {
		t := time.NewTicker(p.o.LockInterval)
		defer t.Stop()
		lockC = t.C
	}
	var soon *time.Timer
	var soonC <-chan time.Time
	defer func() {
		if soon != nil {
			soon.Stop()
		}
	}()
	again := p.rebalance()
	for {
		if again && soonC == nil {
			soon = time.NewTimer(min(retrySoon, p.o.RebalanceInterval))
			soonC = soon.C
		}
		again = false
		select {
		case <-p.runCtx.Done():
			p.stopAll()
			return
		case <-rebalanceT.C:
			again = p.rebalance()
		case <-p.trigger:
			again = p.rebalance()
		case <-soonC:
			soonC = nil
			again = p.rebalance()
		case <-lockC:
			p.renewLocks()
		case w := <-p.lost:
			if p.queues[w.mq] == w {
				p.drop(w, "queue lock expired")
			}
		case mq := <-p.finished:
			delete(p.finishing, mq)
			again = true
		case r := <-p.resets:
			p.reset(r)
		}
	}
}

// rebalance recomputes the owned queues of every subscribed topic and
// starts and drops workers to match. It reports whether a queue that
// should be owned could not be started yet.
func (p *PushConsumer) rebalance() (again bool) {
	ctx, cancel := p.stopContext(p.c.timeout * adminAttempts)
	defer cancel()
	var clients []string
	if p.o.Model == Clustering {
		ids, err := p.consumerIDs(ctx)
		if err != nil {
			p.log.Warn("client: rebalance: consumer list", "err", err)
			return false
		}
		if !slices.Contains(ids, p.id) {
			// The node has not seen this client's heartbeat yet, or has
			// forgotten it (its connection closed): heartbeat now, and
			// keep the queues until the node lists this client.
			if err := p.heartbeat(ctx); err == nil {
				ids, err = p.consumerIDs(ctx)
				if err != nil {
					p.log.Warn("client: rebalance: consumer list", "err", err)
					return true
				}
			}
			if !slices.Contains(ids, p.id) {
				p.log.Info("client: rebalance: this client is not in the group's list yet", "clients", ids)
				return true
			}
		}
		clients = ids
	}
	for _, sub := range p.subs {
		r, err := p.c.route(ctx, sub.topic, time.Now().Add(-routeTTL), true)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("client: rebalance: no route", "topic", sub.topic, "err", err)
			}
			continue
		}
		all := make([]MessageQueue, r.ReadQueues)
		for i := range all {
			all[i] = MessageQueue{Topic: sub.topic, BrokerName: r.BrokerName, QueueID: int32(i)}
		}
		mine := all
		if p.o.Model == Clustering {
			mine = p.o.Strategy.Allocate(p.o.Group, p.id, all, clients)
		}
		if p.apply(ctx, sub, mine) {
			again = true
		}
	}
	p.publish()
	return again
}

// apply makes sub's owned queues mine: it drops the others and starts the
// new ones (locking them first if orderly). It reports whether some queue
// of mine could not be started yet.
func (p *PushConsumer) apply(ctx context.Context, sub *subscription, mine []MessageQueue) (again bool) {
	for mq, w := range p.queues {
		if mq.Topic == sub.topic && !slices.Contains(mine, mq) {
			p.drop(w, "rebalanced to another consumer")
		}
	}
	var add []MessageQueue
	for _, mq := range mine {
		if _, ok := p.queues[mq]; ok {
			continue
		}
		if _, ok := p.finishing[mq]; ok {
			again = true
			continue
		}
		add = append(add, mq)
	}
	if len(add) == 0 {
		return again
	}
	locked := time.Now()
	if p.locking() {
		granted, err := p.lockBatch(ctx, add)
		if err != nil {
			p.log.Warn("client: rebalance: locking new queues", "topic", sub.topic, "err", err)
			return true
		}
		if len(granted) < len(add) {
			again = true
		}
		add = slices.DeleteFunc(add, func(mq MessageQueue) bool { return !granted[mq] })
	}
	for _, mq := range add {
		w := newQueueWorker(p, mq, sub, locked)
		p.queues[mq] = w
		w.start()
		p.log.Info("client: queue assigned", "queue", mq)
	}
	return again
}

// reset restarts the queues of r's topic this consumer owns at the
// offsets an operator reset the group to: each worker is dropped with its
// progress replaced by the new offset (and persisted so), and the
// rebalance that follows its finish starts the queue from there. As in
// RocketMQ's clients, messages already pulled are discarded.
func (p *PushConsumer) reset(r offsetReset) {
	for mq, w := range p.queues {
		off, ok := r.offsets[mq.QueueID]
		if mq.Topic != r.topic || !ok {
			continue
		}
		w.mu.Lock()
		w.mu.resetTo = off
		w.mu.Unlock()
		p.drop(w, fmt.Sprintf("offset reset to %d", off))
	}
}

// drop stops consuming w's queue: its worker stops, and a goroutine of its
// own waits for the worker, persists the queue's offset and, if orderly,
// unlocks it, then reports back on p.finished.
func (p *PushConsumer) drop(w *queueWorker, why string) {
	delete(p.queues, w.mq)
	p.finishing[w.mq] = struct{}{}
	p.log.Info("client: queue dropped", "queue", w.mq, "why", why)
	w.stop()
	p.finishes.Add(1)
	go func() {
		defer p.finishes.Done()
		w.finish()
		select {
		case p.finished <- w.mq:
		case <-p.runCtx.Done():
		}
	}()
	p.publish()
}

// stopAll stops every worker's pulling and waits for it (Shutdown).
func (p *PushConsumer) stopAll() {
	for _, w := range p.queues {
		w.stop()
	}
	for _, w := range p.queues {
		<-w.pullDone
	}
}

// publish makes the owned queues visible to Assignment.
func (p *PushConsumer) publish() {
	owned := slices.SortedFunc(maps.Keys(p.queues), CompareQueues)
	if owned == nil {
		owned = []MessageQueue{}
	}
	p.assigned.Store(&owned)
}

// renewLocks renews the locks of the owned queues (orderly clustering).
// A queue the broker refuses is dropped; if the broker cannot be reached,
// queues whose lock has grown older than LockMaxAge are dropped.
func (p *PushConsumer) renewLocks() {
	if len(p.queues) == 0 {
		return
	}
	ctx, cancel := p.stopContext(p.c.timeout)
	defer cancel()
	mqs := slices.SortedFunc(maps.Keys(p.queues), CompareQueues)
	granted, err := p.lockBatch(ctx, mqs)
	now := time.Now()
	if err != nil {
		p.log.Warn("client: renewing queue locks failed", "err", err)
		for _, mq := range mqs {
			if w := p.queues[mq]; !w.lockValid(now) {
				p.drop(w, "queue lock expired")
			}
		}
		return
	}
	for _, mq := range mqs {
		w := p.queues[mq]
		if granted[mq] {
			w.renewed(now)
		} else {
			p.drop(w, "queue lock lost to another consumer")
		}
	}
}

// consumerIDs asks the leader (any node if it is unknown) for the group's
// client ids, sorted (GET_CONSUMER_LIST_BY_GROUP). A broker that knows no
// consumer answers SYSTEM_ERROR; that is an empty list.
func (p *PushConsumer) consumerIDs(ctx context.Context) ([]string, error) {
	h := remoting.GetConsumerListByGroupRequestHeader{ConsumerGroup: p.o.Group}
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.GetConsumerListByGroup, h.Encode(), nil) }
	resp, addr, err := p.c.invokeRead(ctx, "", mk, p.c.timeout)
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.SystemError:
		return nil, nil
	default:
		return nil, responseError(addr, resp)
	}
	var body remoting.ConsumerListBody
	if err := remoting.DecodeJSON(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("client: consumer list from %s: %w: %w", addr, ErrProtocol, err)
	}
	ids := slices.Clone(body.ConsumerIDList)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// lockBatch locks mqs for this client on the leader (LOCK_BATCH_MQ) and
// returns the queues granted.
func (p *PushConsumer) lockBatch(ctx context.Context, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	resp, addr, err := p.lockRequest(ctx, remoting.LockBatchMQ, mqs)
	if err != nil {
		return nil, err
	}
	var body remoting.LockBatchResponseBody
	if err := remoting.DecodeJSON(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("client: lock answer from %s: %w: %w", addr, ErrProtocol, err)
	}
	granted := map[MessageQueue]bool{}
	for _, q := range body.LockOKMQSet {
		granted[MessageQueue(q)] = true
	}
	return granted, nil
}

// unlockBatch releases this client's locks of mqs (UNLOCK_BATCH_MQ).
func (p *PushConsumer) unlockBatch(ctx context.Context, mqs []MessageQueue) error {
	_, _, err := p.lockRequest(ctx, remoting.UnlockBatchMQ, mqs)
	return err
}

func (p *PushConsumer) lockRequest(ctx context.Context, code int32, mqs []MessageQueue) (*remoting.Command, string, error) {
	what := "lock"
	if code == remoting.UnlockBatchMQ {
		what = "unlock"
	}
	b := remoting.LockBatchRequestBody{ConsumerGroup: p.o.Group, ClientID: p.id, MQSet: make([]remoting.MessageQueue, len(mqs))}
	for i, mq := range mqs {
		b.MQSet[i] = remoting.MessageQueue(mq)
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, "", fmt.Errorf("client: %s %d queues: %w", what, len(mqs), err)
	}
	mk := func() *remoting.Command { return remoting.NewRequest(code, nil, body) }
	resp, addr, err := p.c.invokeLeader(ctx, mk, true)
	if err == nil && resp.Code != remoting.Success {
		err = responseError(addr, resp)
	}
	if err != nil {
		return nil, "", fmt.Errorf("client: %s %d queues: %w", what, len(mqs), err)
	}
	return resp, addr, nil
}
