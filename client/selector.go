package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/message"
)

// QueueSelector chooses the queue of a message among a topic's write
// queues (RocketMQ's MessageQueueSelector). Messages that must be consumed
// in order share a queue: select by a key they share, and consume with an
// orderly PushConsumer.
type QueueSelector interface {
	// Select returns a queue id in [0, queues); queues is > 0.
	Select(m *Message, queues int) int32
}

// Compile-time checks.
var (
	_ QueueSelector = HashSelector{}
	_ QueueSelector = (*RoundRobinSelector)(nil)
)

// HashSelector sends messages with equal keys to the same queue: the
// queue is the 32-bit FNV-1a hash of the key modulo the queue count. The
// mapping depends only on the key and the count, so it is the same in
// every process and across restarts; it changes when the topic's queue
// count does.
type HashSelector struct {
	// Key returns a message's key; nil means ShardingKey.
	Key func(m *Message) string
}

// Select implements QueueSelector.
func (s HashSelector) Select(m *Message, queues int) int32 {
	key := s.Key
	if key == nil {
		key = ShardingKey
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key(m))) // a hash.Hash never fails
	return int32(h.Sum32() % uint32(queues))
}

// ShardingKey returns the message's sharding key: its __SHARDINGKEY
// property (RocketMQ 5's ordering key) if set, else its first key, else "".
// Messages without a key all hash alike, to one queue.
func ShardingKey(m *Message) string {
	if k := m.Properties[message.PropertyShardingKey]; k != "" {
		return k
	}
	if len(m.Keys) > 0 {
		return m.Keys[0]
	}
	return ""
}

// RoundRobinSelector cycles through the queues, one message after the
// other. Use it through a pointer; the zero value is ready.
type RoundRobinSelector struct {
	n atomic.Uint32
}

// Select implements QueueSelector.
func (s *RoundRobinSelector) Select(_ *Message, queues int) int32 {
	return int32((s.n.Add(1) - 1) % uint32(queues))
}

// SendSelect sends m to the queue sel chooses among the topic's write
// queues, as the route lists them (cached up to 30 s). Retries go to the
// same queue. m is not modified.
func (p *Producer) SendSelect(ctx context.Context, m *Message, sel QueueSelector) (SendResult, error) {
	if m == nil || sel == nil {
		return SendResult{}, errors.New("client: send select: nil message or selector")
	}
	r, err := p.c.route(ctx, m.Topic, time.Now().Add(-routeTTL), true)
	if err != nil {
		return SendResult{}, fmt.Errorf("client: send select to %s: %w", m.Topic, err)
	}
	if r.WriteQueues <= 0 {
		return SendResult{}, fmt.Errorf("client: send select to %s: the route lists no write queues: %w", m.Topic, ErrNoRoute)
	}
	q := sel.Select(m, r.WriteQueues)
	if q < 0 || int(q) >= r.WriteQueues {
		return SendResult{}, fmt.Errorf("client: send select to %s: selector chose queue %d of %d", m.Topic, q, r.WriteQueues)
	}
	mc := *m
	mc.QueueID = q
	return p.Send(ctx, &mc)
}

// SendOneway sends m without waiting for an answer (the request carries
// RocketMQ's one-way flag, so the broker sends none): at most once, with no
// result and no error once the request is queued on a connection. It is
// tried on another node only when it could not be handed to a connection
// (a dial failed), up to MaxRetries times. m is not modified.
func (p *Producer) SendOneway(ctx context.Context, m *Message) error {
	op, err := p.newOp([]*Message{m}, false)
	if err != nil {
		return err
	}
	for {
		op.attempt++
		addr, err := op.prepare(ctx)
		if err == nil {
			var conn *poolConn
			conn, err = p.c.pool.get(ctx, addr)
			if err == nil {
				req := *op.req // Oneway sets the opaque and flag on its argument
				if err = conn.Oneway(&req); err == nil {
					return nil
				}
			}
			p.c.leaderFailed(addr)
			op.avoid = addr
		}
		if op.attempt > p.retries || ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return fmt.Errorf("client: send oneway %s to %s: %d attempts: %w", op.res[0].MsgID, m.Topic, op.attempt, err)
		}
		if serr := sleep(ctx, backoff(op.attempt, p.backoff, p.maxBack, p.c.ids.jitter)); serr != nil {
			return fmt.Errorf("client: send oneway %s to %s: %w (after: %w)", op.res[0].MsgID, m.Topic, serr, err)
		}
	}
}
