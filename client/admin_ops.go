package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The operator's admin requests (mqadmin's): reads of the broker's admin
// views and replicated changes. The views come back as the broker's JSON
// (package cluster's Admin* structs, asked with remoting.FieldAdminView),
// which the caller decodes; TopicStats and ConsumeStats read RocketMQ's
// own bodies, as mqadmin does.

// AdminView sends an admin read (code, ext fields, body) to any node,
// asking for the broker's JSON view, and returns that JSON. A non-success
// answer is an *Error (TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST,
// CONSUMER_NOT_ONLINE, ...).
func (c *Client) AdminView(ctx context.Context, code int32, ext map[string]string, body []byte) (json.RawMessage, error) {
	ext = withView(ext)
	resp, addr, err := c.invokeRead(ctx, "", func() *remoting.Command { return remoting.NewRequest(code, ext, body) }, c.timeout)
	if err != nil {
		return nil, fmt.Errorf("client: admin request %d: %w", code, err)
	}
	return viewBody(addr, resp)
}

// AdminChange sends an admin change to the leader (any node forwards it),
// asking for the broker's JSON view of the outcome, and returns it.
// idempotent allows a retry after an indeterminate outcome.
func (c *Client) AdminChange(ctx context.Context, code int32, ext map[string]string, body []byte, idempotent bool) (json.RawMessage, error) {
	ext = withView(ext)
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command { return remoting.NewRequest(code, ext, body) }, idempotent)
	if err != nil {
		return nil, fmt.Errorf("client: admin request %d: %w", code, err)
	}
	return viewBody(addr, resp)
}

func withView(ext map[string]string) map[string]string {
	ext = maps.Clone(ext)
	if ext == nil {
		ext = map[string]string{}
	}
	ext[remoting.FieldAdminView] = remoting.AdminViewJSON
	return ext
}

func viewBody(addr string, resp *remoting.Command) (json.RawMessage, error) {
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	if !json.Valid(resp.Body) {
		return nil, fmt.Errorf("client: admin answer from %s is not JSON: %w", addr, ErrProtocol)
	}
	return json.RawMessage(slices.Clone(resp.Body)), nil
}

// TopicConfig is what UpdateTopic sets.
type TopicConfig struct {
	Topic       string
	ReadQueues  int32
	WriteQueues int32
	Perm        int32 // remoting.Perm* bits; 0: read and write
	Order       bool
}

// UpdateTopic creates or updates a topic (UPDATE_AND_CREATE_TOPIC, through
// the leader; retried after indeterminate outcomes, being idempotent).
func (c *Client) UpdateTopic(ctx context.Context, tc TopicConfig) error {
	if err := message.CheckTopic(tc.Topic); err != nil {
		return fmt.Errorf("client: update topic: %w", err)
	}
	if tc.Perm == 0 {
		tc.Perm = remoting.PermRead | remoting.PermWrite
	}
	h := remoting.CreateTopicRequestHeader{Topic: tc.Topic, DefaultTopic: DefaultTopicTemplate, ReadQueueNums: tc.ReadQueues,
		WriteQueueNums: tc.WriteQueues, Perm: tc.Perm, TopicFilterType: topicFilterSingleTag, Order: tc.Order}
	ext := h.Encode()
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command { return remoting.NewRequest(remoting.UpdateAndCreateTopic, ext, nil) }, true)
	if err != nil {
		return fmt.Errorf("client: update topic %s: %w", tc.Topic, err)
	}
	c.routes.forget(tc.Topic)
	if resp.Code != remoting.Success {
		return fmt.Errorf("client: update topic %s: %w", tc.Topic, responseError(addr, resp))
	}
	return nil
}

