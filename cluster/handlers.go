package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

type rlStatus = raftlog.Status

// extForwarded marks a request a follower forwarded, so it is never
// forwarded twice.
const extForwarded = "raftmqForwarded"

// maxSuspend caps a long poll.
const maxSuspend = 30 * time.Second

func (b *Broker) handle(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	if resp := b.checkCluster(conn, req); resp != nil {
		return resp
	}
	if ctx.Value(grpcPrechecked{}) == nil {
		if resp := b.checkACL(conn, req); resp != nil {
			return resp
		}
	}
	markCaller(conn, req)
	switch req.Code {
	case acl.UpdateAndCreateACLConfig, acl.DeleteACLConfig, acl.UpdateGlobalWhiteAddrsConfig:
		return b.handleACLUpdate(ctx, conn, req)
	case acl.GetBrokerClusterACLInfo:
		return b.handleACLInfo(ctx, req)
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleSend(ctx, conn, req) })
	case remoting.PullMessage, remoting.LitePullMessage:
		start := time.Now()
		return b.met.pulled(b.handlePull(ctx, req), start)
	case remoting.QueryConsumerOffset:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleQueryOffset(ctx, req) })
	case remoting.UpdateConsumerOffset:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleUpdateOffset(ctx, req) })
	case remoting.GetMaxOffset, remoting.GetMinOffset:
		return b.handleMinMax(req)
	case remoting.SearchOffsetByTimestamp:
		return b.handleSearchOffset(req)
	case remoting.ConsumerSendMsgBack:
		return b.handleSendBack(ctx, conn, req)
	case remoting.RecallMessage:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleRecall(ctx, conn, req) })
	case remoting.EndTransaction:
		return b.handleEndTransaction(ctx, conn, req)
	case remoting.HeartBeat:
		return b.handleHeartbeat(ctx, conn, req)
	case remoting.UnregisterClient:
		return b.handleUnregisterClient(conn, req)
	case remoting.GetConsumerListByGroup:
		return b.handleConsumerList(conn, req)
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleLockBatch(conn, req) })
	case remoting.UpdateAndCreateSubscriptionGroup:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleUpdateGroup(ctx, conn, req) })
	case remoting.GetAllSubscriptionGroupConfig:
		return b.handleAllGroups(ctx, req)
	case remoting.DeleteSubscriptionGroup:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleDeleteGroup(ctx, conn, req) })
	case remoting.DeleteTopicInBroker, remoting.DeleteTopicInNameServer:
		// A client using the group's nodes as its name server sends both.
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleDeleteTopic(ctx, conn, req) })
	case remoting.GetAllTopicListFromNameServer:
		return b.handleTopicList(ctx, req)
	case remoting.CheckClientConfig:
		return b.handleCheckClientConfig(conn, req)
	case remoting.QueryMessage:
		return b.handleQueryMessage(ctx, conn, req)
	case remoting.ViewMessageByID:
		return b.handleViewMessage(ctx, conn, req)
	case remoting.GetRouteInfoByTopic:
		// A follower answers after catching up with the leader's commit
		// index, so a topic deleted or changed before this query was sent
		// is never routed from stale state. Without a quorum within
		// routeBarrierWait the local state answers: a route a little old
		// beats no route while the group elects.
		b.followerCatchUp(ctx, "route", "topic", req.ExtFields["topic"])
		resp := b.handleRoute(req)
		if resp.Code == remoting.TopicNotExist && !b.rep.Node().IsLeader() {
			// This node may lag behind a topic just created: ask the leader.
			return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleRoute(req) })
		}
		return resp
	case remoting.UpdateAndCreateTopic:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleCreateTopic(ctx, req) })
	case remoting.GetAllTopicConfig:
		return b.handleAllTopics(ctx, req)
	case remoting.ClusterStatus:
		body, _ := json.Marshal(b.Status())
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp
	case remoting.Fault:
		return b.handleFault(req)
	case remoting.TransferLeader, remoting.AddNode, remoting.RemoveNode:
		return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command { return b.handleAdmin(ctx, req) })
	}
	if resp, ok := b.handlePopCode(ctx, conn, req); ok {
		return resp
	}
	if resp, ok := b.handleAdminCode(ctx, conn, req); ok {
		return resp
	}
	return b.refuse(conn, req, remoting.RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", req.Code))
}

// leaderOnly runs f on the leader; a follower forwards the request to the
// leader and relays the answer (keeping the client's opaque). While no
// leader is known, or the known one cannot be dialled (it died and the
// election has not ended), it waits up to Config.LeaderWait for one, so a
// request that arrives during an election is served rather than refused;
// past that it answers SERVICE_NOT_AVAILABLE, naming the leader if known.
//
// A request accepted is carried out whatever happens to the client's
// connection afterwards: f and the forward run with a context detached
// from ctx (see detach), so a one-way send whose producer closed its
// connection at once, or a send whose client gave up, still reaches the
// leader, bounded by the waits above and the forward timeout. A forward
// that fails is counted in raftmq_forward_dropped_total by reason; a
// one-way request's failure, which no client hears of, is also logged.
func (b *Broker) leaderOnly(ctx context.Context, req *remoting.Command, f func(ctx context.Context) *remoting.Command) *remoting.Command {
	ctx, cancel := b.detach(ctx)
	defer cancel()
	deadline := time.Now().Add(b.cfg.LeaderWait)
	for {
		if b.rep.Node().IsLeader() {
			return f(ctx)
		}
		resp, retry, drop := b.forward(ctx, req)
		if !retry || !time.Now().Before(deadline) {
			b.forwardDone(req, resp, drop)
			return resp
		}
		t := time.NewTimer(leaderPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			resp = remoting.NewResponse(req, remoting.ServiceNotAvailable, "node stopping; retry")
			b.forwardDone(req, resp, dropStopping)
			return resp
		}
	}
}

