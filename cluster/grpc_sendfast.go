package cluster

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// A leader's gRPC sends skip handle: the call's goroutine decodes its
// request (prepareSendHeader, as for a remoting send) and queues it here;
// the first of the calls queued together yields until a yield brings no
// new send (at most grpcQueueYields times), so that the calls the HTTP/2
// readers have started run and queue theirs, and then submits them all
// back to back (Replica.sendAsync), so that the raft goroutine finds them
// in one proposal, as it finds the sends of one remoting read (see
// Broker.inline). Without that, a call that submitted and waited handed
// the processor to the raft goroutine with its one send, and a gRPC entry
// carried a fraction of a remoting one's messages (with one yield, a
// third of them: every entry costs each node a write, an fsync and an
// apply). Each call waits for its own answer, made on commit by the
// applier as for remoting.

// grpcSendQueue holds the sends of calls waiting for one of them to submit
// them.
type grpcSendQueue struct {
	mu       sync.Mutex
	pending  []*grpcQueuedSend
	flushing bool         // a call is about to take pending
	calls    atomic.Int32 // calls in sendInline
}

// grpcQueueYields bounds the yields of the call that submits the queue:
// a yield costs the calls queued so far a turn of every runnable goroutine.
const grpcQueueYields = 16

type grpcQueuedSend struct {
	req   *remoting.Command
	msgs  []*message.Message
	tr    *raftlog.Trace
	start time.Time
	done  chan *remoting.Command // 1 buffered: the answer
}

// sendInline carries out req, a SendMessageV2 the gRPC front end built and
// authorized, on a leader, and returns its answer; ok is false when it
// must go through handle instead (not the leader, a topic to create). h is
// req's header, which req does not carry encoded.
func (s *grpcService) sendInline(ctx context.Context, req *remoting.Command, h remoting.SendMessageRequestHeader) (resp *remoting.Command, ok bool) {
	b := s.b
	if !b.rep.Node().IsLeader() {
		return nil, false
	}
	s.sends.calls.Add(1)
	defer s.sends.calls.Add(-1)
	start := time.Now()
	born := peerAddrPort(ctx)
	msgs, create, resp := b.prepareSendHeader(nil, req, h, born)
	if create != nil {
		return nil, false // the topic must be created first
	}
	if resp != nil {
		return resp, true
	}
	q := &grpcQueuedSend{req: req, msgs: msgs, tr: b.traces.sample(start), start: start, done: make(chan *remoting.Command, 1)}
	s.queueSend(q)
	select {
	case resp := <-q.done:
		return resp, true
	case <-ctx.Done():
		// The caller is gone; the send may still commit, and is counted
		// when answered (sendResponse).
		return b.errorResponse(req, ctx.Err()), true
	}
}

// peerAddrPort is the caller's address, or 0.0.0.0:0; a TCP peer's
// without formatting and parsing it.
func peerAddrPort(ctx context.Context) netip.AddrPort {
	if p, found := peer.FromContext(ctx); found {
		if ta, isTCP := p.Addr.(*net.TCPAddr); isTCP {
			ap := ta.AddrPort()
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
		if ap, err := netip.ParseAddrPort(peerAddr(ctx)); err == nil {
			return ap
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// queueSend queues q; the first call to queue since the last submission
// submits the queue after letting the other runnable calls queue theirs.
// A call alone (a client sending one at a time) does not yield: there is
// no other call to wait for, and the yield put it behind every runnable
// goroutine of the node.
func (s *grpcService) queueSend(q *grpcQueuedSend) {
	sq := &s.sends
	sq.mu.Lock()
	sq.pending = append(sq.pending, q)
	lead := !sq.flushing
	sq.flushing = true
	sq.mu.Unlock()
	if !lead {
		return
	}
	if sq.calls.Load() > 1 {
		// Yield until a yield brings no new send.
		for n, i := 1, 0; i < grpcQueueYields; i++ {
			runtime.Gosched()
			sq.mu.Lock()
			m := len(sq.pending)
			sq.mu.Unlock()
			if m == n {
				break
			}
			n = m
		}
	}
	sq.mu.Lock()
	batch := sq.pending
	sq.pending = nil
	sq.flushing = false
	sq.mu.Unlock()
	b := s.b
	for _, q := range batch {
		b.submitSend(q.req, q.msgs, q.tr, q.start, func(resp *remoting.Command) { q.done <- resp })
	}
}

// sendMessageMethod is SendMessage's full method name.
const sendMessageMethod = "/apache.rocketmq.v2.MessagingService/SendMessage"

// inline takes a leader's SendMessage calls of one message on the lean
// transport's connection reader (h2.Options.Inline), as Broker.inline
// takes remoting sends: decoded, checked and handed to raft there, and
// answered from the applier on commit. So the sends of one read share a
// proposal with no goroutine per call and no yields (queueSend). The rest
// (a follower's calls, several messages, a topic to create, a request
// that does not decode) goes to the handler.
func (s *grpcService) inline(ctx context.Context, method string, raw []byte, reply func(any, error)) bool {
	b := s.b
	if method != sendMessageMethod || !b.rep.Node().IsLeader() {
		return false
	}
	m := decodeSendOne(raw)
	if m == nil {
		var req rmqpb.SendMessageRequest
		if err := proto.Unmarshal(raw, &req); err != nil || len(req.Messages) != 1 {
			return false
		}
		m = req.Messages[0]
	}
	answer := func(e *rmqpb.SendResultEntry) {
		reply(&rmqpb.SendMessageResponse{Status: e.Status, Entries: []*rmqpb.SendResultEntry{e}}, nil)
	}
	p, failed := s.planSend(ctx, m)
	if failed != nil {
		answer(failed)
		return true
	}
	start := time.Now()
	msgs, create, resp := b.prepareSendHeader(nil, p.req, p.h, peerAddrPort(ctx))
	if create != nil {
		return false // the topic must be created first: blocking work
	}
	if resp != nil {
		answer(s.sendEntry(p, resp))
		return true
	}
	b.submitSend(p.req, msgs, b.traces.sample(start), start, func(resp *remoting.Command) {
		r, failed := s.sendOK(p, resp)
		if failed != nil {
			answer(failed)
			return
		}
		reply(&r, nil)
	})
	return true
}
