package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// fakeGroup is a small in-process stand-in for a raftmq group: nodes on
// real TCP listeners (remoting.Server on 127.0.0.1) sharing one state. The
// leader stores sends and offsets; followers do not forward but answer
// SERVICE_NOT_AVAILABLE naming the leader, as a follower that cannot reach
// it does. Hooks let a test replace any node's answer.
type fakeGroup struct {
	t     *testing.T
	nodes []*fakeNode

	mu struct {
		sync.Mutex
		leader  int                // index into nodes; -1: none
		hidden  bool               // routes omit the leader (election)
		topics  map[string]int     // topic -> queue count
		queues  map[fakeQ][][]byte // stored records per queue
		byKey   map[string]fakeSent
		offsets map[string]int64 // group/topic/queue -> committed offset
		phys    int64
		// Consumer groups: members by group and client id, queue locks
		// (group/topic/queue -> client id).
		consumers   map[string]map[string]*remoting.ServerConn
		locks       map[string]string
		refuseLocks bool // answer every LOCK_BATCH_MQ with nothing granted
		noNotify    bool // send no NOTIFY_CONSUMER_IDS_CHANGED
		// Producer groups: members by group and client id
		// (fakebroker_txn_test.go).
		producers map[string]map[string]*remoting.ServerConn
		// refuseSendBack answers CONSUMER_SEND_MSG_BACK with SYSTEM_ERROR.
		refuseSendBack bool
	}
}

type fakeQ struct {
	topic string
	queue int32
}

// fakeSent is a stored send's answer, kept for deduplication.
type fakeSent struct {
	msgIDs []string
	queue  int32
	offset int64
}

// fakeNode is one node: its server and the requests it received.
type fakeNode struct {
	g    *fakeGroup
	id   int // node id; routes list followers under it
	addr string
	srv  *remoting.Server

	mu struct {
		sync.Mutex
		hook func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool)
		reqs []*remoting.Command
	}
}

func newFakeGroup(t *testing.T, n int) *fakeGroup {
	t.Helper()
	g := &fakeGroup{t: t}
	g.mu.topics = map[string]int{}
	g.mu.queues = map[fakeQ][][]byte{}
	g.mu.byKey = map[string]fakeSent{}
	g.mu.offsets = map[string]int64{}
	g.mu.consumers = map[string]map[string]*remoting.ServerConn{}
	g.mu.locks = map[string]string{}
	g.mu.producers = map[string]map[string]*remoting.ServerConn{}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		node := &fakeNode{g: g, id: i + 1, addr: ln.Addr().String()}
		node.srv = &remoting.Server{Handler: node.handle}
		go func() { _ = node.srv.Serve(ln) }() // returns nil on Close
		g.nodes = append(g.nodes, node)
		t.Cleanup(func() { _ = node.srv.Close() })
	}
	return g
}

func (g *fakeGroup) addrs() []string {
	var out []string
	for _, n := range g.nodes {
		out = append(out, n.addr)
	}
	return out
}

func (g *fakeGroup) setLeader(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.leader = i
}

func (g *fakeGroup) hideLeader(hidden bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.hidden = hidden
}

func (g *fakeGroup) addTopic(topic string, queues int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.topics[topic] = queues
}

// putRecords stores raw records in a queue, as if committed.
func (g *fakeGroup) putRecords(topic string, queue int32, recs ...[]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := fakeQ{topic, queue}
	g.mu.queues[q] = append(g.mu.queues[q], recs...)
}

func (n *fakeNode) setHook(h func(n *fakeNode, req *remoting.Command) (*remoting.Command, bool)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.hook = h
}

