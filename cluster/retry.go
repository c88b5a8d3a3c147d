package cluster

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Retries and dead letters: CONSUMER_SEND_MSG_BACK (36), as RocketMQ's
// broker answers it. A message a consumer failed is written again to its
// group's %RETRY% topic, delayed by level 3 + its reconsume count (10 s,
// 30 s, 1 min, ... 2 h) unless the consumer names a level; once it was
// consumed the group's retryMaxTimes (or the consumer's
// maxReconsumeTimes), or when the consumer asks (delay level < 0), it goes
// to the group's %DLQ% topic instead, which consumers do not read by
// default (write-only permission).

// DLQGroupTopic returns a consumer group's dead-letter topic, %DLQ%group.
func DLQGroupTopic(group string) string { return "%DLQ%" + group }

func (b *Broker) handleSendBack(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeConsumerSendMsgBackRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	return b.leaderOnly(ctx, req, func(ctx context.Context) *remoting.Command {
		m, dlq, err := b.sendBackMessage(ctx, &h)
		if err != nil {
			return b.refuse(conn, req, remoting.SystemError, err.Error())
		}
		m.RawProperties = message.EncodeProperties(m.Properties)
		if _, err := b.divert(m, time.Now().UnixMilli()); err != nil {
			return b.refuse(conn, req, remoting.SystemError, err.Error())
		}
		if err := b.ensureTopic(ctx, m.Topic); err != nil {
			return b.errorResponse(req, err)
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.SendTimeout)
		res, err := b.rep.Send(sctx, []*message.Message{m})
		cancel()
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			return b.errorResponse(req, err)
		}
		target := "retry"
		if dlq {
			target = "dlq"
			b.log.Info("cluster: message moved to the dead-letter queue", "group", h.Group, "topic", m.Properties[message.PropertyRetryTopic],
				"msgId", m.Properties[message.PropertyOriginMessageID], "reconsumeTimes", m.ReconsumeTimes)
		}
		b.met.SendBack.WithLabelValues(target).Inc()
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// sendBackMessage builds the message a send-back writes: the consumed one
// again, for the group's retry topic with its delay level, or for its
// dead-letter topic. It creates, through raft, the group's config and
// retry or dead-letter topic where they are missing.
func (b *Broker) sendBackMessage(ctx context.Context, h *remoting.ConsumerSendMsgBackRequestHeader) (*message.Message, bool, error) {
	st := b.rep.Store()
	if err := b.ensureGroup(ctx, h.Group); err != nil {
		return nil, false, err
	}
	gc, ok := st.SubscriptionGroup(h.Group)
	if !ok {
		return nil, false, fmt.Errorf("subscription group [%s] not exist", h.Group)
	}
	orig, err := st.RecordAt(h.Offset)
	if err != nil {
		return nil, false, fmt.Errorf("look message by offset failed, %d: %w", h.Offset, err)
	}
	props := maps.Clone(orig.Properties)
	if props == nil {
		props = map[string]string{}
	}
	for _, k := range scheduleProps {
		delete(props, k)
	}
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = orig.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		id := h.OriginMsgID
		if id == "" {
			id = message.OffsetMsgID(orig.StoreHost, h.Offset)
		}
		props[message.PropertyOriginMessageID] = id
	}
	maxTimes := gc.RetryMaxTimes
	if h.MaxReconsumeTimes > 0 {
		maxTimes = h.MaxReconsumeTimes
	}
	m := &message.Message{Flag: orig.Flag, SysFlag: orig.SysFlag, BornTimestamp: orig.BornTimestamp, BornHost: orig.BornHost,
		ReconsumeTimes: orig.ReconsumeTimes + 1, Body: orig.Body, Properties: props}
	if orig.ReconsumeTimes >= maxTimes || h.DelayLevel < 0 {
		m.Topic = DLQGroupTopic(h.Group)
		if _, ok := st.Topic(m.Topic); !ok {
			tc := dlqTopicConfig(m.Topic)
			if err := b.exec(ctx, &store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
				return nil, false, fmt.Errorf("create dead-letter topic %s: %w", m.Topic, err)
			}
		}
		return m, true, nil
	}
	level := h.DelayLevel
	if level == 0 {
		level = 3 + orig.ReconsumeTimes
	}
	props[message.PropertyDelayTimeLevel] = strconv.Itoa(int(level))
	m.Topic = RetryGroupTopic(h.Group)
	m.QueueID = int32(rand.IntN(int(max(gc.RetryQueueNums, 1))))
	return m, false, nil
}

// dlqTopicConfig is a dead-letter topic's config: one queue, readable and
// writable (permission 6), as RocketMQ 4.9 and 5.x create it.
func dlqTopicConfig(name string) offsets.TopicConfig {
	return offsets.NewTopicConfig(name, 1)
}

// retryPastMax handles a plain send to a %RETRY% topic (a client's
// fallback when CONSUMER_SEND_MSG_BACK failed): a copy whose reconsume
// count is past the group's maximum (or the maxReconsumeTimes the client
// sent) goes to the group's dead-letter topic instead, undelayed, as
// RocketMQ's broker does. The header's count is the copy's (the consumed
// message's plus one), so the rule is count > maximum, the send-back
// path's rule for the consumed message (count >= maximum). It rewrites m
// and returns the dead-letter topic, or reports false.
func (b *Broker) retryPastMax(h *remoting.SendMessageRequestHeader, m *message.Message) (string, bool) {
	group, ok := strings.CutPrefix(h.Topic, "%RETRY%")
	if !ok || group == "" {
		return "", false
	}
	maxTimes := int32(offsets.NewSubscriptionGroupConfig(group).RetryMaxTimes)
	if gc, ok := b.rep.Store().SubscriptionGroup(group); ok {
		maxTimes = gc.RetryMaxTimes
	}
	if h.MaxReconsumeTimes > 0 {
		maxTimes = h.MaxReconsumeTimes
	}
	if h.ReconsumeTimes <= maxTimes {
		return "", false
	}
	raw := m.RawProperties
	for _, k := range scheduleProps {
		raw = message.DeleteRawProperty(raw, k)
	}
	m.Topic, m.QueueID, m.RawProperties = DLQGroupTopic(group), 0, raw
	b.log.Info("cluster: a retry past its group's maximum goes to the dead-letter queue", "group", group, "reconsumeTimes", h.ReconsumeTimes, "max", maxTimes)
	return m.Topic, true
}
