package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Message queries, served from this node's index and commit log (a
// follower answers with what it has applied, as any RocketMQ broker answers
// from its own store). A follower learns of a commit after the leader has
// acknowledged the send (raftlog's CommitNotifyDelay, then its own apply),
// so before it answers "not found" it catches up with the leader's commit
// index (followerCatchUp) and looks again: a message whose send was
// acknowledged before the query was sent is found on every node. Only
// misses pay for the round trip.

// maxQueryMessages caps QUERY_MESSAGE's maxNum, as RocketMQ's
// defaultQueryMaxNum does.
const maxQueryMessages = 64

func (b *Broker) handleQueryMessage(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeQueryMessageRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	n := int(h.MaxNum)
	if n <= 0 || n > maxQueryMessages {
		n = maxQueryMessages
	}
	end := h.EndTimestamp
	if end <= 0 {
		end = 1 << 62
	}
	query := func() ([]byte, error) {
		ms, err := b.rep.Store().QueryByKey(h.Topic, h.Key, n, h.BeginTimestamp, end)
		if err != nil {
			return nil, err
		}
		var body []byte
		for _, m := range ms {
			if h.UniqueKey && m.UniqKey() != h.Key {
				continue // matched by KEYS, not by UNIQ_KEY
			}
			body = append(body, m.Raw...)
		}
		return body, nil
	}
	body, err := query()
	if err == nil && len(body) == 0 && b.followerCatchUp(ctx, "message query", "query", "key") {
		body, err = query()
	}
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if len(body) == 0 {
		return remoting.NewResponse(req, remoting.QueryNotFound, fmt.Sprintf("can not find message, maybe time range not correct: topic %s key %s", h.Topic, h.Key))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.QueryMessageResponseHeader{IndexLastUpdateTimestamp: time.Now().UnixMilli(), IndexLastUpdatePhyoffset: b.rep.Store().Log().EndPosition()}
	resp.ExtFields = rh.Encode()
	resp.Body = body
	return resp
}

func (b *Broker) handleViewMessage(ctx context.Context, conn *remoting.ServerConn, req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeViewMessageRequestHeader(req.ExtFields)
	if err != nil {
		return b.refuse(conn, req, remoting.InvalidParameter, err.Error())
	}
	m, err := b.rep.Store().MessageAt(h.Offset)
	if errors.Is(err, store.ErrNotFound) && b.followerCatchUp(ctx, "message query", "query", "offset") {
		m, err = b.rep.Store().MessageAt(h.Offset)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("can not find message by the offset, %d", h.Offset))
	case err != nil:
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	case h.Topic != "" && m.Topic != h.Topic:
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("the message at offset %d is of topic %s, not %s", h.Offset, m.Topic, h.Topic))
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = m.Raw
	return resp
}