// requests returns copies of the requests with the given code n received.
func (n *fakeNode) requests(code int32) []*remoting.Command {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*remoting.Command
	for _, r := range n.mu.reqs {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

func (n *fakeNode) handle(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	rec := *req
	rec.ExtFields = maps.Clone(req.ExtFields)
	rec.Body = slices.Clone(req.Body)
	n.mu.Lock()
	n.mu.reqs = append(n.mu.reqs, &rec)
	hook := n.mu.hook
	n.mu.Unlock()
	if hook != nil {
		if resp, ok := hook(n, req); ok {
			return resp
		}
	}
	resp, notify := n.g.serveConn(n, conn, req)
	n.g.notify(notify)
	return resp
}

// serve is the default behaviour of node n, for hooks that pass a request
// on (without its connection, so a heartbeat would register none).
func (g *fakeGroup) serve(n *fakeNode, req *remoting.Command) *remoting.Command {
	resp, _ := g.serveConn(n, nil, req)
	return resp
}

// serveConn is the default behaviour of node n: its answer, and the
// consumer groups whose members to notify of a change.
func (g *fakeGroup) serveConn(n *fakeNode, conn *remoting.ServerConn, req *remoting.Command) (*remoting.Command, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch req.Code {
	case remoting.HeartBeat:
		return g.heartbeatLocked(conn, req)
	case remoting.UnregisterClient:
		h, err := remoting.DecodeUnregisterClientRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err), nil
		}
		delete(g.mu.producers[h.ProducerGroup], h.ClientID)
		var changed []string
		if _, ok := g.mu.consumers[h.ConsumerGroup][h.ClientID]; ok {
			delete(g.mu.consumers[h.ConsumerGroup], h.ClientID)
			changed = append(changed, h.ConsumerGroup)
		}
		return remoting.NewResponse(req, remoting.Success, ""), changed
	}
	return g.serveLocked(n, req), nil
}

