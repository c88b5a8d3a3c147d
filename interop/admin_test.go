package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// rmqAdmin is the v2 client's admin API (admin.NewAdmin returns an
// unexported type).
type rmqAdmin interface {
	admin.Admin
}

// newAdmin starts an admin client whose name servers are addrs.
func newAdmin(t *testing.T, addrs []string) rmqAdmin {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(addrs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// queried is a message as `raftmq admin message query --json` prints it.
type queried struct {
	Topic       string            `json:"topic"`
	QueueID     int               `json:"queueId"`
	QueueOffset int64             `json:"queueOffset"`
	MsgID       string            `json:"msgId"`
	OffsetMsgID string            `json:"offsetMsgId"`
	Tags        string            `json:"tags"`
	Keys        []string          `json:"keys"`
	Properties  map[string]string `json:"properties"`
	Body        string            `json:"body"`
}

// query runs `raftmq admin message query --json` with args.
func query(t *testing.T, g *group, args ...string) ([]queried, error) {
	t.Helper()
	out, err := g.cli(append([]string{"admin", "message", "query", "--json"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	var ms []queried
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m queried
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("query %v printed a line that is not a JSON message: %q", args, line)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// testQueryMessage: a message can be found by a key of its KEYS, by the
// msgId its producer was given (UNIQ_KEY) and by its offsetMsgId. The Go
// client has no query API (its internal package has the request headers
// only), so this goes through `raftmq admin message query`, which sends
// QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).
func testQueryMessage(t *testing.T, g *group) {
	topic := uniq("query")
	g.createTopic(t, topic, 2)
	p := newProducer(t, g)
	key := uniq("order")
	// Two messages share the key; a third has another one.
	var results []*primitive.SendResult
	for i, k := range []string{key, key, key + "-other"} {
		m := message(topic, fmt.Sprintf("find me %d", i), "n", fmt.Sprint(i))
		m.WithKeys([]string{k, "common-" + runID})
		m.WithTag("qt")
		results = append(results, sendSync(t, p, m))
	}
	check := func(what string, m queried, i int) {
		t.Helper()
		res := results[i]
		if m.Topic != topic || m.Body != fmt.Sprintf("find me %d", i) || m.MsgID != res.MsgID || m.OffsetMsgID != res.OffsetMsgID ||
			m.QueueID != res.MessageQueue.QueueId || m.QueueOffset != res.QueueOffset || m.Tags != "qt" || m.Properties["n"] != fmt.Sprint(i) ||
			m.Properties["KEYS"] != strings.Join(m.Keys, " ") || len(m.Keys) != 2 || m.Keys[1] != "common-"+runID {
			t.Errorf("%s: found %+v; sent message %d: msgId %s offsetMsgId %s queue %d offset %d", what, m, i, res.MsgID, res.OffsetMsgID, res.MessageQueue.QueueId, res.QueueOffset)
		}
	}
	// The key index may be built after the send is acknowledged, as in
	// RocketMQ: poll for it.
	var byKey []queried
	var err error
	_ = poll(10*time.Second, func() bool {
		byKey, err = query(t, g, "--topic", topic, "--key", key)
		return err == nil && len(byKey) >= 2
	})
	if err != nil {
		t.Fatalf("query by key: %v", err)
	}
	if len(byKey) != 2 {
		t.Errorf("query by key %s found %d messages, want 2: %+v", key, len(byKey), byKey)
	} else {
		slices.SortFunc(byKey, func(a, b queried) int { return strings.Compare(a.Body, b.Body) })
		check("by key", byKey[0], 0)
		check("by key", byKey[1], 1)
	}
	byUniq, err := query(t, g, "--topic", topic, "--uniq", results[2].MsgID)
	if err != nil {
		t.Fatalf("query by msgId: %v", err)
	}
	if len(byUniq) != 1 {
		t.Errorf("query by msgId %s found %d messages, want 1: %+v", results[2].MsgID, len(byUniq), byUniq)
	} else {
		check("by msgId", byUniq[0], 2)
	}
	byID, err := query(t, g, "--id", results[1].OffsetMsgID)
	if err != nil {
		t.Fatalf("query by offsetMsgId: %v", err)
	}
	if len(byID) != 1 {
		t.Errorf("query by offsetMsgId %s found %d messages, want 1: %+v", results[1].OffsetMsgID, len(byID), byID)
	} else {
		check("by offsetMsgId", byID[0], 1)
	}
	none, err := query(t, g, "--topic", topic, "--key", "no-such-key-"+runID)
	if err == nil && len(none) != 0 {
		t.Errorf("query by a key nobody used found %+v", none)
	}
}

// testAdmin: the client's admin API. CreateTopic on the leader's address;
// FetchAllTopicList and the route list it; GetAllSubscriptionGroup on
// every node lists a group once its consumer heartbeated; DeleteTopic
// (DELETE_TOPIC_IN_BROKER to an address from the route, then
// DELETE_TOPIC_IN_NAMESRV to every name server) removes the topic from
// every node's route and topic list.
func testAdmin(t *testing.T, g *group) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newAdmin(t, g.addrs())
	topic := uniq("admin")
	leader := g.nodes[g.waitLeader(10*time.Second)-1].client
	if err := a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(leader),
		admin.WithReadQueueNums(6), admin.WithWriteQueueNums(6)); err != nil {
		t.Fatalf("CreateTopic %s on the leader %s: %v", topic, leader, err)
	}
	for _, n := range g.nodes {
		list, err := newAdmin(t, []string{n.client}).FetchAllTopicList(ctx)
		if err != nil {
			t.Fatalf("FetchAllTopicList from node %d: %v", n.id, err)
		}
		if !slices.Contains(list.TopicList, topic) {
			t.Errorf("FetchAllTopicList from node %d lacks %s, just created: %v", n.id, topic, list.TopicList)
		}
		mqs, err := newAdmin(t, []string{n.client}).FetchPublishMessageQueues(ctx, topic)
		if err != nil {
			t.Fatalf("route of %s from node %d: %v", topic, n.id, err)
		}
		ids := map[int]bool{}
		for _, mq := range mqs {
			ids[mq.QueueId] = true
		}
		if len(ids) != 6 {
			t.Errorf("route of %s from node %d: queue ids %v, want 0-5", topic, n.id, sortedInts(ids))
		}
	}

	// A consumer group exists once its consumer heartbeated.
	grp := uniq("cg")
	startConsumer(t, g, "c", grp, topic, consumer.MessageSelector{}, newInbox())
	for _, n := range g.nodes {
		var last error
		err := poll(15*time.Second, func() bool {
			w, err := a.GetAllSubscriptionGroup(ctx, n.client, 3*time.Second)
			last = err
			return err == nil && w.SubscriptionGroupTable[grp].GroupName == grp
		})
		if err != nil {
			t.Errorf("GetAllSubscriptionGroup from node %d does not list %s within 15 s (last error: %v)", n.id, grp, last)
		}
	}

	if err := a.DeleteTopic(ctx, admin.WithTopicDelete(topic)); err != nil {
		t.Fatalf("DeleteTopic %s: %v", topic, err)
	}
	for _, n := range g.nodes {
		// A fresh client, so no cached route answers for the node.
		mqs, err := newAdmin(t, []string{n.client}).FetchPublishMessageQueues(ctx, topic)
		if err == nil {
			t.Errorf("node %d still routes deleted topic %s: %v", n.id, topic, mqs)
		} else if !errors.Is(err, rmqerrors.ErrTopicNotExist) {
			t.Errorf("route of deleted topic %s from node %d: %v, want topic not exist", topic, n.id, err)
		}
		list, err := newAdmin(t, []string{n.client}).FetchAllTopicList(ctx)
		if err != nil {
			t.Fatalf("FetchAllTopicList from node %d: %v", n.id, err)
		}
		if slices.Contains(list.TopicList, topic) {
			t.Errorf("FetchAllTopicList from node %d still lists deleted topic %s", n.id, topic)
		}
	}
}