// detach returns the context a handler carries out an accepted request
// with: ctx's values, not cancelled when the client's connection closes
// (ctx is), only when the node stops. Its waits are bounded by the
// handler's own timeouts (Config.SendTimeout, LeaderWait, the forward's).
func (b *Broker) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(b.life, cancel)
	return dctx, func() { stop(); cancel() }
}

// Reasons a forwarded request was dropped (raftmq_forward_dropped_total's
// reason label).
const (
	// No leader was known, reachable, or leading within Config.LeaderWait:
	// not delivered (or refused by a node that was no longer the leader).
	dropNoLeader = "no_leader"
	// The leader did not answer within the forward timeout: the outcome
	// is unknown (the leader may have taken it).
	dropTimeout = "timeout"
	// The connection to the leader failed with the request on it: the
	// outcome is unknown.
	dropConnection = "connection"
	// This node stopped.
	dropStopping = "stopping"
)

// forwardDone accounts for a forward's end: drop ("" if the leader
// answered) is counted, and a one-way request that failed is logged, as
// its client never hears of it.
func (b *Broker) forwardDone(req *remoting.Command, resp *remoting.Command, drop string) {
	if drop != "" {
		b.met.forwardDropped(drop)
	}
	if req.IsOneway() && (drop != "" || resp.Code != remoting.Success) {
		b.drops.log(b.log, req, resp, drop)
	}
}

// leadershipRemark reports whether a SERVICE_NOT_AVAILABLE answer's remark
// says the node was not the leader (or knew none), rather than that it
// refused the request for another reason (a full disk).
func leadershipRemark(r string) bool {
	return strings.HasPrefix(r, "not the leader") || strings.HasPrefix(r, "no raft leader") ||
		strings.Contains(r, ErrNotLeader.Error()) || strings.Contains(r, ErrDropped.Error())
}

// leaderPoll is how often leaderOnly looks for a leader while it waits.
const leaderPoll = 20 * time.Millisecond

// forward sends req to the leader and returns its answer. retry reports a
// definite failure that waiting may cure: no leader known, or the leader
// not reachable; the request was not delivered. drop is why the request
// did not reach the leader or got no answer from it (a drop* reason), ""
// when the leader answered.
func (b *Broker) forward(ctx context.Context, req *remoting.Command) (resp *remoting.Command, retry bool, drop string) {
	st := b.rep.Node().Status()
	lp, ok := b.peer(st.Leader)
	if st.Leader == 0 || !ok {
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, "no raft leader elected; retry"), true, dropNoLeader
	}
	if req.ExtFields[extForwarded] != "" {
		// Answered to the follower that forwarded it, which retries.
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, fmt.Sprintf("not the leader; leader is node %d at %s", st.Leader, lp.Client)), false, ""
	}
	conn, err := b.forwardConn(ctx, b.route(st.Leader, lp).Client)
	if err != nil {
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, fmt.Sprintf("not the leader; leader is node %d at %s (unreachable: %v)", st.Leader, lp.Client, err)), true, dropNoLeader
	}
	fr := *req
	fr.ExtFields = make(map[string]string, len(req.ExtFields)+1)
	for k, v := range req.ExtFields {
		fr.ExtFields[k] = v
	}
	fr.ExtFields[extForwarded] = strconv.FormatUint(b.cfg.ID, 10)
	if id := b.rep.ClusterID(); id != 0 {
		fr.ExtFields[extCluster] = FormatClusterID(id)
	}
	fr.Flag &^= remoting.FlagOneway
	b.met.Forwarded.Inc()
	fctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout+time.Second)
	defer cancel()
	r, err := conn.Invoke(fctx, &fr)
	if err != nil {
		drop = dropConnection
		switch {
		case ctx.Err() != nil:
			drop = dropStopping
		case fctx.Err() != nil:
			// Timed out: the leader or the link is stuck. Drop the stream,
			// so the request is not delivered after the client retried.
			drop = dropTimeout
			b.dropForwardConn(conn)
		}
		// Indeterminate: the leader may have taken the request.
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("forwarding to leader %d failed: %v", st.Leader, err)), false, drop
	}
	out := *r
	out.Opaque = req.Opaque
	out.Serialize = req.Serialize
	switch req.Code {
	case remoting.PopMessage, remoting.AckMessage, remoting.BatchAckMessage, remoting.ChangeMessageInvisibleTime:
		// Name the leader, so that a SimpleConsumer learns it and skips
		// this hop (sends learn it from routes and refusals).
		out.ExtFields = make(map[string]string, len(r.ExtFields)+1)
		for k, v := range r.ExtFields {
			out.ExtFields[k] = v
		}
		out.ExtFields[remoting.FieldLeader] = lp.Client
	}
	if out.Code == remoting.ServiceNotAvailable && leadershipRemark(out.Remark) {
		// The node we took for the leader was not (it lost leadership, or
		// has not learnt of the new term yet): definite, worth a retry.
		return &out, true, dropNoLeader
	}
	return &out, false, ""
}