// serveLocked answers requests that change no group membership.
func (g *fakeGroup) serveLocked(n *fakeNode, req *remoting.Command) *remoting.Command {
	leaderOnly := func() *remoting.Command {
		switch {
		case g.mu.leader < 0:
			return remoting.NewResponse(req, remoting.ServiceNotAvailable, "no raft leader elected; retry")
		case g.nodes[g.mu.leader] != n:
			l := g.nodes[g.mu.leader]
			return remoting.NewResponse(req, remoting.ServiceNotAvailable,
				fmt.Sprintf("not the leader; leader is node %d at %s", l.id, l.addr))
		}
		return nil
	}
	switch req.Code {
	case remoting.GetRouteInfoByTopic:
		return g.routeLocked(req)
	case remoting.SendMessageV2, remoting.SendBatchMessage:
		if r := leaderOnly(); r != nil {
			return r
		}
		return g.sendLocked(n, req)
	case remoting.PullMessage:
		return g.pullLocked(req)
	case remoting.ConsumerSendMsgBack:
		if r := leaderOnly(); r != nil {
			return r
		}
		return g.sendBackLocked(n, req)
	case remoting.EndTransaction:
		if r := leaderOnly(); r != nil {
			return r
		}
		return g.endTransactionLocked(req)
	case remoting.QueryConsumerOffset:
		if r := leaderOnly(); r != nil {
			return r
		}
		h, err := remoting.DecodeQueryConsumerOffsetRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		off, ok := g.mu.offsets[offsetKey(h.ConsumerGroup, h.Topic, h.QueueID)]
		if !ok {
			return remoting.NewResponse(req, remoting.QueryNotFound, "not found")
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		rh := remoting.QueryConsumerOffsetResponseHeader{Offset: off}
		resp.ExtFields = rh.Encode()
		return resp
	case remoting.UpdateConsumerOffset:
		if r := leaderOnly(); r != nil {
			return r
		}
		h, err := remoting.DecodeUpdateConsumerOffsetRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		g.mu.offsets[offsetKey(h.ConsumerGroup, h.Topic, h.QueueID)] = h.CommitOffset
		return remoting.NewResponse(req, remoting.Success, "")
	case remoting.GetConsumerListByGroup:
		h, err := remoting.DecodeGetConsumerListByGroupRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		ids := slices.Sorted(maps.Keys(g.mu.consumers[h.ConsumerGroup]))
		code := remoting.Success
		if len(ids) == 0 {
			code = remoting.SystemError
		}
		resp := remoting.NewResponse(req, code, "")
		resp.Body, _ = json.Marshal(remoting.ConsumerListBody{ConsumerIDList: ids})
		return resp
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		if r := leaderOnly(); r != nil {
			return r
		}
		return g.lockLocked(req)
	case remoting.SearchOffsetByTimestamp:
		h, err := remoting.DecodeSearchOffsetRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		off := int64(len(g.mu.queues[fakeQ{h.Topic, h.QueueID}]))
		for i, rec := range g.mu.queues[fakeQ{h.Topic, h.QueueID}] {
			if v, err := message.Parse(rec, false); err == nil && v.StoreTimestamp >= h.Timestamp {
				off = int64(i)
				break
			}
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		rh := remoting.OffsetResponseHeader{Offset: off}
		resp.ExtFields = rh.Encode()
		return resp
	case remoting.GetMaxOffset, remoting.GetMinOffset:
		h, err := remoting.DecodeGetMaxOffsetRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		var off int64
		if req.Code == remoting.GetMaxOffset {
			off = int64(len(g.mu.queues[fakeQ{h.Topic, h.QueueID}]))
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		rh := remoting.OffsetResponseHeader{Offset: off}
		resp.ExtFields = rh.Encode()
		return resp
	case remoting.UpdateAndCreateTopic:
		if r := leaderOnly(); r != nil {
			return r
		}
		h, err := remoting.DecodeCreateTopicRequestHeader(req.ExtFields)
		if err != nil {
			return g.bad(req, err)
		}
		g.mu.topics[h.Topic] = int(h.WriteQueueNums)
		return remoting.NewResponse(req, remoting.Success, "")
	case remoting.ClusterStatus:
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body, _ = json.Marshal(map[string]any{"id": n.id, "leader": g.mu.leader + 1})
		return resp
	case remoting.TransferLeader, remoting.AddNode, remoting.RemoveNode:
		if r := leaderOnly(); r != nil {
			return r
		}
		if _, err := strconv.ParseUint(req.ExtFields["id"], 10, 64); err != nil {
			return remoting.NewResponse(req, remoting.InvalidParameter, "bad id")
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}
	return remoting.NewNotSupportedResponse(req)
}

// bad reports a request the client should not have sent.
func (g *fakeGroup) bad(req *remoting.Command, err error) *remoting.Command {
	g.t.Errorf("fake broker: bad request code %d: %v", req.Code, err)
	return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
}

func offsetKey(group, topic string, queue int32) string {
	return group + "/" + topic + "/" + strconv.Itoa(int(queue))
}

func (g *fakeGroup) routeLocked(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeGetRouteInfoRequestHeader(req.ExtFields)
	if err != nil {
		return g.bad(req, err)
	}
	if !h.AcceptStandardJSONOnly {
		g.t.Errorf("route query without acceptStandardJsonOnly")
	}
	queues, ok := g.mu.topics[h.Topic]
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+h.Topic)
	}
	addrs := map[int64]string{}
	for i, n := range g.nodes {
		switch {
		case i == g.mu.leader && g.mu.hidden:
		case i == g.mu.leader:
			addrs[0] = n.addr
		default:
			addrs[int64(n.id)] = n.addr
		}
	}
	rd := remoting.TopicRouteData{
		QueueDatas:  []remoting.QueueData{{BrokerName: "raftmq", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}},
		BrokerDatas: []remoting.BrokerData{{Cluster: "c", BrokerName: "raftmq", BrokerAddrs: addrs}},
	}
	body, err := rd.Encode()
	if err != nil {
		return g.bad(req, err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// sendLocked stores a send on the leader, deduplicating by the first
// message's UNIQ_KEY.
func (g *fakeGroup) sendLocked(n *fakeNode, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeSendMessageRequestHeader(req.Code, req.ExtFields)
	if err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	queues, ok := g.mu.topics[h.Topic]
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "topic["+h.Topic+"] not exist, apply first please!")
	}
	qid := h.QueueID
	if qid < 0 {
		qid = 0
	}
	if int(qid) >= queues {
		return remoting.NewResponse(req, remoting.InvalidParameter, "bad queue")
	}
	type entry struct {
		flag  int32
		body  []byte
		props map[string]string
	}
	var ents []entry
	if req.Code == remoting.SendBatchMessage {
		if !h.Batch {
			g.t.Errorf("batch send without the batch flag")
		}
		bes, err := remoting.DecodeBatch(req.Body)
		if err != nil {
			return remoting.NewResponse(req, remoting.MessageIllegal, err.Error())
		}
		for _, e := range bes {
			ents = append(ents, entry{e.Flag, e.Body, e.Properties})
		}
	} else {
		props, err := message.DecodeProperties(h.Properties)
		if err != nil {
			return remoting.NewResponse(req, remoting.MessageIllegal, err.Error())
		}
		ents = append(ents, entry{h.Flag, req.Body, props})
	}
	uniq := ents[0].props[message.PropertyUniqKey]
	// As raftmq's brokers: a repeat is the same topic, UNIQ_KEY and
	// reconsume count (the retries of one message share their UNIQ_KEY).
	key := fmt.Sprintf("%s#%s#%d", h.Topic, uniq, h.ReconsumeTimes)
	dupResp := func(s fakeSent, dup bool) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		rh := remoting.SendMessageResponseHeader{MsgID: strings.Join(s.msgIDs, ","), QueueID: s.queue, QueueOffset: s.offset}
		resp.ExtFields = rh.Encode()
		if dup {
			resp.ExtFields[remoting.FieldDuplicate] = "true"
		}
		return resp
	}
	if s, ok := g.mu.byKey[key]; ok && uniq != "" {
		return dupResp(s, true)
	}
	store := netip.MustParseAddrPort(n.addr)
	q := fakeQ{h.Topic, qid}
	s := fakeSent{queue: qid, offset: int64(len(g.mu.queues[q]))}
	for _, e := range ents {
		m := message.Message{
			QueueID: qid, Flag: e.flag, QueueOffset: int64(len(g.mu.queues[q])), PhysicalOffset: g.mu.phys,
			SysFlag: h.SysFlag, BornTimestamp: h.BornTimestamp, BornHost: netip.MustParseAddrPort("127.0.0.1:1"), ReconsumeTimes: h.ReconsumeTimes,
			StoreTimestamp: time.Now().UnixMilli(), StoreHost: store, Body: e.body, Topic: h.Topic, Properties: e.props,
		}
		rec, err := message.Append(nil, &m)
		if err != nil {
			return remoting.NewResponse(req, remoting.MessageIllegal, err.Error())
		}
		g.mu.queues[q] = append(g.mu.queues[q], rec)
		s.msgIDs = append(s.msgIDs, message.OffsetMsgID(store, g.mu.phys))
		g.mu.phys += int64(len(rec))
	}
	if uniq != "" {
		g.mu.byKey[key] = s
	}
	return dupResp(s, false)
}

func (g *fakeGroup) pullLocked(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodePullMessageRequestHeader(req.ExtFields)
	if err != nil {
		return g.bad(req, err)
	}
	if h.SysFlag&remoting.PullSysFlagCommitOffset != 0 {
		g.mu.offsets[offsetKey(h.ConsumerGroup, h.Topic, h.QueueID)] = h.CommitOffset
	}
	recs := g.mu.queues[fakeQ{h.Topic, h.QueueID}]
	maxOff := int64(len(recs))
	code, next := remoting.Success, h.QueueOffset
	switch {
	case h.QueueOffset == maxOff:
		code = remoting.PullNotFound
	case h.QueueOffset > maxOff || h.QueueOffset < 0:
		code, next = remoting.PullOffsetMoved, maxOff
	}
	resp := remoting.NewResponse(req, code, "")
	if code == remoting.Success {
		end := min(maxOff, h.QueueOffset+int64(h.MaxMsgNums))
		for _, r := range recs[h.QueueOffset:end] {
			resp.Body = append(resp.Body, r...)
		}
		next = end
	}
	rh := remoting.PullMessageResponseHeader{NextBeginOffset: next, MinOffset: 0, MaxOffset: maxOff}
	resp.ExtFields = rh.Encode()
	return resp
}

// newTestClient returns a client of g's nodes at the given indexes (all if
// none), closed at the end of the test.
func newTestClient(t *testing.T, g *fakeGroup, timeout time.Duration, nodes ...int) *Client {
	t.Helper()
	addrs := g.addrs()
	if len(nodes) > 0 {
		addrs = nil
		for _, i := range nodes {
			addrs = append(addrs, g.nodes[i].addr)
		}
	}
	c, err := New(Options{Addrs: addrs, RequestTimeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniqKeys returns the UNIQ_KEY of each send request.
func uniqKeys(t *testing.T, reqs []*remoting.Command) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		h, err := remoting.DecodeSendMessageRequestHeader(r.Code, r.ExtFields)
		require.NoError(t, err)
		props, err := message.DecodeProperties(h.Properties)
		require.NoError(t, err)
		out = append(out, props[message.PropertyUniqKey])
	}
	return out
}

// heartbeatLocked registers a client's consumer groups, creating each
// group's retry topic (one queue) as raftmq's broker does. A new member
// changes the group.
func (g *fakeGroup) heartbeatLocked(conn *remoting.ServerConn, req *remoting.Command) (*remoting.Command, []string) {
	hb, err := remoting.DecodeHeartbeatData(req.Body)
	if err != nil {
		return g.bad(req, err), nil
	}
	var changed []string
	for _, pd := range hb.ProducerDataSet {
		if g.mu.producers[pd.GroupName] == nil {
			g.mu.producers[pd.GroupName] = map[string]*remoting.ServerConn{}
		}
		g.mu.producers[pd.GroupName][hb.ClientID] = conn
	}
	for _, cd := range hb.ConsumerDataSet {
		members := g.mu.consumers[cd.GroupName]
		if members == nil {
			members = map[string]*remoting.ServerConn{}
			g.mu.consumers[cd.GroupName] = members
		}
		if _, ok := members[hb.ClientID]; !ok {
			changed = append(changed, cd.GroupName)
		}
		members[hb.ClientID] = conn
		if _, ok := g.mu.topics["%RETRY%"+cd.GroupName]; !ok {
			g.mu.topics["%RETRY%"+cd.GroupName] = 1
		}
	}
	return remoting.NewResponse(req, remoting.Success, ""), changed
}

// notify sends NOTIFY_CONSUMER_IDS_CHANGED to every member of the groups.
func (g *fakeGroup) notify(groups []string) {
	g.mu.Lock()
	var conns []*remoting.ServerConn
	var names []string
	if !g.mu.noNotify {
		for _, grp := range groups {
			for _, c := range g.mu.consumers[grp] {
				if c != nil {
					conns = append(conns, c)
					names = append(names, grp)
				}
			}
		}
	}
	g.mu.Unlock()
	for i, c := range conns {
		h := remoting.NotifyConsumerIDsChangedRequestHeader{ConsumerGroup: names[i]}
		_ = c.Oneway(remoting.NewRequest(remoting.NotifyConsumerIDsChanged, h.Encode(), nil)) // best effort, as the broker's
	}
}

// lockLocked grants the queues that are free or already the client's.
func (g *fakeGroup) lockLocked(req *remoting.Command) *remoting.Command {
	b, err := remoting.DecodeLockBatchRequestBody(req.Body)
	if err != nil {
		return g.bad(req, err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	var ok []remoting.MessageQueue
	for _, mq := range b.MQSet {
		k := offsetKey(b.ConsumerGroup, mq.Topic, mq.QueueID)
		holder := g.mu.locks[k]
		switch {
		case req.Code == remoting.UnlockBatchMQ:
			if holder == b.ClientID {
				delete(g.mu.locks, k)
			}
		case g.mu.refuseLocks:
		case holder == "" || holder == b.ClientID:
			g.mu.locks[k] = b.ClientID
			ok = append(ok, mq)
		}
	}
	if req.Code == remoting.LockBatchMQ {
		resp.Body, _ = json.Marshal(remoting.LockBatchResponseBody{LockOKMQSet: ok})
	}
	return resp
}

func (g *fakeGroup) setRefuseLocks(refuse bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.refuseLocks = refuse
}

func (g *fakeGroup) setNoNotify(off bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.noNotify = off
}

// offset returns a group's committed offset of a queue (-1: none).
func (g *fakeGroup) offset(group, topic string, queue int32) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off, ok := g.mu.offsets[offsetKey(group, topic, queue)]; ok {
		return off
	}
	return -1
}

// members returns a consumer group's client ids, sorted.
func (g *fakeGroup) members(group string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.mu.consumers[group]))
}
