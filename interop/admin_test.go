package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// cliJSON runs a raftmq command with --json and decodes its answer (the
// JSON value in its output) into v.
func cliJSON(t *testing.T, g *group, v any, args ...string) {
	t.Helper()
	out, err := g.cli(append(args, "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	i := strings.IndexAny(out, "{[")
	if i < 0 {
		t.Fatalf("raftmq %v printed no JSON: %q", args, out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(v); err != nil {
		t.Fatalf("raftmq %v printed %q: %v", args, out, err)
	}
}

// progress is `raftmq admin consumer progress --json`.
type progress struct {
	Queues []struct {
		QueueID        int   `json:"queueId"`
		BrokerOffset   int64 `json:"brokerOffset"`
		ConsumerOffset int64 `json:"consumerOffset"`
		Lag            int64 `json:"lag"`
	} `json:"queues"`
	TotalLag int64 `json:"totalLag"`
}

// TestAdminResetLiveConsumer: rocketmq-client-go's push consumer as the
// admin commands see it (consumer connection: its client id, language GO,
// subscription; consumer progress: lag 0 once it committed), and a reset
// by time while it runs. The broker tells it (RESET_CONSUMER_CLIENT_OFFSET);
// the client pauses the queues for 10 s while its periodic commits still
// carry its old positions, which the broker's fence drops, then takes the
// reset offsets. A consumer of the group started afterwards gets every
// message stored after the reset time again, and none before it.
func TestAdminResetLiveConsumer(t *testing.T) {
	g := startGroup(t)
	topic, grp := uniq("reset"), uniq("reset-cg")
	g.createTopic(t, topic, 2)
	p := newProducer(t, g)
	firstB := map[int]int64{0: -1, 1: -1} // queue -> offset of its first "b" message
	var bodies, late []string
	for i := range 6 {
		sendSync(t, p, message(topic, fmt.Sprintf("a-%d", i)))
		bodies = append(bodies, fmt.Sprintf("a-%d", i))
	}
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	for i := range 6 {
		res := sendSync(t, p, message(topic, fmt.Sprintf("b-%d", i)))
		if q := res.MessageQueue.QueueId; firstB[q] < 0 || res.QueueOffset < firstB[q] {
			firstB[q] = res.QueueOffset
		}
		bodies = append(bodies, fmt.Sprintf("b-%d", i))
		late = append(late, fmt.Sprintf("b-%d", i))
	}
	for q, o := range firstB {
		if o < 0 {
			firstB[q] = 0 // no "b" there: the reset lands on the queue's end
		}
	}

	box := newInbox()
	c1 := startConsumer(t, g, "c1", grp, topic, consumer.MessageSelector{}, box)
	box.waitAll(t, 15*time.Second, "first consumer", bodies)

	var conn struct {
		Clients []struct {
			ClientID string `json:"clientId"`
			Language string `json:"language"`
			Version  int    `json:"version"`
		} `json:"clients"`
		Subscriptions []struct {
			Topic string `json:"topic"`
		} `json:"subscriptions"`
		MessageModel string `json:"messageModel"`
	}
	cliJSON(t, g, &conn, "admin", "consumer", "connection", "-g", grp)
	if len(conn.Clients) != 1 || conn.Clients[0].Language != "GO" || conn.Clients[0].Version == 0 || conn.MessageModel != "CLUSTERING" {
		t.Errorf("consumer connection of %s: %+v, want one GO client, clustering", grp, conn)
	}
	subscribed := false
	for _, s := range conn.Subscriptions {
		subscribed = subscribed || s.Topic == topic
	}
	if !subscribed {
		t.Errorf("consumer connection of %s lacks a subscription to %s: %+v", grp, topic, conn.Subscriptions)
	}

	// The client commits every 5 s: lag 0 once it has.
	var pr progress
	if err := poll(12*time.Second, func() bool {
		cliJSON(t, g, &pr, "admin", "consumer", "progress", "-g", grp, "-t", topic)
		return pr.TotalLag == 0 && len(pr.Queues) == 2
	}); err != nil {
		t.Fatalf("consumer progress of %s never reached lag 0: %+v", grp, pr)
	}

	var rs struct {
		Queues []struct {
			QueueID int   `json:"queueId"`
			New     int64 `json:"newOffset"`
		} `json:"queues"`
		Notified int `json:"notified"`
	}
	cliJSON(t, g, &rs, "admin", "offset", "reset-by-time", "-g", grp, "-t", topic, "-s", strconv.FormatInt(mid.UnixMilli(), 10))
	if rs.Notified < 1 || len(rs.Queues) != 2 {
		t.Fatalf("reset: %+v, want 2 queues and the live consumer told", rs)
	}
	for _, q := range rs.Queues {
		if q.New != firstB[q.QueueID] {
			t.Errorf("reset to %v: queue %d at %d, want %d (its first message stored after)", mid, q.QueueID, q.New, firstB[q.QueueID])
		}
	}
	// Past the client's 10 s pause and two of its periodic commits.
	time.Sleep(12 * time.Second)
	c1.shutdown()
	c2 := startConsumer(t, g, "c2", grp, topic, consumer.MessageSelector{}, box)
	defer c2.shutdown()
	if err := poll(15*time.Second, func() bool {
		for _, b := range late {
			if len(box.deliveries(b)) < 2 {
				return false
			}
		}
		return true
	}); err != nil {
		cliJSON(t, g, &pr, "admin", "consumer", "progress", "-g", grp, "-t", topic)
		t.Fatalf("the messages stored after the reset time were not delivered again within 15 s; progress now %+v", pr)
	}
	for i := range 6 {
		if n := len(box.deliveries(fmt.Sprintf("a-%d", i))); n != 1 {
			t.Errorf("a-%d, stored before the reset time, delivered %d times", i, n)
		}
	}
}
