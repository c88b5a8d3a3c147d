package cluster

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/cluster/filter"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Server-side filtering of pulls (package filter): the subscription comes
// from the pull itself when it carries one (PullSysFlagSubscription),
// else from the group's heartbeats, as RocketMQ's broker takes it. A pull
// that carries none, of a group and topic no heartbeat subscribed on this
// node, is answered SUBSCRIPTION_NOT_EXIST, as RocketMQ does, and the
// client pulls again later, once its heartbeat is here. RocketMQ's push
// consumers pull without the flag, and rocketmq-client-go's say TAG in
// the pull's expression type whatever they subscribed: a first pull that
// overtook the heartbeat, served unfiltered, would hand an SQL92 or tag
// subscriber messages its expression rejects, which the client does not
// filter again. A pull whose subscription version is newer than the
// heartbeat's is answered SUBSCRIPTION_NOT_LATEST for the same reason
// (Java's clients send the version; Go's send 0). raftmq's own consumer
// always sends its subscription in the pull.

// pullFilter returns the filter of a pull (nil: everything), or an error
// response for an expression that does not compile.
func (b *Broker) pullFilter(req *remoting.Command, h *remoting.PullMessageRequestHeader) (filter.Filter, *remoting.Command) {
	typ, expr := h.ExpressionType, h.Subscription
	if h.SysFlag&remoting.PullSysFlagSubscription == 0 {
		sub, ok := b.members.Subscription(h.ConsumerGroup, h.Topic)
		if !ok {
			b.log.Debug("cluster: pull before the consumer's heartbeat", "group", h.ConsumerGroup, "topic", h.Topic)
			return nil, remoting.NewResponse(req, remoting.SubscriptionNotExist,
				fmt.Sprintf("the consumer's subscription not exist, group: %s topic: %s (no heartbeat yet)", h.ConsumerGroup, h.Topic))
		}
		if sub.SubVersion < h.SubVersion {
			b.log.Debug("cluster: pull newer than the consumer's heartbeat", "group", h.ConsumerGroup, "topic", h.Topic,
				"heartbeat", sub.SubVersion, "pull", h.SubVersion)
			return nil, remoting.NewResponse(req, remoting.SubscriptionNotLatest,
				fmt.Sprintf("the consumer's subscription not latest, group: %s topic: %s", h.ConsumerGroup, h.Topic))
		}
		typ, expr = sub.ExpressionType, sub.SubString
	}
	f, err := b.filters.Get(typ, expr)
	if err != nil {
		return nil, b.refuse(nil, req, remoting.SubscriptionParseFailed, fmt.Sprintf("parse the consumer's subscription [%s] failed: %v", expr, err))
	}
	return f, nil
}

// keepMatching drops from gr the records whose properties f rejects,
// compacting gr.Body in place. If it drops every record, gr says
// NoMatchedMessage (the pull answers PULL_RETRY_IMMEDIATELY and the
// consumer moves on to NextBeginOffset).
func keepMatching(gr *store.GetResult, f filter.Filter) {
	if f == nil || gr.Status != store.Found {
		return
	}
	kept, off := 0, 0
	for i, rec := range gr.Records {
		v, err := message.Parse(rec, false)
		if err != nil {
			continue // not a message we can judge: not delivered
		}
		props := v.Properties
		if !f.MatchProperties(func(name string) (string, bool) {
			b, ok := message.PropertyBytes(props, name)
			return string(b), ok
		}) {
			continue
		}
		n := copy(gr.Body[off:], rec)
		gr.Records[kept] = gr.Body[off : off+n : off+n]
		gr.QueueOffsets[kept] = gr.QueueOffsets[i]
		kept++
		off += n
	}
	gr.Records, gr.QueueOffsets, gr.Body = gr.Records[:kept], gr.QueueOffsets[:kept], gr.Body[:off]
	if kept == 0 {
		gr.Status = store.NoMatchedMessage
	}
}

// handleCheckClientConfig answers CHECK_CLIENT_CONFIG (46), which Java
// consumers send before they start with an SQL92 subscription: SUCCESS if
// the expression compiles, SUBSCRIPTION_PARSE_FAILED otherwise.
func (b *Broker) handleCheckClientConfig(conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	var body struct {
		ClientID         string                    `json:"clientId"`
		Group            string                    `json:"group"`
		SubscriptionData remoting.SubscriptionData `json:"subscriptionData"`
	}
	if err := remoting.DecodeJSON(req.Body, &body); err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, fmt.Sprintf("check client config: %v", err))
	}
	sd := body.SubscriptionData
	if _, err := b.filters.Get(sd.ExpressionType, sd.SubString); err != nil {
		code := remoting.SubscriptionParseFailed
		if !errors.Is(err, filter.ErrBadExpression) {
			code = remoting.SystemError
		}
		return b.refuse(conn, req, code, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}
