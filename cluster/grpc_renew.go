package cluster

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Auto renew, as RocketMQ's proxy does it for a push consumer's receive
// (auto_renew set, no invisible_duration): the messages are popped with
// the default invisible time (60 s), and the node that answered the
// receive remembers each one's receipt handle by client, group, topic
// and message id and, renewAhead before it becomes visible, changes its
// invisible time (CHANGE_MESSAGE_INVISIBLETIME, replicated like a
// client's) to the next step of renewSteps. The client's ack, change or
// dead-letter forward of the message uses the latest handle, whatever
// handle it sends, and ends the renewal; so does the client's
// termination, a renewal that fails renewTries times in a row, or
// MaxGRPCInvisible since the receive (the message then becomes visible
// and is delivered again). The table is the node's own, not replicated:
// if the node stops, renewal stops and the messages come back after their
// invisible time, as with a proxy that stops.

// renewSteps are the invisible times of successive renewals (the
// proxy's ladder), the last repeated.
var renewSteps = []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute}

const (
	renewAhead = 10 * time.Second
	renewTries = 3
	// renewParallel bounds the renewals in flight at once.
	renewParallel = 64
	// renewMax bounds the renewals held by a node; receives past it are
	// not renewed (logged).
	renewMax = 100_000
)

type renewKey struct{ client, group, topic, msgID string }

type renewal struct {
	handle string
	due    time.Time // visible again at
	start  time.Time
	step   int
	fails  int
}

// renewer is the auto-renew table and its timing (fields, so that tests
// can shorten them).
type renewer struct {
	invisible time.Duration // a receive's invisible time
	ahead     time.Duration
	steps     []time.Duration
	tick      time.Duration

	mu      sync.Mutex
	m       map[renewKey]*renewal
	renewed int // renewals carried out
}

func newRenewer() *renewer {
	return &renewer{invisible: defaultInvisible, ahead: renewAhead, steps: renewSteps, tick: time.Second, m: map[renewKey]*renewal{}}
}

func (r *renewer) receiveInvisible() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.invisible
}

// add registers received messages for renewal; it reports false once the
// table is full.
func (r *renewer) add(client, group, topic string, msgs []renewItem, invisible time.Duration) bool {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if len(r.m) >= renewMax {
			return false
		}
		r.m[renewKey{client, group, topic, m.msgID}] = &renewal{handle: m.handle, due: now.Add(invisible), start: now}
	}
	return true
}

// renewItem is a received message to renew: its message ID (as the client
// sees it) and receipt handle.
type renewItem struct{ msgID, handle string }

// take ends the renewal of a message and returns its latest handle, or
// handle when it is not renewed here.
func (r *renewer) take(client, group, topic, msgID, handle string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := renewKey{client, group, topic, msgID}
	if e, ok := r.m[k]; ok {
		delete(r.m, k)
		return e.handle
	}
	return handle
}

// dropClient ends the renewals of a client's messages.
func (r *renewer) dropClient(client string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.m {
		if k.client == client {
			delete(r.m, k)
		}
	}
}

// renewLoop renews, every tick, the messages due within ahead, until the
// node stops.
func (s *grpcService) renewLoop() {
	r := s.renew
	t := time.NewTicker(r.tick)
	defer t.Stop()
	for {
		select {
		case <-s.b.life.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		r.mu.Lock()
		var due []renewKey
		for k, e := range r.m {
			switch {
			case now.Sub(e.start) >= MaxGRPCInvisible:
				delete(r.m, k)
			case e.due.Sub(now) <= r.ahead:
				due = append(due, k)
			}
		}
		r.mu.Unlock()
		// Concurrently, so that the changes share raft entries.
		sem := make(chan struct{}, renewParallel)
		var wg sync.WaitGroup
		for _, k := range due {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				s.renewOne(k)
			}()
		}
		wg.Wait()
	}
}

// renewOne changes the invisible time of one message to its next step.
func (s *grpcService) renewOne(k renewKey) {
	r := s.renew
	r.mu.Lock()
	e, ok := r.m[k]
	if !ok {
		r.mu.Unlock()
		return
	}
	handle, d := e.handle, r.steps[min(e.step, len(r.steps)-1)]
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.b.life, s.b.cfg.SendTimeout)
	defer cancel()
	nh, stat := s.changeInvisible(ctx, "", k.group, k.topic, handle, d)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.m[k]; !ok || cur != e || cur.handle != handle {
		return // acked or taken meanwhile
	}
	switch {
	case stat.Code == rmqpb.Code_OK:
		e.handle, e.due, e.fails = nh, time.Now().Add(d), 0
		e.step++
		r.renewed++
	case stat.Code == rmqpb.Code_INVALID_RECEIPT_HANDLE:
		delete(r.m, k) // acked, or received again elsewhere
	default:
		if e.fails++; e.fails >= renewTries {
			delete(r.m, k)
			s.b.log.Warn("cluster: grpc auto renew gave up", "group", k.group, "topic", k.topic, "message_id", k.msgID, "status", stat.Message)
		}
	}
}

// changeInvisible changes a receipt's invisible time (0: visible at once)
// through CHANGE_MESSAGE_INVISIBLETIME and returns the handle that now
// holds the message.
func (s *grpcService) changeInvisible(ctx context.Context, ak, group, topic, handle string, d time.Duration) (string, *rmqpb.Status) {
	q, off, f, err := receipt(handle)
	if err != nil {
		return "", st(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(codeChangeInvisible, map[string]string{"consumerGroup": group, "topic": topic,
		"queueId": strconv.Itoa(int(q)), "extraInfo": handle, "offset": strconv.FormatInt(off, 10),
		"invisibleTime": strconv.FormatInt(d.Milliseconds(), 10)}, nil))
	if resp.Code == remoting.RequestCodeNotSupported {
		return "", st(rmqpb.Code_NOT_IMPLEMENTED, "pop consumption is not served by this node's build (%s)", resp.Remark)
	}
	if resp.Code != remoting.Success {
		return "", receiptStatus(resp)
	}
	// The new receipt: the old one with the answer's pop time, invisible
	// time and revive queue.
	fields := map[string]string{}
	if resp.ExtFields != nil {
		fields = resp.ExtFields
	} else if h, isEnc := resp.Header.(interface{ Encode() map[string]string }); isEnc {
		fields = h.Encode()
	}
	nf := append([]string(nil), f...)
	for i, k := range map[int]string{1: "popTime", 2: "invisibleTime", 3: "reviveQid"} {
		v, found := fields[k]
		if !found {
			return "", st(rmqpb.Code_INTERNAL_SERVER_ERROR, "changed, but the answer has no %s", k)
		}
		nf[i] = v
	}
	return strings.Join(nf, " "), ok()
}