// DeleteTopic deletes a topic (DELETE_TOPIC_IN_BROKER, through the leader).
// Deleting a missing topic succeeds, as in RocketMQ.
func (c *Client) DeleteTopic(ctx context.Context, topic string) error {
	ext := map[string]string{"topic": topic}
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command { return remoting.NewRequest(remoting.DeleteTopicInBroker, ext, nil) }, true)
	if err != nil {
		return fmt.Errorf("client: delete topic %s: %w", topic, err)
	}
	c.routes.forget(topic)
	if resp.Code != remoting.Success {
		return fmt.Errorf("client: delete topic %s: %w", topic, responseError(addr, resp))
	}
	return nil
}

// UpdateGroup creates or updates a subscription group
// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, through the leader); config is
// RocketMQ's SubscriptionGroupConfig JSON.
func (c *Client) UpdateGroup(ctx context.Context, config []byte) error {
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, config)
	}, true)
	if err != nil {
		return fmt.Errorf("client: update group: %w", err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("client: update group: %w", responseError(addr, resp))
	}
	return nil
}

// DeleteGroup deletes a subscription group (DELETE_SUBSCRIPTIONGROUP,
// through the leader); a group that does not exist is an *Error with
// SUBSCRIPTION_GROUP_NOT_EXIST.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	ext := map[string]string{"groupName": group}
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command { return remoting.NewRequest(remoting.DeleteSubscriptionGroup, ext, nil) }, false)
	if err != nil {
		return fmt.Errorf("client: delete group %s: %w", group, err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("client: delete group %s: %w", group, responseError(addr, resp))
	}
	return nil
}

// TopicStats asks any node for GET_TOPIC_STATS_INFO and decodes
// RocketMQ's TopicStatsTable.
func (c *Client) TopicStats(ctx context.Context, topic string) (map[remoting.MessageQueue]remoting.TopicOffset, error) {
	ext := (&remoting.TopicStatsRequestHeader{Topic: topic}).Encode()
	resp, addr, err := c.invokeRead(ctx, "", func() *remoting.Command { return remoting.NewRequest(remoting.GetTopicStatsInfo, ext, nil) }, c.timeout)
	if err != nil {
		return nil, fmt.Errorf("client: topic stats of %s: %w", topic, err)
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	return remoting.DecodeTopicStatsTable(resp.Body)
}

// ConsumeStats asks any node for GET_CONSUME_STATS and decodes RocketMQ's
// ConsumeStats; topic "" means every topic of the group.
func (c *Client) ConsumeStats(ctx context.Context, group, topic string) (map[remoting.MessageQueue]remoting.OffsetWrapper, error) {
	ext := (&remoting.ConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}).Encode()
	resp, addr, err := c.invokeRead(ctx, "", func() *remoting.Command { return remoting.NewRequest(remoting.GetConsumeStats, ext, nil) }, c.timeout)
	if err != nil {
		return nil, fmt.Errorf("client: consume stats of %s: %w", group, err)
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	t, _, err := remoting.DecodeConsumeStats(resp.Body)
	return t, err
}

// AdminRequest sends a RocketMQ admin request (code, ext fields, body) to
// the leader (any node forwards it) and returns the answer, RocketMQ's
// (not the JSON view). A non-success answer is an *Error. idempotent
// allows a retry after an indeterminate outcome.
func (c *Client) AdminRequest(ctx context.Context, code int32, ext map[string]string, body []byte, idempotent bool) (*remoting.Command, error) {
	resp, addr, err := c.invokeLeader(ctx, func() *remoting.Command { return remoting.NewRequest(code, maps.Clone(ext), body) }, idempotent)
	if err != nil {
		return nil, fmt.Errorf("client: admin request %d: %w", code, err)
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	return resp, nil
}

// NodeRequest sends a request to the node at addr itself (not forwarded
// to the leader: a node's own settings and maintenance) and returns the
// answer's body. A non-success answer is an *Error.
func (c *Client) NodeRequest(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) ([]byte, error) {
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(code, maps.Clone(ext), body))
	if err != nil {
		return nil, fmt.Errorf("client: request %d to %s: %w", code, addr, err)
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	return slices.Clone(resp.Body), nil
}
