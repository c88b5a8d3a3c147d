package client

import (
	"context"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/message"
)

// Auto-batching defaults (ProducerOptions.AutoBatch).
const (
	DefaultAutoBatchBytes    = 256 << 10
	DefaultAutoBatchRequests = 4
	// autoBatchOverhead estimates a batch entry's fixed bytes plus its
	// UNIQ_KEY property, for the pack size bound.
	autoBatchOverhead = 20 + 48
)

// packable reports whether SendAsync may pack m with other messages: the
// broker refuses batches to retry topics.
func packable(m *Message) bool {
	if m == nil || strings.HasPrefix(m.Topic, "%RETRY%") {
		return false
	}
	// Delayed, timer and transactional messages cannot travel in a batch
	// (the broker refuses such batches, as RocketMQ's does).
	for _, k := range []string{message.PropertyDelayTimeLevel, message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec,
		message.PropertyTimerDelayMS, message.PropertyTransactionPrepared} {
		if m.Properties[k] != "" {
			return false
		}
	}
	return true
}

// autoBatcher packs SendAsync messages into batch requests. It keeps at
// most maxReqs packed requests in flight per topic and queue (a batch goes
// to one queue); messages added meanwhile wait in packs, one open pack per
// key, and a queue's packs go out oldest first as its request slots free.
// So batching needs no timer: a pack grows exactly while the requests
// before it are in flight, and sends spread over many queues are not held
// back by a bound shared between them.
type autoBatcher struct {
	p        *Producer
	maxBytes int
	maxReqs  int

	mu     sync.Mutex
	open   map[packKey]*pack        // the pack still taking messages, per key
	queues map[queueKey]*queueSlots // per queue: requests in flight, packs waiting
}

// queueKey is where a pack goes: a batch is stored in one queue.
type queueKey struct {
	topic string
	queue int32
}

// queueSlots is one queue's packed requests in flight and the packs
// waiting for a slot, oldest first.
type queueSlots struct {
	inflight int
	ready    []*pack
}

// packKey is what the messages of one pack share.
type packKey struct {
	ctx context.Context
	queueKey
}

// pack is messages waiting to be sent together, with their callbacks.
type pack struct {
	key  packKey
	msgs []*Message
	cbs  []func(SendResult, error)
	size int // estimated encoded size
}

func newAutoBatcher(p *Producer, maxBytes, maxReqs int) *autoBatcher {
	return &autoBatcher{p: p, maxBytes: maxBytes, maxReqs: maxReqs, open: make(map[packKey]*pack), queues: make(map[queueKey]*queueSlots)}
}

// estimate is m's estimated encoded size as a batch entry.
func estimate(m *Message) int {
	return len(m.Body) + propertiesSizeHint(m) + autoBatchOverhead
}

// add queues m (checked, holding a window slot) and sends a pack if its
// queue has a request slot free. It runs on the SendAsync caller's
// goroutine.
func (a *autoBatcher) add(ctx context.Context, m *Message, cb func(SendResult, error)) {
	k := packKey{ctx, queueKey{m.Topic, m.QueueID}}
	sz := estimate(m)
	a.mu.Lock()
	pk := a.open[k]
	if pk != nil && pk.size+sz > a.maxBytes {
		delete(a.open, k) // full: it waits in ready; m starts the next pack
		pk = nil
	}
	qs := a.queues[k.queueKey]
	if qs == nil {
		qs = &queueSlots{}
		a.queues[k.queueKey] = qs
	}
	if pk == nil {
		pk = &pack{key: k}
		a.open[k] = pk
		qs.ready = append(qs.ready, pk)
	}
	pk.msgs = append(pk.msgs, m)
	pk.cbs = append(pk.cbs, cb)
	pk.size += sz
	next := a.takeLocked(qs)
	a.mu.Unlock()
	if next != nil {
		a.send(next)
	}
}

// takeLocked takes qs's oldest waiting pack if qs has a request slot free.
func (a *autoBatcher) takeLocked(qs *queueSlots) *pack {
	if qs.inflight >= a.maxReqs || len(qs.ready) == 0 {
		return nil
	}
	pk := qs.ready[0]
	qs.ready[0] = nil
	qs.ready = qs.ready[1:]
	if a.open[pk.key] == pk {
		delete(a.open, pk.key)
	}
	qs.inflight++
	return pk
}

// done frees the request slot of a finished pack and sends its queue's
// next one. It runs on a connection's reader or a timer goroutine, which
// must not block on a route fetch or a dial, so the next pack goes out on
// its own goroutine.
func (a *autoBatcher) done(k queueKey) {
	a.mu.Lock()
	qs := a.queues[k]
	qs.inflight--
	next := a.takeLocked(qs)
	if qs.inflight == 0 && len(qs.ready) == 0 {
		delete(a.queues, k) // idle queues cost nothing
	}
	a.mu.Unlock()
	if next != nil {
		go a.send(next)
	}
}

// send starts one request for pk: a plain send for a lone message, a batch
// otherwise.
func (a *autoBatcher) send(pk *pack) {
	op, err := a.p.buildOp(pk.msgs, len(pk.msgs) > 1) // SendAsync checked each message
	if err != nil {
		// The pack shares topic and queue and is bounded by size, so this
		// is not expected; fail them all the same.
		for _, cb := range pk.cbs {
			cb(SendResult{}, err)
		}
		for range pk.cbs {
			<-a.p.sem
		}
		a.done(pk.key.queueKey)
		return
	}
	op.ctx, op.cbs, op.auto, op.autoKey = pk.key.ctx, pk.cbs, a, pk.key.queueKey
	op.attemptAsync()
}
