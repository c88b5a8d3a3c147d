package client

import (
	"context"
	"strings"
	"sync"
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
	return m != nil && !strings.HasPrefix(m.Topic, "%RETRY%")
}

// autoBatcher packs SendAsync messages into batch requests. It keeps at
// most maxReqs packed requests in flight; messages added meanwhile wait in
// packs, one open pack per key, and packs go out oldest first as request
// slots free. So batching needs no timer: a pack grows exactly while the
// requests before it are in flight.
type autoBatcher struct {
	p        *Producer
	maxBytes int
	maxReqs  int

	mu       sync.Mutex
	inflight int               // packed requests in flight
	open     map[packKey]*pack // the pack still taking messages, per key
	ready    []*pack           // packs waiting for a request slot, oldest first
}

// packKey is what the messages of one pack share.
type packKey struct {
	ctx   context.Context
	topic string
	queue int32
}

// pack is messages waiting to be sent together, with their callbacks.
type pack struct {
	key  packKey
	msgs []*Message
	cbs  []func(SendResult, error)
	size int // estimated encoded size
}

func newAutoBatcher(p *Producer, maxBytes, maxReqs int) *autoBatcher {
	return &autoBatcher{p: p, maxBytes: maxBytes, maxReqs: maxReqs, open: make(map[packKey]*pack)}
}

// estimate is m's estimated encoded size as a batch entry.
func estimate(m *Message) int {
	return len(m.Body) + propertiesSizeHint(m) + autoBatchOverhead
}

// add queues m (checked, holding a window slot) and sends a pack if a
// request slot is free. It runs on the SendAsync caller's goroutine.
func (a *autoBatcher) add(ctx context.Context, m *Message, cb func(SendResult, error)) {
	k := packKey{ctx, m.Topic, m.QueueID}
	sz := estimate(m)
	a.mu.Lock()
	pk := a.open[k]
	if pk != nil && pk.size+sz > a.maxBytes {
		delete(a.open, k) // full: it waits in ready; m starts the next pack
		pk = nil
	}
	if pk == nil {
		pk = &pack{key: k}
		a.open[k] = pk
		a.ready = append(a.ready, pk)
	}
	pk.msgs = append(pk.msgs, m)
	pk.cbs = append(pk.cbs, cb)
	pk.size += sz
	next := a.takeLocked()
	a.mu.Unlock()
	if next != nil {
		a.send(next)
	}
}

// takeLocked takes the oldest waiting pack if a request slot is free.
func (a *autoBatcher) takeLocked() *pack {
	if a.inflight >= a.maxReqs || len(a.ready) == 0 {
		return nil
	}
	pk := a.ready[0]
	a.ready[0] = nil
	a.ready = a.ready[1:]
	if a.open[pk.key] == pk {
		delete(a.open, pk.key)
	}
	a.inflight++
	return pk
}

// done frees the request slot of a finished pack and sends the next one.
// It runs on a connection's reader or a timer goroutine, which must not
// block on a route fetch or a dial, so the next pack goes out on its own
// goroutine.
func (a *autoBatcher) done() {
	a.mu.Lock()
	a.inflight--
	next := a.takeLocked()
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
		a.done()
		return
	}
	op.ctx, op.cbs, op.auto = pk.key.ctx, pk.cbs, a
	op.attemptAsync()
}
