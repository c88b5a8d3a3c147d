package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/store"
)

// offsetCommitter batches consumer offset commits that need no answer
// (one-way UPDATE_CONSUMER_OFFSET, the commit offset carried by pulls)
// into one replicated command every flushEvery. Answered commits are
// replicated before their answer. Consumer commits only move offsets
// forward (store.OpAdvanceOffsets): requests can reach the leader late and
// out of order (a forwarded or retried copy stuck in a partitioned TCP
// stream arrives after the retry succeeded and newer commits followed), and
// a late lower offset must not make the group consume again. Moving back is
// a reset, replicated at once (store.OpCommitOffsets).
type offsetCommitter struct {
	b  *Broker
	mu sync.Mutex
	m  map[offsetKey]int64
	// fence drops consumers' stale commits after a reset by time
	// (cluster/admin.go).
	fence resetFence
}

type offsetKey struct {
	group, topic string
	queue        int32
}

const flushEvery = 200 * time.Millisecond

func newOffsetCommitter(b *Broker) *offsetCommitter {
	return &offsetCommitter{b: b, m: map[offsetKey]int64{}}
}

func (o *offsetCommitter) add(c store.OffsetCommit) {
	if !o.fence.pass(c) {
		return
	}
	k := offsetKey{c.Group, c.Topic, c.QueueID}
	o.mu.Lock()
	if cur, ok := o.m[k]; !ok || c.Offset > cur {
		o.m[k] = c.Offset
	}
	o.mu.Unlock()
}

func (o *offsetCommitter) pending(group, topic string, q int32) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.m[offsetKey{group, topic, q}]
	return v, ok
}

func (o *offsetCommitter) take() []store.OffsetCommit {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) == 0 {
		return nil
	}
	out := make([]store.OffsetCommit, 0, len(o.m))
	for k, v := range o.m {
		out = append(out, store.OffsetCommit{Group: k.group, Topic: k.topic, QueueID: k.queue, Offset: v})
	}
	clear(o.m)
	return out
}

// commitNow replicates c (with anything pending) and waits for it.
func (o *offsetCommitter) commitNow(ctx context.Context, c store.OffsetCommit) error {
	o.add(c) // a fenced commit is dropped here, and answered as done
	cs := o.take()
	if len(cs) == 0 {
		return nil
	}
	return o.b.rep.Exec(ctx, &store.Command{Op: store.OpAdvanceOffsets, Offsets: cs})
}

// reset replicates c as a reset, which may move the offset back; a pending
// commit of the same queue is dropped.
func (o *offsetCommitter) reset(ctx context.Context, c store.OffsetCommit) error {
	o.mu.Lock()
	delete(o.m, offsetKey{c.Group, c.Topic, c.QueueID})
	o.mu.Unlock()
	return o.b.rep.Exec(ctx, &store.Command{Op: store.OpCommitOffsets, Offsets: []store.OffsetCommit{c}})
}

func (o *offsetCommitter) flush() {
	cs := o.take()
	if len(cs) == 0 || !o.b.rep.Node().IsLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.b.cfg.SendTimeout)
	defer cancel()
	if err := o.b.rep.Exec(ctx, &store.Command{Op: store.OpAdvanceOffsets, Offsets: cs}); err != nil {
		o.b.log.Warn("cluster: consumer offset commit failed", "offsets", len(cs), "err", err)
	}
}

func (o *offsetCommitter) run(stop <-chan struct{}) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			o.flush()
		case <-stop:
			return
		}
	}
}

// newUniqKey returns a fresh message unique key (32 hex digits, as
// RocketMQ's client ids).
func newUniqKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
