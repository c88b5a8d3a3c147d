package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Topic creation defaults (RocketMQ's).
const (
	// DefaultTopicTemplate is the template topic named in send and create
	// headers ("TBW102").
	DefaultTopicTemplate = "TBW102"
	// defaultTopicQueueNums is the queue count a send header proposes for
	// an auto-created topic.
	defaultTopicQueueNums = 4
	topicFilterSingleTag  = "SINGLE_TAG"
)

// CreateTopic creates topic, or updates it, with queues read and write
// queues and read-write permission (UPDATE_AND_CREATE_TOPIC, answered once
// committed). It goes to the leader; any node forwards it. It is retried
// after indeterminate outcomes, since creating a topic twice is harmless.
func (c *Client) CreateTopic(ctx context.Context, topic string, queues int) error {
	if err := message.CheckTopic(topic); err != nil {
		return fmt.Errorf("client: create topic: %w", err)
	}
	if queues <= 0 || queues > 1<<16 {
		return fmt.Errorf("client: create topic %s: %d queues, want 1 to 65536", topic, queues)
	}
	h := remoting.CreateTopicRequestHeader{
		Topic:           topic,
		DefaultTopic:    DefaultTopicTemplate,
		ReadQueueNums:   int32(queues),
		WriteQueueNums:  int32(queues),
		Perm:            remoting.PermRead | remoting.PermWrite,
		TopicFilterType: topicFilterSingleTag,
	}
	mk := func() *remoting.Command { return remoting.NewRequest(remoting.UpdateAndCreateTopic, h.Encode(), nil) }
	resp, addr, err := c.invokeLeader(ctx, mk, true)
	if err != nil {
		return fmt.Errorf("client: create topic %s: %w", topic, err)
	}
	c.routes.forget(topic)
	if resp.Code != remoting.Success {
		return fmt.Errorf("client: create topic %s: %w", topic, responseError(addr, resp))
	}
	return nil
}

// forget drops topic's cached route, so the next use fetches it.
func (rc *routeCache) forget(topic string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if e := rc.m[topic]; e != nil && e.fetching == nil {
		delete(rc.m, topic)
	}
}

// NodeStatus returns the raw JSON status (membership, roles, raft indexes)
// of the node at addr (admin code ClusterStatus, 9001).
func (c *Client) NodeStatus(ctx context.Context, addr string) (json.RawMessage, error) {
	resp, _, err := c.invoke(ctx, addr, remoting.NewRequest(remoting.ClusterStatus, nil, nil), c.timeout)
	if err != nil {
		return nil, fmt.Errorf("client: status of %s: %w", addr, err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("client: status of %s: %w", addr, responseError(addr, resp))
	}
	if !json.Valid(resp.Body) {
		return nil, fmt.Errorf("client: status of %s is not JSON: %w", addr, ErrProtocol)
	}
	return json.RawMessage(slices.Clone(resp.Body)), nil
}

// TransferLeader asks the leader to hand leadership to node to (admin code
// TransferLeader, 9002). It is not retried after an indeterminate outcome.
func (c *Client) TransferLeader(ctx context.Context, to uint64) error {
	if to == 0 {
		return errors.New("client: transfer leader: node id 0")
	}
	ext := map[string]string{"id": strconv.FormatUint(to, 10)}
	if err := c.admin(ctx, remoting.TransferLeader, ext); err != nil {
		return fmt.Errorf("client: transfer leader to %d: %w", to, err)
	}
	c.leader.Store(nil) // it moved; the next request finds it
	return nil
}

// AddNode adds node id, serving clients at clientAddr and raft at raftAddr,
// to the group (admin code AddNode, 9003).
func (c *Client) AddNode(ctx context.Context, id uint64, clientAddr, raftAddr string) error {
	if id == 0 {
		return errors.New("client: add node: node id 0")
	}
	for _, a := range []string{clientAddr, raftAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("client: add node %d: bad address %q: %w", id, a, err)
		}
	}
	ext := map[string]string{"id": strconv.FormatUint(id, 10), "client": clientAddr, "raft": raftAddr}
	if err := c.admin(ctx, remoting.AddNode, ext); err != nil {
		return fmt.Errorf("client: add node %d: %w", id, err)
	}
	c.learn(clientAddr)
	return nil
}

// RemoveNode removes node id from the group (admin code RemoveNode, 9004).
func (c *Client) RemoveNode(ctx context.Context, id uint64) error {
	if id == 0 {
		return errors.New("client: remove node: node id 0")
	}
	ext := map[string]string{"id": strconv.FormatUint(id, 10)}
	if err := c.admin(ctx, remoting.RemoveNode, ext); err != nil {
		return fmt.Errorf("client: remove node %d: %w", id, err)
	}
	return nil
}

// admin sends a leader-only admin command, not retried after
// indeterminate outcomes, and turns a non-success answer into an *Error.
func (c *Client) admin(ctx context.Context, code int32, ext map[string]string) error {
	// The link encodes a request before Invoke returns and never changes its
	// ext fields, so every attempt can share ext.
	mk := func() *remoting.Command { return remoting.NewRequest(code, ext, nil) }
	resp, addr, err := c.invokeLeader(ctx, mk, false)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return responseError(addr, resp)
	}
	return nil
}
