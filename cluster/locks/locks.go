// Package locks keeps the queue locks of orderly consumers
// (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): a queue of a consumer group is held by
// at most one client at a time, so that one process consumes it in order.
//
// The raft leader holds the table; followers forward lock requests to it.
// A lock lives MaxLive (60 s by default, as RocketMQ's broker) past its
// holder's last successful request; clients renew every 20 s and stop
// consuming a queue whose lock they have not renewed for 30 s, so a lock
// the broker lets expire is one its holder has already given up.
//
// The table is not replicated. A node that becomes leader starts from an
// empty table (Reset), and clients re-lock within their 20 s renewal
// period. Until they do, a queue may be granted to a new client while its
// old holder still consumes for up to the client's 30 s limit: orderly
// consumers have one owner per queue in steady state, not across a leader
// change (as with RocketMQ on DLedger).
package locks

import (
	"sync"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// DefaultMaxLive is how long a lock lives after its last renewal.
const DefaultMaxLive = 60 * time.Second

type key struct {
	group, topic, broker string
	queue                int32
}

type holder struct {
	client string
	last   time.Time
}

// Manager is a table of queue locks. Use New.
type Manager struct {
	maxLive time.Duration

	mu sync.Mutex
	m  map[key]holder
}

// New returns an empty table whose locks expire maxLive after their last
// renewal (DefaultMaxLive if maxLive <= 0).
func New(maxLive time.Duration) *Manager {
	if maxLive <= 0 {
		maxLive = DefaultMaxLive
	}
	return &Manager{maxLive: maxLive, m: map[key]holder{}}
}

func mqKey(group string, mq remoting.MessageQueue) key {
	return key{group: group, topic: mq.Topic, broker: mq.BrokerName, queue: mq.QueueID}
}

// TryLock locks, or renews, each queue of mqs for client and returns the
// ones client now holds: those that were free, expired, or already its
// own. The others stay with their holders, untouched.
func (m *Manager) TryLock(group, client string, mqs []remoting.MessageQueue, now time.Time) []remoting.MessageQueue {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ok []remoting.MessageQueue
	for _, mq := range mqs {
		k := mqKey(group, mq)
		h, held := m.m[k]
		if held && h.client != client && now.Sub(h.last) <= m.maxLive {
			continue
		}
		m.m[k] = holder{client: client, last: now}
		ok = append(ok, mq)
	}
	return ok
}

// Unlock releases the queues of mqs that client holds; queues held by
// other clients are untouched.
func (m *Manager) Unlock(group, client string, mqs []remoting.MessageQueue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mq := range mqs {
		k := mqKey(group, mq)
		if h, ok := m.m[k]; ok && h.client == client {
			delete(m.m, k)
		}
	}
}

// Holder returns the client holding a queue's unexpired lock.
func (m *Manager) Holder(group string, mq remoting.MessageQueue, now time.Time) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.m[mqKey(group, mq)]
	if !ok || now.Sub(h.last) > m.maxLive {
		return "", false
	}
	return h.client, true
}

// Expire drops the locks not renewed within MaxLive of now, so the table
// does not keep queues of clients long gone.
func (m *Manager) Expire(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, h := range m.m {
		if now.Sub(h.last) > m.maxLive {
			delete(m.m, k)
		}
	}
}

// Reset drops every lock. A node calls it when it becomes leader: its
// table from an earlier term no longer says who holds what.
func (m *Manager) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.m)
}
