package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The admin changes both front ends make (the CLI's `raftmq admin ...`
// and the console's forms): each is the group's ordinary request, signed
// with the caller's account, ACL-checked and audit-logged by the broker.

// ResetOffset moves group's offsets in every queue of topic to the first
// message stored at or after ts (Unix ms), or to each queue's end with ts
// -1 (skipping the backlog); force allows moving forward. One raft entry;
// online consumers are told.
func ResetOffset(ctx context.Context, cl *client.Client, group, topic string, ts int64, force bool) (cluster.AdminReset, error) {
	h := remoting.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: ts, IsForce: force}
	var v cluster.AdminReset
	err := Change(ctx, cl, remoting.InvokeBrokerToResetOffset, h.Encode(), nil, true, &v)
	return v, err
}

// UpdateGroup creates or replaces a subscription group's config.
func UpdateGroup(ctx context.Context, cl *client.Client, gc offsets.SubscriptionGroupConfig) error {
	if err := gc.Validate(); err != nil {
		return err
	}
	body, err := json.Marshal(gc)
	if err != nil {
		return err
	}
	return cl.UpdateGroup(ctx, body)
}

// Resent is a dead letter sent back to its group.
type Resent struct {
	MsgID       string
	Topic       string
	QueueID     int32
	QueueOffset int64
}

// ErrNoDeadLetter: a resend matched no dead letter.
var ErrNoDeadLetter = errors.New("no dead letter matched")

// ResendDeadLetters sends group's dead letters back to the group (its
// %RETRY% topic, reconsume count 0): the one whose msgId is uniq, or every
// one with uniq "". It stops at the first failure, returning what was
// resent before it.
func ResendDeadLetters(ctx context.Context, cl *client.Client, group, uniq string) ([]Resent, error) {
	ms, err := DeadLetters(ctx, cl, group, 0)
	if err != nil {
		return nil, err
	}
	p := cl.NewProducer(client.ProducerOptions{Group: "raftmq-admin-dlq"})
	var out []Resent
	for _, m := range ms {
		if uniq != "" && m.MsgID != uniq {
			continue
		}
		props := maps.Clone(m.Properties())
		if props == nil {
			props = map[string]string{}
		}
		if props[message.PropertyRetryTopic] == "" {
			props[message.PropertyRetryTopic] = m.Topic
		}
		res, err := p.Send(ctx, &client.Message{Topic: client.RetryTopic(group), QueueID: 0, Body: m.Body, Flag: m.Flag, Properties: props})
		if err != nil {
			return out, fmt.Errorf("resend %s: %w (%d resent before it)", m.MsgID, err, len(out))
		}
		out = append(out, Resent{MsgID: m.MsgID, Topic: client.RetryTopic(group), QueueID: res.QueueID, QueueOffset: res.QueueOffset})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("group %s: %w", group, ErrNoDeadLetter)
	}
	return out, nil
}

// ErrUnknownSetting: a broker setting no node lists.
var ErrUnknownSetting = errors.New("unknown broker setting")

// ErrRestartSetting: a setting that changes only with a restart.
var ErrRestartSetting = errors.New("the setting needs a restart: change the nodes' flag or config file")

// UpdateSetting changes a runtime broker setting: a group-wide one
// through raft (any node forwards it to the leader), a node's own on each
// of nodes (the group's members when empty). It returns the setting's
// scope and the nodes changed (none for a group-wide one).
func UpdateSetting(ctx context.Context, cl *client.Client, nodes []string, key, value string) (string, []string, error) {
	if len(nodes) == 0 {
		var err error
		if nodes, err = Nodes(ctx, cl); err != nil {
			return "", nil, err
		}
	}
	set, err := Settings(ctx, cl, nodes[0])
	if err != nil {
		return "", nil, err
	}
	i := slices.IndexFunc(set, func(s cluster.AdminSetting) bool { return s.Key == key })
	if i < 0 {
		return "", nil, fmt.Errorf("%w %q", ErrUnknownSetting, key)
	}
	body := []byte(key + "=" + value + "\n")
	switch set[i].Scope {
	case cluster.ScopeGroup:
		_, err := cl.AdminRequest(ctx, cluster.CodeUpdateBrokerConfig, nil, body, true)
		return set[i].Scope, nil, err
	case cluster.ScopeNode:
		var done []string
		for _, n := range nodes {
			if _, err := cl.NodeRequest(ctx, n, cluster.CodeUpdateBrokerConfig, nil, body); err != nil {
				return set[i].Scope, done, fmt.Errorf("%s: %w", n, err)
			}
			done = append(done, n)
		}
		return set[i].Scope, done, nil
	}
	return set[i].Scope, nil, fmt.Errorf("%s: %w", key, ErrRestartSetting)
}

// ACL is the group's ACL without secret keys (GET_BROKER_CLUSTER_ACL_INFO,
// admin accounts only).
func ACL(ctx context.Context, cl *client.Client) (cluster.AdminACL, error) {
	var v cluster.AdminACL
	err := View(ctx, cl, acl.GetBrokerClusterACLInfo, nil, &v)
	return v, err
}

// Account is an ACL account to create or update: fields left blank keep
// their current value (SecretKey is required for a new account).
type Account struct {
	AccessKey, SecretKey, WhiteRemoteAddress string
	Admin                                    bool
	DefaultTopicPerm, DefaultGroupPerm       string
	TopicPerms, GroupPerms                   string // name=PERM, comma-separated
}

// UpdateAccount creates or updates an ACL account (replicated).
func UpdateAccount(ctx context.Context, cl *client.Client, a Account) error {
	ext := map[string]string{"accessKey": a.AccessKey, "admin": strconv.FormatBool(a.Admin)}
	for k, v := range map[string]string{"secretKey": a.SecretKey, "whiteRemoteAddress": a.WhiteRemoteAddress, "topicPerms": a.TopicPerms,
		"groupPerms": a.GroupPerms, "defaultTopicPerm": a.DefaultTopicPerm, "defaultGroupPerm": a.DefaultGroupPerm} {
		if v != "" {
			ext[k] = v
		}
	}
	_, err := cl.AdminRequest(ctx, acl.UpdateAndCreateACLConfig, ext, nil, true)
	return err
}

// DeleteAccount deletes an ACL account (replicated).
func DeleteAccount(ctx context.Context, cl *client.Client, accessKey string) error {
	_, err := cl.AdminRequest(ctx, acl.DeleteACLConfig, map[string]string{"accessKey": accessKey}, nil, true)
	return err
}
