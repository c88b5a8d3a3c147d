package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Retry through the broker, as RocketMQ's push consumers do: a message
// whose callback asked to retry goes back to the broker, which stores a
// copy in the group's retry topic %RETRY%<group> (delivered again after a
// delay that grows with ReconsumeTimes) or, past the group's limit, in its
// dead-letter queue %DLQ%<group>. Once the broker has it, the original
// counts as consumed and no longer holds back its queue's offset.

const (
	// innerProducerGroup is the producer group of the consumer's own
	// sends to retry topics (RocketMQ's CLIENT_INNER_PRODUCER).
	innerProducerGroup = "CLIENT_INNER_PRODUCER"
	// delayLevelDLQ as a send-back's delay level sends the message
	// straight to the group's dead-letter queue.
	delayLevelDLQ int32 = -1
	// maxDelayLevel is RocketMQ's highest delay level (2 h).
	maxDelayLevel = 18
)

// sendBack returns m to the broker: CONSUMER_SEND_MSG_BACK to the node m
// was pulled from (following a leader the node names), and if that fails
// a plain send of a copy to the group's retry topic (sendToRetry). A nil
// error means the broker has it; m counts as consumed.
func (p *PushConsumer) sendBack(m *MessageExt, delayLevel int32) error {
	ctx, cancel := context.WithTimeout(p.cbCtx, p.c.timeout)
	err := p.sendMsgBack(ctx, m, delayLevel)
	cancel()
	if err == nil {
		return nil
	}
	p.log.Debug("client: CONSUMER_SEND_MSG_BACK failed; sending to the retry topic",
		"msgId", m.MsgID, "topic", m.Topic, "err", err)
	ctx, cancel = context.WithTimeout(p.cbCtx, p.c.timeout*adminAttempts)
	defer cancel()
	if err2 := p.sendToRetry(ctx, m); err2 != nil {
		return fmt.Errorf("client: send back %s: %w; then to %s: %w", m.MsgID, err, RetryTopic(p.o.Group), err2)
	}
	return nil
}

// sendMsgBack sends CONSUMER_SEND_MSG_BACK (36) for m. delayLevel 0 lets
// the broker choose (3 + reconsumeTimes), delayLevelDLQ sends m to the
// dead-letter queue.
func (p *PushConsumer) sendMsgBack(ctx context.Context, m *MessageExt, delayLevel int32) error {
	h := remoting.ConsumerSendMsgBackRequestHeader{
		Offset:            m.CommitLogOffset,
		Group:             p.o.Group,
		DelayLevel:        delayLevel,
		OriginMsgID:       m.MsgID,
		OriginTopic:       m.Topic,
		MaxReconsumeTimes: int32(p.o.MaxReconsumeTimes),
	}
	addr := m.pulledFrom
	if addr == "" {
		addr = p.c.writeTarget("")
	}
	for attempt := 0; ; attempt++ {
		resp, _, err := p.c.invoke(ctx, addr, remoting.NewRequest(remoting.ConsumerSendMsgBack, h.Encode(), nil), p.c.timeout)
		if err != nil {
			return err
		}
		if resp.Code == remoting.Success {
			return nil
		}
		e := responseError(addr, resp)
		// A follower names the leader: follow it once.
		if hint, ok := e.LeaderHint(); ok && hint != addr && attempt == 0 {
			p.c.setLeader(hint)
			addr = hint
			continue
		}
		return e
	}
}

// sendToRetry sends a copy of m to the group's retry topic, as RocketMQ's
// clients do when CONSUMER_SEND_MSG_BACK fails (sendMessageBackAsNormal):
// m's body, flag and properties, plus ORIGIN_MESSAGE_ID (the first
// delivery's id), RETRY_TOPIC (the original topic, if not set yet) and
// DELAY = 3 + ReconsumeTimes (at most 18), without TRAN_MSG; header
// reconsumeTimes = ReconsumeTimes + 1 and maxReconsumeTimes. A broker
// moves a copy whose reconsumeTimes exceeds maxReconsumeTimes to the
// dead-letter queue instead.
//
// The copy keeps the message's UNIQ_KEY, as RocketMQ's does, so that the
// consumer gets it back under the same msgId; raftmq's brokers tell the
// copies of one message apart by their reconsume count when they
// deduplicate.
func (p *PushConsumer) sendToRetry(ctx context.Context, m *MessageExt) error {
	msg := retryCopy(m, p.o.Group)
	_, err := p.retry.sendWith(ctx, msg, sendExtra{
		reconsumeTimes:    m.ReconsumeTimes + 1,
		maxReconsumeTimes: int32(p.o.MaxReconsumeTimes),
	})
	return err
}

// retryCopy builds the retry-topic copy of m for group.
func retryCopy(m *MessageExt, group string) *Message {
	props := m.Properties()
	if props == nil {
		props = map[string]string{}
	}
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = m.MsgID
	}
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = m.Topic
	}
	delete(props, message.PropertyTransactionPrepared)
	props[message.PropertyDelayTimeLevel] = strconv.Itoa(int(min(3+m.ReconsumeTimes, maxDelayLevel)))
	return &Message{Topic: RetryTopic(group), QueueID: AnyQueue, Body: m.Body, Flag: m.Flag, Properties: props}
}

// sendBackBatch sends back each message of a concurrent batch whose
// callback asked to retry, and returns those the broker did not take.
func (w *queueWorker) sendBackBatch(batch []*MessageExt) (failed []*MessageExt) {
	p := w.p
	for _, m := range batch {
		if err := p.sendBack(m, 0); err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.Warn("client: sending a failed message back to the broker failed; it will be retried locally",
					"queue", w.mq, "offset", m.QueueOffset, "msgId", m.MsgID, "err", err)
			}
			failed = append(failed, m)
		}
	}
	return failed
}
