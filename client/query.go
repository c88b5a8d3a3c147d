package client

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Message queries: by key (KEYS or UNIQ_KEY) through the index, and by
// offsetMsgId through the commit log. They are reads: served by the
// leader, or by any node when the leader cannot be reached (a follower
// answers from what it has applied).

// queryTimeout bounds one query request.
const queryTimeout = 5 * time.Second

// QueryMessages returns up to max messages of topic stored between begin
// and end whose KEYS contain key or whose UNIQ_KEY is key; with unique,
// only a UNIQ_KEY match counts. No match is (nil, nil).
func (c *Client) QueryMessages(ctx context.Context, topic, key string, unique bool, max int, begin, end time.Time) ([]*MessageExt, error) {
	h := remoting.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(max),
		BeginTimestamp: begin.UnixMilli(), EndTimestamp: end.UnixMilli(), UniqueKey: unique}
	ext := h.Encode()
	resp, addr, err := c.invokeRead(ctx, "", func() *remoting.Command { return remoting.NewRequest(remoting.QueryMessage, ext, nil) }, queryTimeout)
	if err != nil {
		return nil, fmt.Errorf("client: query %s key %q: %w", topic, key, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.QueryNotFound:
		return nil, nil
	default:
		return nil, responseError(addr, resp)
	}
	ms, err := DecodeMessages(resp.Body, "", 0)
	if err != nil {
		return nil, fmt.Errorf("client: query answer from %s: %w", addr, err)
	}
	return ms, nil
}

// ViewMessage returns the message an offsetMsgId (the broker's message
// id: store host and commit-log offset) points at.
func (c *Client) ViewMessage(ctx context.Context, offsetMsgID string) (*MessageExt, error) {
	_, phy, err := message.ParseOffsetMsgID(offsetMsgID)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ext := (&remoting.ViewMessageRequestHeader{Offset: phy}).Encode()
	resp, addr, err := c.invokeRead(ctx, "", func() *remoting.Command { return remoting.NewRequest(remoting.ViewMessageByID, ext, nil) }, queryTimeout)
	if err != nil {
		return nil, fmt.Errorf("client: view message %s: %w", offsetMsgID, err)
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	ms, err := DecodeMessages(resp.Body, "", 0)
	if err != nil {
		return nil, fmt.Errorf("client: view answer from %s: %w", addr, err)
	}
	if len(ms) != 1 {
		return nil, fmt.Errorf("client: view answer from %s holds %d messages, want 1: %w", addr, len(ms), ErrProtocol)
	}
	return ms[0], nil
}