// dropLog logs the one-way requests a node failed to carry out (no client
// hears of them), at most one line a second: an election under one-way
// load would otherwise log a line per request. The first line after a
// pause says how many were left out; raftmq_forward_dropped_total counts
// them all. The zero value is ready to use.
type dropLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (d *dropLog) log(log *slog.Logger, req, resp *remoting.Command, drop string) {
	d.mu.Lock()
	now := time.Now()
	if now.Sub(d.last) < time.Second {
		d.suppressed++
		d.mu.Unlock()
		return
	}
	d.last = now
	n := d.suppressed
	d.suppressed = 0
	d.mu.Unlock()
	args := []any{"code", req.Code, "topic", req.ExtFields["topic"], "answer", resp.Code, "remark", resp.Remark}
	if drop != "" {
		args = append(args, "reason", drop)
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn("cluster: one-way request forwarded to the leader failed; its client is not told", args...)
}

// checkCluster refuses a request forwarded by a node of another cluster
// (its extCluster field names another ID than ours): a member that took a
// node of another group for its leader. The refusal is definite
// (SERVICE_NOT_AVAILABLE, nothing was done), names both IDs, is logged
// (once per forwarding host) and counted. Requests without the field
// (clients, members of versions before the cluster ID) pass.
func (b *Broker) checkCluster(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	v, ok := req.ExtFields[extCluster]
	if !ok {
		return nil
	}
	own := b.rep.ClusterID()
	if got, err := ParseClusterID(v); own == 0 || (err == nil && got == own) {
		return nil
	}
	b.forwardMismatches.Add(1)
	return b.refuse(conn, req, remoting.ServiceNotAvailable, fmt.Sprintf(
		"cluster ID mismatch: request forwarded by node %s of cluster %s, but this node (%d) is in cluster %s; refused",
		req.ExtFields[extForwarded], v, b.cfg.ID, FormatClusterID(own)))
}

// dropForwardConn aborts c and forgets it, if it is still the forward
// connection to its address.
func (b *Broker) dropForwardConn(c *remoting.Conn) {
	b.mu.Lock()
	if b.fwd[c.Addr()] == c {
		delete(b.fwd, c.Addr())
	}
	b.mu.Unlock()
	_ = c.Abort()
}

func (b *Broker) forwardConn(ctx context.Context, addr string) (*remoting.Conn, error) {
	b.mu.Lock()
	c := b.fwd[addr]
	b.mu.Unlock()
	if c != nil {
		select {
		case <-c.Done():
		default:
			return c, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d := net.Dialer{}
	if b.cfg.BindIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(b.cfg.BindIP)}
	}
	c, err := remoting.Dial(dctx, addr, remoting.Options{MaxFrame: b.cfg.MaxFrame, Logger: b.log, Dial: b.tls.dialer(d.DialContext)})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if cur := b.fwd[addr]; cur != nil {
		select {
		case <-cur.Done():
		default:
			// Another request dialled too and won: use its connection
			// (closing it would fail the requests already on it).
			b.mu.Unlock()
			c.Close()
			return cur, nil
		}
	}
	b.fwd[addr] = c
	b.mu.Unlock()
	return c, nil
}

// errorResponse maps a replication or store error to a RocketMQ code.
func (b *Broker) errorResponse(req *remoting.Command, err error) *remoting.Command {
	code := remoting.SystemError
	switch {
	case errors.Is(err, store.ErrUnknownTopic):
		code = remoting.TopicNotExist
	case errors.Is(err, store.ErrNotWritable):
		code = remoting.NoPermission
	case errors.Is(err, store.ErrBadQueue), errors.Is(err, store.ErrBadCommand):
		code = remoting.InvalidParameter
	case errors.Is(err, message.ErrMessageTooLarge), errors.Is(err, message.ErrBadTopic),
		errors.Is(err, message.ErrPropertiesTooLarge), errors.Is(err, message.ErrBadProperty):
		code = remoting.MessageIllegal
	case errors.Is(err, store.ErrDiskFull), errors.Is(err, ErrNotLeader), errors.Is(err, ErrDropped),
		errors.Is(err, ErrLost), errors.Is(err, ErrStopping):
		// Definite: not stored. Clients retry.
		code = remoting.ServiceNotAvailable
	case errors.Is(err, raftlog.ErrOutcomeUnknown):
		// Indeterminate too (the node stopped before applying it, or a
		// snapshot replaced it): said as it is.
		code = remoting.SystemError
		err = fmt.Errorf("indeterminate: %w", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Indeterminate: it may still commit. SYSTEM_ERROR makes clients
		// retry, and the retry is deduplicated by its unique key.
		code = remoting.SystemError
		err = fmt.Errorf("indeterminate: not committed within %v: %w", b.cfg.SendTimeout, err)
	}
	return remoting.NewResponse(req, code, err.Error())
}

func bornHost(conn *remoting.ServerConn) netip.AddrPort {
	if conn != nil {
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
			return ta.AddrPort()
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// inline takes sends (and batch acks: inlineBatchAck) a leader can
// replicate without a goroutine of their own (remoting.Server.Inline): it
// decodes and queues them on the connection's reader goroutine and
// answers on commit from the applier.
// Everything else (followers forwarding, topics to create, other codes)
// goes to handle.
func (b *Broker) inline(conn *remoting.ServerConn, req *remoting.Command) bool {
	switch req.Code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
	case remoting.BatchAckMessage: // pop_handlers.go, after the checks below
	default:
		return false
	}
	if !b.rep.Node().IsLeader() {
		return false
	}
	if resp := b.checkCluster(conn, req); resp != nil {
		conn.Reply(req, resp)
		return true
	}
	if resp := b.checkACL(conn, req); resp != nil {
		conn.Reply(req, resp)
		return true
	}
	if req.Code == remoting.BatchAckMessage {
		return b.inlineBatchAck(conn, req)
	}
	start := time.Now()
	msgs, create, resp := b.prepareSend(conn, req, bornHost(conn))
	if create != nil {
		return false // the topic must be created first: blocking work
	}
	if resp != nil {
		conn.Reply(req, resp)
		return true
	}
	b.submitSend(req, msgs, b.traces.sample(start), start, func(resp *remoting.Command) { conn.Reply(req, resp) })
	return true
}

// submitSend hands msgs, req's messages (received at start, traced by tr
// if sampled), to raft without waiting, and calls answer with req's
// answer once they commit, or at once if they cannot be submitted. The
// sends a leader takes without a goroutine of their own (inline, the gRPC
// front end's) all end here.
func (b *Broker) submitSend(req *remoting.Command, msgs []*message.Message, tr *raftlog.Trace, start time.Time, answer func(*remoting.Command)) {
	err := b.rep.sendAsync(msgs, tr, func(res []store.MessageResult, err error) {
		answer(b.sendResponse(req, res, err, start))
		if tr != nil && err == nil {
			b.traces.answered(tr)
		}
	})
	if err != nil {
		answer(b.sendResponse(req, nil, err, start))
	}
}

func (b *Broker) handleSend(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	start := time.Now()
	born := bornHost(conn)
	if a, ok := ctx.Value(grpcBornHost{}).(netip.AddrPort); ok && conn == nil {
		born = a // a gRPC client's send
	}
	msgs, create, resp := b.prepareSend(conn, req, born)
	// A send may need two topics created: its own, then the system topic
	// a delayed or transactional message waits in.
	for tries := 0; create != nil; tries++ {
		if tries == 2 {
			return remoting.NewResponse(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] deleted while created", create.TopicName))
		}
		if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: create}); err != nil {
			return b.errorResponse(req, err)
		}
		// Again, now with the topic's queues. Exec returned after this node
		// applied the creation, so the same topic is missing again only if
		// it was deleted in between.
		msgs, create, resp = b.prepareSend(conn, req, born)
	}
	if resp != nil {
		return resp
	}
	sctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	res, err := b.rep.Send(sctx, msgs)
	cancel()
	return b.sendResponse(req, res, err, start)
}

// prepareSend decodes a send into messages. It returns an error response
// for a bad request, and, when the topic is missing and auto-creation is
// on, the topic to create (then prepareSend again) instead of messages.
func (b *Broker) prepareSend(conn *remoting.ServerConn, req *remoting.Command, born netip.AddrPort) (msgs []*message.Message, create *offsets.TopicConfig, resp *remoting.Command) {
	h, err := remoting.DecodeSendMessageRequestHeader(req.Code, req.ExtFields)
	if err != nil {
		return nil, nil, b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	return b.prepareSendHeader(conn, req, h, born)
}

// prepareSendHeader is prepareSend with req's header decoded: h. The gRPC
// front end, which builds h itself, calls it without encoding h into req.
func (b *Broker) prepareSendHeader(conn *remoting.ServerConn, req *remoting.Command, h remoting.SendMessageRequestHeader, born netip.AddrPort) (msgs []*message.Message, create *offsets.TopicConfig, resp *remoting.Command) {
	if err := message.CheckTopic(h.Topic); err != nil {
		return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, err.Error())
	}
	tc, ok := b.rep.Store().Topic(h.Topic)
	if !ok {
		if !b.autoCreate() {
			return nil, nil, b.refuse(conn, req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.Topic))
		}
		n := h.DefaultTopicQueueNums
		if n <= 0 || n > 64 {
			n = 4
		}
		tc := offsets.NewTopicConfig(h.Topic, n)
		return nil, &tc, nil
	}
	if b.brokerPerm()&remoting.PermWrite == 0 {
		// RocketMQ's answer to a send while the broker's write permission
		// is wiped.
		return nil, nil, b.refuse(conn, req, remoting.NoPermission, fmt.Sprintf("the broker[%s] sending message is forbidden", b.cfg.BrokerName))
	}
	qid, err := b.failoverQueue(&h, &tc)
	if err != nil {
		return nil, nil, b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	if qid < 0 {
		qid = int32(uint32(time.Now().UnixNano()) % uint32(max(tc.WriteQueueNums, 1)))
	}
	if qid >= max(tc.WriteQueueNums, tc.ReadQueueNums) {
		return nil, nil, b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.writeQueueNums:[%d]", qid, h.Topic, tc.WriteQueueNums))
	}
	// Properties are checked and stored as the client encoded them
	// (message.RawProperties), with a UNIQ_KEY added where missing.
	if req.Code == remoting.SendBatchMessage || h.Batch {
		ents, err := remoting.DecodeBatchRaw(req.Body)
		if err != nil {
			return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, err.Error())
		}
		if len(ents) == 0 {
			return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, "empty batch")
		}
		if strings.HasPrefix(h.Topic, "%RETRY%") {
			return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, "batch to a retry topic")
		}
		for i, e := range ents {
			if waits(e.RawProperties, h.SysFlag) {
				return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, fmt.Sprintf("batch message %d is delayed, timed or transactional: send such messages one at a time, as RocketMQ requires", i))
			}
		}
		msgs = make([]*message.Message, len(ents))
		vals := make([]message.Message, len(ents))
		for i, e := range ents {
			vals[i] = message.Message{Topic: h.Topic, QueueID: qid, Flag: e.Flag, SysFlag: h.SysFlag,
				BornTimestamp: h.BornTimestamp, BornHost: born, ReconsumeTimes: h.ReconsumeTimes, Body: e.Body,
				RawProperties: withUniqKey(e.RawProperties, e.HasUniqKey)}
			msgs[i] = &vals[i]
		}
	} else {
		raw, hasUniq, dropped, err := message.LenientRawProperties(h.Properties)
		if err != nil {
			return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, err.Error())
		}
		if dropped > 0 {
			b.log.Debug("cluster: malformed property pairs skipped, as RocketMQ does", "client", remoteAddr(conn), "dropped", dropped)
		}
		msgs = []*message.Message{{Topic: h.Topic, QueueID: qid, Flag: h.Flag, SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp,
			BornHost: born, ReconsumeTimes: h.ReconsumeTimes, Body: req.Body, RawProperties: withUniqKey(raw, hasUniq)}}
		if dlq, ok := b.retryPastMax(&h, msgs[0]); ok {
			if _, exists := b.rep.Store().Topic(dlq); !exists {
				tc := dlqTopicConfig(dlq)
				return nil, &tc, nil
			}
		}
		sys, err := b.divert(msgs[0], time.Now().UnixMilli())
		if err != nil {
			return nil, nil, b.refuse(conn, req, remoting.MessageIllegal, err.Error())
		}
		if sys != "" {
			if _, ok := b.rep.Store().Topic(sys); !ok {
				tc := systemTopic(sys)
				return nil, &tc, nil
			}
		}
	}
	return msgs, nil, nil
}

