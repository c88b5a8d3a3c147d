package cluster

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/store"
)

// A reset's fence drops a live consumer's stale (higher) commits of the
// reset queues until the consumer commits the reset offset, and only
// until its deadline; other queues pass.
func TestResetFence(t *testing.T) {
	var f resetFence
	c := func(q int32, off int64) store.OffsetCommit {
		return store.OffsetCommit{Group: "g", Topic: "t", QueueID: q, Offset: off}
	}
	if !f.pass(c(0, 100)) {
		t.Fatal("an empty fence dropped a commit")
	}
	f.set([]store.OffsetCommit{c(0, 5), c(1, 7)}, time.Now().Add(time.Minute))
	if f.pass(c(0, 100)) {
		t.Error("a stale commit above the reset offset passed")
	}
	if !f.pass(c(2, 100)) {
		t.Error("a commit of a queue not reset was dropped")
	}
	if !f.pass(c(0, 5)) {
		t.Error("the client's commit of the reset offset was dropped")
	}
	if !f.pass(c(0, 9)) {
		t.Error("a commit after the client took the reset was dropped")
	}
	if f.pass(c(1, 8)) {
		t.Error("queue 1 is still fenced")
	}
	f.set([]store.OffsetCommit{c(1, 7)}, time.Now().Add(-time.Second))
	if !f.pass(c(1, 8)) {
		t.Error("an expired fence dropped a commit")
	}
}
