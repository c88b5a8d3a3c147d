// Package admin holds the typed reads of a group's admin API that more
// than one front end makes: the CLI (`raftmq admin ...`) and the web
// console (package console) call these, so the figures an operator sees
// in a terminal and in a browser come from the same request and the same
// decoding. Each function asks any node of the group through a
// client.Client; the broker answers from replicated state (see
// cluster/admin.go).
package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// View asks any node for an admin view (the broker's JSON answer to code
// with ext) and decodes it into v.
func View(ctx context.Context, cl *client.Client, code int32, ext map[string]string, v any) error {
	raw, err := cl.AdminView(ctx, code, ext, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("admin: answer to request %d: %w", code, err)
	}
	return nil
}

// Change sends an admin change (through the leader; idempotent allows a
// retry after an indeterminate outcome) and decodes the broker's JSON view
// of the outcome into v.
func Change(ctx context.Context, cl *client.Client, code int32, ext map[string]string, body []byte, idempotent bool, v any) error {
	raw, err := cl.AdminChange(ctx, code, ext, body, idempotent)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("admin: answer to request %d: %w", code, err)
	}
	return nil
}

// ClusterList is the group as its leader sees it: members, roles, terms,
// commit and applied indexes, each follower's lag.
func ClusterList(ctx context.Context, cl *client.Client) (cluster.AdminCluster, error) {
	var v cluster.AdminCluster
	err := View(ctx, cl, remoting.GetBrokerClusterInfo, nil, &v)
	return v, err
}

// TopicStatus is a topic's config and each queue's min and max offset
// and last update time.
func TopicStatus(ctx context.Context, cl *client.Client, topic string) (cluster.AdminTopicStatus, error) {
	var v cluster.AdminTopicStatus
	err := View(ctx, cl, remoting.GetTopicStatsInfo, (&remoting.TopicStatsRequestHeader{Topic: topic}).Encode(), &v)
	return v, err
}

// ConsumerProgress is a group's offsets and lag per queue of topic (""
// for every topic of the group) and its total lag.
func ConsumerProgress(ctx context.Context, cl *client.Client, group, topic string) (cluster.AdminConsumerProgress, error) {
	var v cluster.AdminConsumerProgress
	h := remoting.ConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}
	err := View(ctx, cl, remoting.GetConsumeStats, h.Encode(), &v)
	return v, err
}

// ConsumerConnection is a group's connected clients and subscriptions
// (an *client.Error with CONSUMER_NOT_ONLINE when none is connected).
func ConsumerConnection(ctx context.Context, cl *client.Client, group string) (cluster.AdminConsumerConnection, error) {
	var v cluster.AdminConsumerConnection
	h := remoting.ConsumerConnectionRequestHeader{ConsumerGroup: group}
	err := View(ctx, cl, remoting.GetConsumerConnectionList, h.Encode(), &v)
	return v, err
}

// NodeStatus is one node's own status (role, term, indexes, disk), asked
// of the node at addr.
func NodeStatus(ctx context.Context, cl *client.Client, addr string) (cluster.NodeStatus, error) {
	var st cluster.NodeStatus
	raw, err := cl.NodeStatus(ctx, addr)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("admin: bad status answer from %s: %w", addr, err)
	}
	return st, nil
}

// Topics is every topic's config (GET_ALL_TOPIC_CONFIG), sorted by name.
func Topics(ctx context.Context, cl *client.Client) ([]offsets.TopicConfig, error) {
	var w struct {
		Table map[string]offsets.TopicConfig `json:"topicConfigTable"`
	}
	if err := View(ctx, cl, remoting.GetAllTopicConfig, nil, &w); err != nil {
		return nil, err
	}
	out := make([]offsets.TopicConfig, 0, len(w.Table))
	for name, tc := range w.Table {
		tc.TopicName = name
		out = append(out, tc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TopicName < out[j].TopicName })
	return out, nil
}