// withUniqKey returns raw (message.CheckRawProperties form) with a fresh
// UNIQ_KEY appended unless it has one: every stored message has one, for
// deduplication and lookups.
func withUniqKey(raw string, has bool) string {
	if has {
		return raw
	}
	return message.SetRawProperty(raw, message.PropertyUniqKey, newUniqKey()) // also drops an empty UNIQ_KEY
}

// sendResponse answers a send from its results.
func (b *Broker) sendResponse(req *remoting.Command, res []store.MessageResult, err error, start time.Time) *remoting.Command {
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		b.met.sendsError.Inc()
		return b.errorResponse(req, err)
	}
	rh := remoting.SendMessageResponseHeader{MsgID: res[0].MsgID(), QueueID: res[0].QueueID, QueueOffset: res[0].QueueOffset}
	if len(res) == 1 {
		rh.TransactionID = res[0].UniqKey
	} else {
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.MsgID()
		}
		rh.MsgID = strings.Join(ids, ",")
	}
	rh.Duplicate = res[0].Duplicate
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Header = &rh
	b.met.sendsOK.Inc()
	b.met.sent(res)
	b.met.SendLatency.Observe(time.Since(start).Seconds())
	return resp
}

func (b *Broker) handlePull(ctx context.Context, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodePullMessageRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	st := b.rep.Store()
	tc, ok := st.Topic(h.Topic)
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", h.Topic))
	}
	// As RocketMQ's pull processor: a topic without the read permission
	// is not consumed, and only its read queues are.
	if tc.Perm&offsets.PermRead == 0 {
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] pulling message is forbidden", h.Topic))
	}
	if b.brokerPerm()&remoting.PermRead == 0 {
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the broker[%s] pulling message is forbidden", b.cfg.BrokerName))
	}
	if h.QueueID < 0 || h.QueueID >= tc.ReadQueueNums {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			h.QueueID, h.Topic, tc.ReadQueueNums, h.ConsumerGroup))
	}
	if h.SysFlag&remoting.PullSysFlagCommitOffset != 0 && h.CommitOffset >= 0 && b.rep.Node().IsLeader() {
		// Checked before it joins a batch of commits, which the store
		// would refuse whole for it.
		if err := offsets.CheckGroupName(h.ConsumerGroup); err != nil {
			return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("commit offset: %v", err))
		}
		oc := store.OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Offset: h.CommitOffset}
		inMemory := false
		if failpoint.On(b.fp, failpoint.OffsetsInMemory) {
			inMemory = b.offsetToMemory(oc)
		}
		if !inMemory {
			b.offs.add(oc)
		}
	}
	flt, errResp := b.pullFilter(req, &h)
	if errResp != nil {
		return errResp
	}
	var tags func(int64) bool
	if flt != nil {
		tags = flt.MatchTagsCode
	}
	maxMsgs := int(h.MaxMsgNums)
	if maxMsgs <= 0 || maxMsgs > 1024 {
		maxMsgs = 32
	}
	var deadline time.Time
	if h.SysFlag&remoting.PullSysFlagSuspend != 0 {
		d := time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
		if d <= 0 || d > maxSuspend {
			d = min(maxSuspend, 15*time.Second)
		}
		deadline = time.Now().Add(d)
	}
	leader := b.rep.Node().IsLeader()
	confirmed := false // a quorum confirmed this node's state during this pull
	for {
		changed := st.Changed()
		gr, err := st.GetMessages(h.Topic, h.QueueID, h.QueueOffset, maxMsgs, 4<<20, tags)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		keepMatching(&gr, flt)
		code := remoting.PullNotFound
		next := gr.NextBeginOffset
		if failpoint.On(b.fp, failpoint.UncommittedReads) {
			next = uncommittedReads(st, &gr, &h, maxMsgs, next)
		}
		switch gr.Status {
		case store.Found:
			code = remoting.Success
		case store.NoMatchedMessage:
			code = remoting.PullRetryImmediately
		case store.OffsetTooSmall, store.OffsetOverflowBadly, store.MessageWasRemoving:
			code = remoting.PullOffsetMoved
			if !leader {
				// A lagging follower must never move a consumer's offset.
				code, next = remoting.PullRetryImmediately, h.QueueOffset
			}
		case store.NoMatchedLogicQueue, store.NoMessageInQueue, store.OffsetOverflowOne, store.OffsetFoundNull:
			code = remoting.PullNotFound
			if gr.Status == store.NoMatchedLogicQueue || gr.Status == store.NoMessageInQueue {
				next = h.QueueOffset
				if gr.Status == store.NoMessageInQueue && h.QueueOffset != 0 && leader {
					code, next = remoting.PullOffsetMoved, 0
				}
			}
		}
		if code == remoting.PullOffsetMoved && !confirmed {
			// Moving a consumer's offset is decided from this node's queue
			// bounds: a leader that lost its quorum (a paused process that
			// has not heard of the new term yet) may hold stale ones. Confirm
			// with a read barrier, then decide again on the state it waited
			// for; without a quorum the consumer keeps its offset.
			if err := b.readBarrier(ctx); err != nil {
				b.log.Debug("cluster: offset move not confirmed by a quorum; the consumer retries", "topic", h.Topic, "queue", h.QueueID, "offset", h.QueueOffset, "err", err)
				code, next = remoting.PullRetryImmediately, h.QueueOffset
			} else {
				confirmed = true
				leader = b.rep.Node().IsLeader()
				continue
			}
		}
		if code == remoting.PullNotFound && !deadline.IsZero() {
			wait := time.Until(deadline)
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-changed:
					t.Stop()
					continue
				case <-t.C:
					continue
				case <-ctx.Done():
					t.Stop()
					return nil
				}
			}
		}
		resp := remoting.NewResponse(req, code, "")
		rh := remoting.PullMessageResponseHeader{SuggestWhichBrokerID: 0, NextBeginOffset: next, MinOffset: gr.MinOffset, MaxOffset: gr.MaxOffset}
		resp.ExtFields = rh.Encode()
		if code == remoting.Success {
			resp.Body = gr.Body
		}
		return resp
	}
}

