package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/schedule"
)

// Recalling a delayed or timer message before it is due: gRPC
// RecallMessage and remoting RECALL_MESSAGE (370), which the gRPC call
// becomes, as RocketMQ's proxy does. The leader checks the handle against
// the record it names and proposes a recall entry (store.OpRecall); see
// package schedule for how a recall and the deliveries are ordered.

// recallHandle returns the recall handle of a scheduled message sent with
// UNIQ_KEY id to topic, due at dueMs, stored as offsetMsgID says.
func (b *Broker) recallHandle(topic, id string, dueMs int64, offsetMsgID string) string {
	_, phy, err := message.ParseOffsetMsgID(offsetMsgID)
	if err != nil {
		return ""
	}
	return schedule.Handle{Topic: topic, BrokerName: b.cfg.BrokerName, Due: dueMs, MsgID: id, Phy: phy}.Encode()
}

// RecallMessage recalls the delayed message its handle names, if it is not
// due yet. A normal message has no handle; a handle that does not decode,
// names another topic or no waiting message is BAD_REQUEST; a message due
// already (delivered, or being delivered) is NOT_FOUND. Its topic needs
// PUB.
func (s *grpcService) RecallMessage(ctx context.Context, req *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	topic := req.GetTopic().GetName()
	ak, denied := s.authorize(ctx, "RecallMessage", []acl.Resource{{Name: topic, Perm: acl.Pub}})
	if denied != nil {
		return &rmqpb.RecallMessageResponse{Status: denied}, nil
	}
	switch {
	case topic == "":
		return &rmqpb.RecallMessageResponse{Status: st(rmqpb.Code_ILLEGAL_TOPIC, "no topic")}, nil
	case req.RecallHandle == "":
		return &rmqpb.RecallMessageResponse{Status: st(rmqpb.Code_BAD_REQUEST, "no recall handle")}, nil
	}
	resp := s.exec(ctx, ak, remoting.NewRequest(remoting.RecallMessage, map[string]string{"producerGroup": topic, "topic": topic,
		"recallHandle": req.RecallHandle}, nil))
	out := &rmqpb.RecallMessageResponse{}
	switch resp.Code {
	case remoting.Success:
		out.Status, out.MessageId = ok(), resp.ExtFields["msgId"]
	case remoting.IllegalOperation:
		out.Status = st(rmqpb.Code_BAD_REQUEST, "%s", resp.Remark)
	case remoting.NoMessage:
		out.Status = st(rmqpb.Code_NOT_FOUND, "%s", resp.Remark)
	default:
		out.Status = remotingStatus(resp)
	}
	return out, nil
}

// handleRecall serves RECALL_MESSAGE on the leader.
func (b *Broker) handleRecall(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	topic, raw := req.ExtFields["topic"], req.ExtFields["recallHandle"]
	if topic == "" || raw == "" {
		return b.refuse(conn, req, remoting.InvalidParameter, "recall without topic or recallHandle")
	}
	if _, found := b.rep.Store().Topic(topic); !found {
		return b.refuse(conn, req, remoting.TopicNotExist, fmt.Sprintf("recall failed, the topic[%s] not exist", topic))
	}
	h, err := schedule.DecodeHandle(raw)
	if err != nil {
		return b.refuse(conn, req, remoting.IllegalOperation, fmt.Sprintf("recall failed: %v (a normal message has no recall handle)", err))
	}
	switch {
	case h.Topic != topic:
		return b.refuse(conn, req, remoting.IllegalOperation, fmt.Sprintf("recall failed, topic not match: the handle is of %s", h.Topic))
	case h.BrokerName != b.cfg.BrokerName:
		return b.refuse(conn, req, remoting.IllegalOperation, fmt.Sprintf("recall failed: the handle is of broker %s, this is %s", h.BrokerName, b.cfg.BrokerName))
	}
	// The handle must name a record waiting in the schedule topic for
	// this message (retention may have removed it: then it was due long
	// ago, or it never was).
	m, err := b.rep.Store().RecordAt(h.Phy)
	if err != nil || m.Topic != schedule.Topic || m.Properties[message.PropertyRealTopic] != topic || m.UniqKey() != h.MsgID {
		return b.refuse(conn, req, remoting.IllegalOperation, fmt.Sprintf("recall failed: no delayed message %s of %s at the handle's position", h.MsgID, topic))
	}
	now := time.Now().UnixMilli()
	if h.Due <= now {
		return remoting.NewResponse(req, remoting.NoMessage, fmt.Sprintf("recall failed, timestamp invalid: message %s was due at %s", h.MsgID, time.UnixMilli(h.Due).UTC().Format(time.RFC3339Nano)))
	}
	err = b.exec(ctx, &store.Command{Op: store.OpRecall, Recall: &schedule.Recall{Topic: topic, MsgID: h.MsgID, Due: h.Due, Now: now}})
	switch {
	case errors.Is(err, schedule.ErrRecallTooLate):
		return remoting.NewResponse(req, remoting.NoMessage, fmt.Sprintf("recall failed: message %s is due: %v", h.MsgID, err))
	case err != nil:
		return b.errorResponse(req, fmt.Errorf("recall: %w", err))
	}
	b.log.Info("cluster: scheduled message recalled", "topic", topic, "msg_id", h.MsgID, "due", h.Due)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"msgId": h.MsgID}
	return resp
}