// Groups is every subscription group's config
// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), sorted by name.
func Groups(ctx context.Context, cl *client.Client) ([]offsets.SubscriptionGroupConfig, error) {
	var w struct {
		Table map[string]offsets.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	}
	if err := View(ctx, cl, remoting.GetAllSubscriptionGroupConfig, nil, &w); err != nil {
		return nil, err
	}
	out := make([]offsets.SubscriptionGroupConfig, 0, len(w.Table))
	for name, gc := range w.Table {
		gc.GroupName = name
		out = append(out, gc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	return out, nil
}

// DLQTopic is the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return "%DLQ%" + group }

// DeadLetters reads a group's dead-letter topic from its start (up to max
// messages; 0: all), oldest first. A group that never had a dead letter
// has no such topic: none.
func DeadLetters(ctx context.Context, cl *client.Client, group string, max int) ([]*client.MessageExt, error) {
	topic := DLQTopic(group)
	pc := cl.NewPullConsumer("raftmq-admin-dlq")
	lo, err := cl.MinOffset(ctx, topic, 0)
	if err != nil {
		if topicMissing(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("dead-letter queue of group %s: %w", group, err)
	}
	var out []*client.MessageExt
	for off := lo; max == 0 || len(out) < max; {
		pr, err := pc.Pull(ctx, topic, 0, off, 32, 0)
		if err != nil {
			if off == lo && topicMissing(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("dead-letter queue of group %s: %w", group, err)
		}
		if len(pr.Messages) == 0 {
			break
		}
		out = append(out, pr.Messages...)
		off = pr.NextBeginOffset
	}
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// Query is a message search: by Key (a key of KEYS) or Uniq (UNIQ_KEY,
// the msgId a producer is given) in Topic, or by ID (an offsetMsgId; Topic,
// if set, must match), or, with none of the three, every message of Topic
// stored in [Begin, End).
type Query struct {
	Topic, Key, Uniq, ID string
	Max                  int // most messages (0: 32)
	Begin, End           time.Time
}

// ErrBadQuery: a Query that names no way to search.
var ErrBadQuery = errors.New("admin: a search needs an offsetMsgId, or a topic with a key, a msgId or a time range")

// Messages runs a search.
func Messages(ctx context.Context, cl *client.Client, q Query) ([]*client.MessageExt, error) {
	if q.Max <= 0 {
		q.Max = 32
	}
	if q.End.IsZero() {
		q.End = time.Now().Add(time.Hour)
	}
	if q.Begin.IsZero() {
		q.Begin = time.UnixMilli(0)
	}
	switch {
	case q.ID != "":
		m, err := cl.ViewMessage(ctx, q.ID)
		if err != nil {
			return nil, err
		}
		if q.Topic != "" && m.Topic != q.Topic {
			return nil, fmt.Errorf("message %s is of topic %s, not %s", q.ID, m.Topic, q.Topic)
		}
		return []*client.MessageExt{m}, nil
	case q.Topic == "":
		return nil, ErrBadQuery
	case q.Key == "" && q.Uniq == "":
		return ByTime(ctx, cl, q.Topic, q.Begin, q.End, q.Max)
	}
	key, unique := q.Key, false
	if q.Uniq != "" {
		key, unique = q.Uniq, true
	}
	ms, err := cl.QueryMessages(ctx, q.Topic, key, unique, q.Max, q.Begin, q.End)
	if err == nil && len(ms) == 0 {
		// The index answers "not found" for a topic that does not
		// exist too: say which it is.
		if _, err := TopicStatus(ctx, cl, q.Topic); err != nil {
			return nil, err
		}
	}
	return ms, err
}

// ByTime returns up to limit messages of topic stored in [begin, end),
// oldest first: each queue is read from the offset its store time index
// gives for begin (SEARCH_OFFSET_BY_TIMESTAMP) until a message stored at
// or after end.
func ByTime(ctx context.Context, cl *client.Client, topic string, begin, end time.Time, limit int) ([]*client.MessageExt, error) {
	st, err := TopicStatus(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	pc := cl.NewPullConsumer("raftmq-admin-query")
	var out []*client.MessageExt
	for _, q := range st.Queues {
		off, err := cl.SearchOffset(ctx, topic, q.QueueID, begin)
		if err != nil {
			return nil, err
		}
		off = min(max(off, q.MinOffset), q.MaxOffset)
		n := 0
	queue:
		for off < q.MaxOffset && n < limit {
			pr, err := pc.Pull(ctx, topic, q.QueueID, off, 32, 0)
			if err != nil {
				return nil, err
			}
			if len(pr.Messages) == 0 {
				break
			}
			for _, m := range pr.Messages {
				ts := time.UnixMilli(m.StoreTimestamp)
				if !ts.Before(end) || n >= limit {
					break queue
				}
				if !ts.Before(begin) {
					out = append(out, m)
					n++
				}
			}
			off = pr.NextBeginOffset
		}
	}
	slices.SortStableFunc(out, func(a, b *client.MessageExt) int {
		return cmp.Or(cmp.Compare(a.StoreTimestamp, b.StoreTimestamp), cmp.Compare(a.QueueID, b.QueueID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// topicMissing reports whether err is a broker's answer that a topic does
// not exist.
func topicMissing(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Code == remoting.TopicNotExist
}

// NotFound reports whether err is a broker's answer that a topic, a
// consumer group or a message does not exist.
func NotFound(err error) bool {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code {
	case remoting.TopicNotExist, remoting.SubscriptionGroupNotExist, remoting.QueryNotFound:
		return true
	case remoting.SystemError:
		// VIEW_MESSAGE_BY_ID's answer for an offset holding no message,
		// worded as RocketMQ's.
		return strings.HasPrefix(ce.Remark, "can not find message")
	}
	return false
}

// GroupOffsets is every committed consumer offset (GET_ALL_CONSUMER_OFFSET)
// by group, topic and queue: the groups with offsets, whether or not they
// have a subscription group config.
func GroupOffsets(ctx context.Context, cl *client.Client) (map[string]map[string]map[int32]int64, error) {
	var w struct {
		Table map[string]map[int32]int64 `json:"offsetTable"`
	}
	if err := View(ctx, cl, cluster.CodeGetAllConsumerOffset, nil, &w); err != nil {
		return nil, err
	}
	out := map[string]map[string]map[int32]int64{}
	for k, qs := range w.Table {
		i := strings.LastIndexByte(k, '@')
		if i < 0 {
			return nil, fmt.Errorf("admin: consumer offsets: key %q is not topic@group", k)
		}
		topic, group := k[:i], k[i+1:]
		if out[group] == nil {
			out[group] = map[string]map[int32]int64{}
		}
		out[group][topic] = qs
	}
	return out, nil
}

// Settings is a node's broker settings (GET_BROKER_CONFIG's JSON view),
// asked of the node at addr itself.
func Settings(ctx context.Context, cl *client.Client, addr string) ([]cluster.AdminSetting, error) {
	body, err := cl.NodeRequest(ctx, addr, cluster.CodeGetBrokerConfig, map[string]string{remoting.FieldAdminView: remoting.AdminViewJSON}, nil)
	if err != nil {
		return nil, err
	}
	var v []cluster.AdminSetting
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("admin: broker settings of %s: %w", addr, err)
	}
	return v, nil
}

// Nodes is the client addresses of the group's members, as its leader
// lists them.
func Nodes(ctx context.Context, cl *client.Client) ([]string, error) {
	v, err := ClusterList(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range v.Members {
		out = append(out, m.Client)
	}
	return out, nil
}