// readBarrier waits until this node's state machine reflects every write
// committed before the call (a raft ReadIndex round, then the apply), so a
// read served after it is linearizable: a leader cut off from the quorum, or
// one that has not applied its predecessor's commits, cannot answer from
// stale state.
func (b *Broker) readBarrier(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	idx, err := b.rep.Node().ReadIndex(rctx)
	if err != nil {
		return err
	}
	return b.rep.Node().WaitApplied(rctx, idx)
}

// barrierOrRefuse runs readBarrier and returns nil, or, when no quorum
// confirmed this node's state, the SERVICE_NOT_AVAILABLE answer to give
// (what names the read).
func (b *Broker) barrierOrRefuse(ctx context.Context, req *remoting.Command, what string) *remoting.Command {
	if err := b.readBarrier(ctx); err != nil {
		return remoting.NewResponse(req, remoting.ServiceNotAvailable, fmt.Sprintf("%s: no quorum confirmed this node's state: %v; retry", what, err))
	}
	return nil
}

func (b *Broker) handleQueryOffset(ctx context.Context, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeQueryConsumerOffsetRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	var off int64
	var ok bool
	inMemory := false
	if failpoint.On(b.fp, failpoint.OffsetsInMemory) {
		off, ok, inMemory = b.offsetFromMemory(store.OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID})
	}
	if !inMemory {
		// A one-way commit of this queue still waiting for its batch is
		// replicated first, so the answer includes it and is never a value
		// that a crash could take back.
		if o, pending := b.offs.pending(h.ConsumerGroup, h.Topic, h.QueueID); pending {
			cctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
			err := b.offs.commitNow(cctx, store.OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Offset: o})
			cancel()
			if err != nil {
				return b.errorResponse(req, err)
			}
		}
		if resp := b.barrierOrRefuse(ctx, req, "offset query"); resp != nil {
			return resp
		}
		off, ok = b.rep.Store().ConsumerOffset(h.ConsumerGroup, h.Topic, h.QueueID)
		if !ok && !h.ExactOnly && b.rep.Store().MinOffset(h.Topic, h.QueueID) == 0 {
			// As RocketMQ's broker: a group with no offset in a queue
			// that has never lost a message to retention starts at 0,
			// so that a new group sees what was sent before it started
			// (its clients would otherwise start at the end).
			off, ok = 0, true
		}
	}
	if !ok {
		return remoting.NewResponse(req, remoting.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.QueryConsumerOffsetResponseHeader{Offset: off}
	resp.ExtFields = rh.Encode()
	return resp
}

func (b *Broker) handleUpdateOffset(ctx context.Context, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeUpdateConsumerOffsetRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	oc := store.OffsetCommit{Group: h.ConsumerGroup, Topic: h.Topic, QueueID: h.QueueID, Offset: h.CommitOffset}
	if err := offsets.CheckGroupName(oc.Group); err != nil {
		if req.IsOneway() {
			b.log.Warn("cluster: one-way consumer offset commit refused", "group", oc.Group, "topic", oc.Topic, "queue", oc.QueueID, "err", err)
			return nil
		}
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	if failpoint.On(b.fp, failpoint.OffsetsInMemory) {
		return b.updateOffsetInMemory(req, oc)
	}
	if req.IsOneway() && !h.Reset {
		b.offs.add(oc)
		return nil
	}
	// Detached from the connection: RocketMQ's Go client sends its last
	// commits at shutdown and closes the connection without waiting for
	// the answers; a commit received is carried out.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.SendTimeout)
	defer cancel()
	if h.Reset {
		err = b.offs.reset(cctx, oc)
	} else {
		err = b.offs.commitNow(cctx, oc)
	}
	switch {
	case req.IsOneway():
		if err != nil {
			b.log.Warn("cluster: one-way consumer offset reset failed", "group", oc.Group, "topic", oc.Topic, "queue", oc.QueueID, "err", err)
		} else if h.Reset {
			b.audit(nil, req, "consumer offset reset", "group", oc.Group, "topic", oc.Topic, "queue", oc.QueueID, "offset", oc.Offset)
		}
		return nil
	case err != nil:
		return b.errorResponse(req, err)
	}
	if h.Reset {
		b.audit(nil, req, "consumer offset reset", "group", oc.Group, "topic", oc.Topic, "queue", oc.QueueID, "offset", oc.Offset)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleMinMax(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeGetMaxOffsetRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	var off int64
	if req.Code == remoting.GetMaxOffset {
		off = b.rep.Store().MaxOffset(h.Topic, h.QueueID)
	} else {
		off = b.rep.Store().MinOffset(h.Topic, h.QueueID)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.OffsetResponseHeader{Offset: off}
	resp.ExtFields = rh.Encode()
	return resp
}

func (b *Broker) handleSearchOffset(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeSearchOffsetRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	st := b.rep.Store()
	off, err := st.SearchOffset(h.Topic, h.QueueID, h.Timestamp)
	if errors.Is(err, store.ErrNotFound) {
		// A queue of the topic that was never written to has no file: its
		// only offset is its next one (RocketMQ answers 0 too).
		if tc, ok := st.Topic(h.Topic); ok && h.QueueID >= 0 && h.QueueID < max(tc.ReadQueueNums, tc.WriteQueueNums) {
			off, err = st.MaxOffset(h.Topic, h.QueueID), nil
		}
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.OffsetResponseHeader{Offset: off}
	resp.ExtFields = rh.Encode()
	return resp
}

// AutoCreateTopicKey is RocketMQ's template topic for auto-creation: a
// client whose topic has no route asks for this one's, sends to its queues,
// and the broker creates the topic on that first send.
const AutoCreateTopicKey = "TBW102"

// autoCreateTemplate is the route a broker with auto-creation on gives
// TBW102: 8 queues, read, write and inherit (perm 7), as RocketMQ's. It is
// not a stored topic: it exists only while auto-creation is on.
func autoCreateTemplate() offsets.TopicConfig {
	tc := offsets.NewTopicConfig(AutoCreateTopicKey, 8)
	tc.Perm = remoting.PermRead | remoting.PermWrite | remoting.PermInherit
	return tc
}

// routeBarrierWait bounds how long a follower waits to catch up with the
// leader before answering a route query from its own state.
const routeBarrierWait = 250 * time.Millisecond

// followerCatchUp runs, on a follower, the read barrier (at most
// routeBarrierWait) before it answers what (a route, a message query)
// from its own state, and reports whether it caught up. Without a quorum
// within that time the local state answers, and the miss is logged at
// debug level with args. The leader needs no barrier: it returns false.
func (b *Broker) followerCatchUp(ctx context.Context, what string, args ...any) bool {
	if b.rep.Node().IsLeader() {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, routeBarrierWait)
	defer cancel()
	if err := b.readBarrier(rctx); err != nil {
		b.log.Debug("cluster: "+what+" answered from local state", append(args, "err", err)...)
		return false
	}
	return true
}

// handleRoute answers a name-server route query: one broker name for the
// group, the ready leader as brokerId 0 and the others under their node id.
func (b *Broker) handleRoute(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeGetRouteInfoRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	tc, ok := b.rep.Store().Topic(h.Topic)
	if !ok && h.Topic == AutoCreateTopicKey && b.autoCreate() {
		tc, ok = autoCreateTemplate(), true
	}
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, fmt.Sprintf("No topic route info in name server for the topic: %s", h.Topic))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = b.routeBody(tc)
	return resp
}

func (b *Broker) routeBody(tc offsets.TopicConfig) []byte {
	// The group's brokerPermission limits every topic's, as a name
	// server's wipeWritePerm does.
	tc.Perm &= int32(b.brokerPerm()) | remoting.PermInherit | remoting.PermPriority
	st := b.rep.Node().Status()
	leader := st.Leader
	if leader == b.cfg.ID && !b.rep.Node().LeaderReady() {
		leader = 0
	}
	addrs := map[int64]string{}
	var followers []uint64
	b.mu.Lock()
	for id, p := range b.peers {
		if id == leader {
			addrs[0] = p.Client
		} else {
			addrs[int64(id)] = p.Client
			followers = append(followers, id)
		}
	}
	b.mu.Unlock()
	rd := remoting.TopicRouteData{
		QueueDatas: []remoting.QueueData{{BrokerName: b.cfg.BrokerName, ReadQueueNums: int(tc.ReadQueueNums),
			WriteQueueNums: int(tc.WriteQueueNums), Perm: int(tc.Perm), TopicSysFlag: int(tc.TopicSysFlag)}},
		BrokerDatas: []remoting.BrokerData{{Cluster: b.cfg.ClusterName, BrokerName: b.cfg.BrokerName, BrokerAddrs: addrs}},
	}
	// Not for TBW102: a client sending to a new topic takes the template's
	// queues, capped at its default queue count, from the broker names
	// that have read queues only; it would send to a failover name's
	// higher queue ids, which the topic created with the default count
	// does not have.
	if b.cfg.FailoverRoutes && tc.Perm&remoting.PermWrite != 0 && tc.TopicName != AutoCreateTopicKey {
		sort.Slice(followers, func(i, j int) bool { return followers[i] < followers[j] })
		for _, id := range followers {
			name := FailoverBrokerName(b.cfg.BrokerName, id)
			n, _ := FailoverQueues(b.failoverWriteQueues(tc), tc.WriteQueueNums, id)
			rd.QueueDatas = append(rd.QueueDatas, remoting.QueueData{BrokerName: name, WriteQueueNums: int(n),
				Perm: remoting.PermWrite, TopicSysFlag: int(tc.TopicSysFlag)})
			rd.BrokerDatas = append(rd.BrokerDatas, remoting.BrokerData{Cluster: b.cfg.ClusterName, BrokerName: name,
				BrokerAddrs: map[int64]string{remoting.MasterID: addrs[int64(id)]}})
		}
	}
	body, _ := rd.Encode()
	return body
}

// FailoverBrokerName is the write-only broker name under which a route
// lists follower id of group broker: "broker@id".
//
// RocketMQ's clients refresh a route every 30 s and, when a send fails,
// retry at once on another broker name, never the same one. A group whose
// only broker name pointed at a leader that died would fail every send
// for up to 30 s. So a route also lists each follower as a broker name of
// its own, with write queues and write permission only (no read queues:
// consumers never see it): a producer spreads its sends over the leader
// and the followers, the followers forward theirs to the leader (waiting
// out an election), and a send that failed on a dead node is retried on a
// live one. A failover name lists fewer write queues than the topic
// (Config.FailoverWriteQueues, FailoverQueues), as every send to it takes
// a forwarding hop; its queue i is stored in one of the topic's queues
// (failoverQueue). Config.FailoverRoutes turns this on (the default for
// `raftmq broker`).
func FailoverBrokerName(broker string, id uint64) string {
	return broker + "@" + strconv.FormatUint(id, 10)
}

// failoverID returns the node id of name if it is a failover name of
// group broker (FailoverBrokerName).
func failoverID(broker, name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, broker+"@")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil
}

// FailoverQueues returns how many write queues follower id's failover
// name lists for a topic of n write queues when each lists k (k <= 0:
// n), and offset: its queue i is the topic's queue (i + offset) mod n.
// The offset, id·count mod n, spreads the followers' queues over the
// topic's (with k = 1 and ids 1..3, queues 1..3) instead of piling them
// all on queue 0; it depends on the id only, so a route's queue always
// stands for the same topic queue, whichever node leads.
func FailoverQueues(k, n int32, id uint64) (count, offset int32) {
	if k <= 0 || k >= n {
		return n, 0
	}
	return k, int32(id * uint64(k) % uint64(n))
}

// failoverWriteQueues returns the k of FailoverQueues for topic tc:
// Config.FailoverWriteQueues, or 0 (all the topic's write queues) for an
// orderly topic (TopicConfig.Order). An orderly sender picks a queue by a
// key's hash and never moves a send to another broker name, so while a
// dead leader stays in its route only the keys hashed to a failover name
// succeed: N/(N+2K) of them fail, a third with K = N.
func (b *Broker) failoverWriteQueues(tc offsets.TopicConfig) int32 {
	if tc.Order {
		return 0
	}
	return b.cfg.FailoverWriteQueues
}

// failoverQueue maps queue qid of the send header h addressed to a
// failover name of this group to the topic's queue it stands for, or
// returns an error for a queue id the name does not list (never stored
// elsewhere). Sends to the group's own name, or without a broker name
// (clients that do not send bname), keep their queue id.
func (b *Broker) failoverQueue(h *remoting.SendMessageRequestHeader, tc *offsets.TopicConfig) (int32, error) {
	id, ok := failoverID(b.cfg.BrokerName, h.BrokerName)
	if !ok || h.QueueID < 0 {
		return h.QueueID, nil
	}
	count, off := FailoverQueues(b.failoverWriteQueues(*tc), tc.WriteQueueNums, id)
	if h.QueueID >= count {
		return 0, fmt.Errorf("queueId[%d] is illegal, topic:[%s] failover broker name %s lists %d write queues (--failover-write-queues); refresh the route",
			h.QueueID, h.Topic, h.BrokerName, count)
	}
	return (h.QueueID + off) % tc.WriteQueueNums, nil
}

func (b *Broker) handleCreateTopic(ctx context.Context, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeCreateTopicRequestHeader(req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	tc := offsets.NewTopicConfig(h.Topic, h.WriteQueueNums)
	tc.ReadQueueNums, tc.WriteQueueNums = h.ReadQueueNums, h.WriteQueueNums
	if h.Perm != 0 {
		tc.Perm = h.Perm
	}
	tc.TopicSysFlag, tc.Order = h.TopicSysFlag, h.Order
	if h.TopicFilterType != "" {
		tc.TopicFilterType = h.TopicFilterType
	}
	if err := tc.Validate(); err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
		return b.errorResponse(req, err)
	}
	b.audit(nil, req, "topic created or updated", "topic", tc.TopicName, "read_queues", tc.ReadQueueNums, "write_queues", tc.WriteQueueNums, "perm", tc.Perm, "order", tc.Order)
	return remoting.NewResponse(req, remoting.Success, "")
}

func (b *Broker) handleAdmin(ctx context.Context, req *remoting.Command) *remoting.Command {
	id, err := strconv.ParseUint(req.ExtFields["id"], 10, 64)
	if err != nil || id == 0 {
		return remoting.NewResponse(req, remoting.InvalidParameter, "admin: ext field id must be a node id")
	}
	// Bounded: ctx outlives the client's connection (leaderOnly), and the
	// raft goroutine that takes these may be stalled (a full disk).
	ctx, cancel := context.WithTimeout(ctx, b.cfg.SendTimeout)
	defer cancel()
	switch req.Code {
	case remoting.TransferLeader:
		err = b.rep.Node().TransferLeader(ctx, id)
	case remoting.AddNode:
		p := Peer{Client: req.ExtFields["client"], Raft: req.ExtFields["raft"]}
		if _, _, e1 := net.SplitHostPort(p.Client); e1 != nil {
			return remoting.NewResponse(req, remoting.InvalidParameter, "admin: bad client address: "+e1.Error())
		}
		if _, _, e2 := net.SplitHostPort(p.Raft); e2 != nil {
			return remoting.NewResponse(req, remoting.InvalidParameter, "admin: bad raft address: "+e2.Error())
		}
		err = b.AddNode(ctx, id, p)
	case remoting.RemoveNode:
		err = b.RemoveNode(ctx, id)
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.audit(nil, req, map[int32]string{remoting.TransferLeader: "leadership transfer requested", remoting.AddNode: "member added",
		remoting.RemoveNode: "member removed"}[req.Code], "node", id)
	return remoting.NewResponse(req, remoting.Success, "")
}

// handleAllTopics answers GET_ALL_TOPIC_CONFIG with RocketMQ's
// TopicConfigSerializeWrapper JSON, after a read barrier (as the
// subscription groups): a topic created through the leader is listed by
// a follower asked next.
func (b *Broker) handleAllTopics(ctx context.Context, req *remoting.Command) *remoting.Command {
	if resp := b.barrierOrRefuse(ctx, req, "topic configs"); resp != nil {
		return resp
	}
	table := map[string]offsets.TopicConfig{}
	for _, tc := range b.rep.Store().Topics() {
		table[tc.TopicName] = tc
	}
	st := b.rep.Node().Status()
	body, err := json.Marshal(map[string]any{
		"topicConfigTable": table,
		"dataVersion":      map[string]any{"timestamp": time.Now().UnixMilli(), "counter": st.Applied},
	})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
