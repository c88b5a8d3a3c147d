package client

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The fake group's retry and transaction requests: CONSUMER_SEND_MSG_BACK
// stores a copy of the message in %RETRY%<group> (or %DLQ%<group>) as
// Apache's broker does; END_TRANSACTION is answered SUCCESS and changes
// nothing (tests read the requests); CHECK_TRANSACTION_STATE is sent on a
// test's demand to the connection a producer group heartbeated on.

// findPhysLocked returns the stored record at commit log offset phys.
func (g *fakeGroup) findPhysLocked(phys int64) (message.Message, bool) {
	for _, recs := range g.mu.queues {
		for _, rec := range recs {
			m, _, err := message.Decode(rec)
			if err == nil && m.PhysicalOffset == phys {
				return m, true
			}
		}
	}
	return message.Message{}, false
}

// storeLocked appends m to topic's queue 0 (creating the topic with one
// queue if needed), as node n, and returns its record.
func (g *fakeGroup) storeLocked(n *fakeNode, topic string, m message.Message) ([]byte, error) {
	if _, ok := g.mu.topics[topic]; !ok {
		g.mu.topics[topic] = 1
	}
	q := fakeQ{topic, 0}
	m.Topic, m.QueueID, m.QueueOffset, m.PhysicalOffset = topic, 0, int64(len(g.mu.queues[q])), g.mu.phys
	m.StoreHost, m.StoreTimestamp = netip.MustParseAddrPort(n.addr), time.Now().UnixMilli()
	rec, err := message.Append(nil, &m)
	if err != nil {
		return nil, err
	}
	g.mu.queues[q] = append(g.mu.queues[q], rec)
	g.mu.phys += int64(len(rec))
	return rec, nil
}

// sendBackLocked serves CONSUMER_SEND_MSG_BACK like Apache's
// consumerSendMsgBack, without delays.
func (g *fakeGroup) sendBackLocked(n *fakeNode, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeConsumerSendMsgBackRequestHeader(req.ExtFields)
	if err != nil {
		return g.bad(req, err)
	}
	if g.mu.refuseSendBack {
		return remoting.NewResponse(req, remoting.SystemError, "send back refused by the test")
	}
	m, ok := g.findPhysLocked(h.Offset)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("no message at offset %d", h.Offset))
	}
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	if m.Properties[message.PropertyRetryTopic] == "" {
		m.Properties[message.PropertyRetryTopic] = m.Topic
	}
	if m.Properties[message.PropertyOriginMessageID] == "" {
		m.Properties[message.PropertyOriginMessageID] = h.OriginMsgID
	}
	maxTimes := h.MaxReconsumeTimes
	if maxTimes == 0 {
		maxTimes = 16
	}
	topic := RetryTopic(h.Group)
	if h.DelayLevel < 0 || m.ReconsumeTimes >= maxTimes {
		topic = "%DLQ%" + h.Group
		delete(m.Properties, message.PropertyDelayTimeLevel)
	}
	m.ReconsumeTimes++
	if _, err := g.storeLocked(n, topic, m); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// endTransactionLocked answers END_TRANSACTION; the tests read the
// requests the node recorded.
func (g *fakeGroup) endTransactionLocked(req *remoting.Command) *remoting.Command {
	if _, err := remoting.DecodeEndTransactionRequestHeader(req.ExtFields); err != nil {
		return g.bad(req, err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// setRefuseSendBack makes CONSUMER_SEND_MSG_BACK fail.
func (g *fakeGroup) setRefuseSendBack(refuse bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.refuseSendBack = refuse
}

// records returns copies of a queue's stored messages, decoded.
func (g *fakeGroup) records(topic string, queue int32) []message.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []message.Message
	for _, rec := range g.mu.queues[fakeQ{topic, queue}] {
		m, _, err := message.Decode(rec)
		if err != nil {
			g.t.Errorf("fake broker: stored record of %s/%d: %v", topic, queue, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// producerConns returns the connections of a producer group's members.
func (g *fakeGroup) producerConns(group string) []*remoting.ServerConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*remoting.ServerConn
	for _, c := range g.mu.producers[group] {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// checkTransaction sends a one-way CHECK_TRANSACTION_STATE about the
// stored half message at commit log offset phys, with topic and queue set
// back to the real ones (as Apache's broker does), to every connection of
// the producers of group; it returns how many it was sent to.
func (g *fakeGroup) checkTransaction(group string, phys int64) (int, error) {
	g.mu.Lock()
	m, ok := g.findPhysLocked(phys)
	g.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("no half message at %d", phys)
	}
	h := remoting.CheckTransactionStateRequestHeader{
		Topic: m.Topic, TranStateTableOffset: m.QueueOffset, CommitLogOffset: m.PhysicalOffset,
		MsgID: m.UniqKey(), TransactionID: m.UniqKey(), OffsetMsgID: message.OffsetMsgID(m.StoreHost, m.PhysicalOffset),
	}
	body, err := message.Append(nil, &m)
	if err != nil {
		return 0, err
	}
	conns := g.producerConns(group)
	for _, c := range conns {
		if err := c.Oneway(remoting.NewRequest(remoting.CheckTransactionState, h.Encode(), body)); err != nil {
			return 0, err
		}
	}
	return len(conns), nil
}
