package locks

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

func mq(q int32) remoting.MessageQueue {
	return remoting.MessageQueue{Topic: "T", BrokerName: "b", QueueID: q}
}

func TestOneHolderPerQueue(t *testing.T) {
	m := New(60 * time.Second)
	t0 := time.Unix(1000, 0)
	if got := m.TryLock("g", "c1", []remoting.MessageQueue{mq(0), mq(1)}, t0); len(got) != 2 {
		t.Fatalf("c1 got %v, want both", got)
	}
	if got := m.TryLock("g", "c2", []remoting.MessageQueue{mq(1), mq(2)}, t0.Add(time.Second)); len(got) != 1 || got[0] != mq(2) {
		t.Fatalf("c2 got %v, want only queue 2", got)
	}
	// Another group's lock on the same queue is independent.
	if got := m.TryLock("other", "c2", []remoting.MessageQueue{mq(1)}, t0); len(got) != 1 {
		t.Fatalf("other group got %v", got)
	}
	// A renewal keeps the lock alive past the first grant's expiry.
	m.TryLock("g", "c1", []remoting.MessageQueue{mq(1)}, t0.Add(50*time.Second))
	if got := m.TryLock("g", "c2", []remoting.MessageQueue{mq(1)}, t0.Add(100*time.Second)); len(got) != 0 {
		t.Fatalf("c2 took a renewed lock: %v", got)
	}
	if h, ok := m.Holder("g", mq(1), t0.Add(100*time.Second)); !ok || h != "c1" {
		t.Fatalf("holder %q %v, want c1", h, ok)
	}
	// Expired: 60 s after the last renewal it is free.
	if got := m.TryLock("g", "c2", []remoting.MessageQueue{mq(1)}, t0.Add(111*time.Second)); len(got) != 1 {
		t.Fatalf("c2 could not take an expired lock: %v", got)
	}
}

func TestUnlockOnlyOwnLocks(t *testing.T) {
	m := New(0)
	now := time.Unix(1000, 0)
	m.TryLock("g", "c1", []remoting.MessageQueue{mq(0)}, now)
	m.Unlock("g", "c2", []remoting.MessageQueue{mq(0)})
	if h, _ := m.Holder("g", mq(0), now); h != "c1" {
		t.Fatalf("c2 released c1's lock; holder %q", h)
	}
	m.Unlock("g", "c1", []remoting.MessageQueue{mq(0)})
	if got := m.TryLock("g", "c2", []remoting.MessageQueue{mq(0)}, now); len(got) != 1 {
		t.Fatalf("queue not free after unlock: %v", got)
	}
	m.Reset()
	if _, ok := m.Holder("g", mq(0), now); ok {
		t.Fatal("lock survived Reset")
	}
	m.TryLock("g", "c1", []remoting.MessageQueue{mq(3)}, now)
	m.Expire(now.Add(61 * time.Second))
	if len(m.m) != 0 {
		t.Fatalf("Expire left %d locks", len(m.m))
	}
}
