package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// fastOptions are push consumer options with short periods, for tests.
func fastOptions(group string, topics ...string) PushConsumerOptions {
	o := PushConsumerOptions{
		Group:             group,
		Subscriptions:     map[string]Subscription{},
		ConsumeFrom:       ConsumeFromFirstOffset,
		RebalanceInterval: 100 * time.Millisecond,
		PersistInterval:   20 * time.Millisecond,
		LockInterval:      50 * time.Millisecond,
		RetryDelay:        20 * time.Millisecond,
		SuspendDelay:      10 * time.Millisecond,
		LongPoll:          time.Second,
	}
	for _, t := range topics {
		o.Subscriptions[t] = Subscription{}
	}
	return o
}

// startPushConsumer starts a consumer on a client of its own (so that
// each gets its own connections and notifications, as separate processes
// would); it is shut down at the end of the test if still running.
func startPushConsumer(t *testing.T, g *fakeGroup, o PushConsumerOptions, fn ConsumeFunc) *PushConsumer {
	t.Helper()
	c := newTestClient(t, g, time.Second)
	p, err := c.NewPushConsumer(o, fn)
	require.NoError(t, err)
	require.NoError(t, p.Start(testCtx(t)))
	t.Cleanup(func() {
		if p.state.Load() == pushStarted {
			require.NoError(t, p.Shutdown(context.Background()))
		}
	})
	return p
}

// produce sends n messages to each of queues of topic through the group's
// leader, bodies "<queue>-<i>" counting from first.
func produce(t *testing.T, g *fakeGroup, topic string, queues []int32, first, n int, tags string) {
	t.Helper()
	c := newTestClient(t, g, time.Second)
	p := c.NewProducer(ProducerOptions{})
	for _, q := range queues {
		for i := first; i < first+n; i++ {
			_, err := p.Send(testCtx(t), &Message{Topic: topic, QueueID: q, Tags: tags, Body: fmt.Appendf(nil, "%d-%d", q, i)})
			require.NoError(t, err)
		}
	}
}

// allQueues lists queues 0..n-1 of topic on the fake's broker name.
func allQueues(topic string, n int) []MessageQueue {
	out := make([]MessageQueue, n)
	for i := range out {
		out[i] = MessageQueue{Topic: topic, BrokerName: "raftmq", QueueID: int32(i)}
	}
	return out
}

// disjointCover reports whether the consumers' assignments are disjoint
// and together are want.
func disjointCover(want []MessageQueue, ps ...*PushConsumer) bool {
	var got []MessageQueue
	for _, p := range ps {
		got = append(got, p.Assignment()...)
	}
	slices.SortFunc(got, CompareQueues)
	return slices.Equal(got, want)
}

// recorder collects consumed messages.
type recorder struct {
	mu   sync.Mutex
	msgs []*MessageExt
}

func (r *recorder) add(ms ...*MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, ms...)
}

func (r *recorder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		out = append(out, string(m.Body))
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) consume(_ context.Context, ms []*MessageExt) ConsumeResult {
	r.add(ms...)
	return ConsumeSuccess
}

// TestPushConsumerRebalanceConverges: two consumers of a group, with the
// broker's notifications off, converge through their periodic rebalances
// to a disjoint cover of the topic's queues and the group's retry queue,
// and every message is consumed.
func TestPushConsumerRebalanceConverges(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 8)
	g.setNoNotify(true)
	produce(t, g, "T", []int32{0, 1, 2, 3, 4, 5, 6, 7}, 0, 3, "")
	var rec recorder
	a := startPushConsumer(t, g, fastOptions("G", "T"), rec.consume)
	b := startPushConsumer(t, g, fastOptions("G", "T"), rec.consume)
	want := append(allQueues("%RETRY%G", 1), allQueues("T", 8)...)
	slices.SortFunc(want, CompareQueues)
	// AllocateAveragely splits T 4/4; the retry topic's one queue goes to
	// the client whose id sorts first.
	require.Eventually(t, func() bool {
		return disjointCover(want, a, b) && min(len(a.Assignment()), len(b.Assignment())) == 4
	}, 5*time.Second, 10*time.Millisecond, "a %v, b %v", a.Assignment(), b.Assignment())
	require.Eventually(t, func() bool {
		seen := map[string]bool{}
		for _, body := range rec.bodies() {
			seen[body] = true
		}
		return len(seen) == 24
	}, 5*time.Second, 10*time.Millisecond)
	require.NotEqual(t, a.ClientID(), b.ClientID(), "consumers of one process get distinct ids")
	require.Equal(t, sortedIDs(a, b), g.members("G"))
}

func sortedIDs(ps ...*PushConsumer) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ClientID())
	}
	slices.Sort(ids)
	return ids
}

// TestPushConsumerNotifyRebalancesAtOnce: with an hour between periodic
// rebalances, the broker's NOTIFY_CONSUMER_IDS_CHANGED alone makes the
// first consumer give up half its queues when a second joins, and take
// them back when it leaves (UNREGISTER_CLIENT).
func TestPushConsumerNotifyRebalancesAtOnce(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 4)
	o := fastOptions("G", "T")
	o.RebalanceInterval = time.Hour
	var rec recorder
	a := startPushConsumer(t, g, o, rec.consume)
	want := append(allQueues("%RETRY%G", 1), allQueues("T", 4)...)
	slices.SortFunc(want, CompareQueues)
	require.Eventually(t, func() bool { return disjointCover(want, a) }, 5*time.Second, 10*time.Millisecond)

	b := startPushConsumer(t, g, o, rec.consume)
	require.Eventually(t, func() bool {
		return disjointCover(want, a, b) && min(len(a.Assignment()), len(b.Assignment())) == 2
	}, 5*time.Second, 10*time.Millisecond, "a %v, b %v", a.Assignment(), b.Assignment())

	require.NoError(t, b.Shutdown(testCtx(t)))
	require.Equal(t, []string{a.ClientID()}, g.members("G"), "b unregistered")
	require.Eventually(t, func() bool { return disjointCover(want, a) }, 5*time.Second, 10*time.Millisecond,
		"a %v", a.Assignment())
}

// TestPushConsumerCommitNeverPassesUnconsumed: whatever the order in which
// concurrent callbacks finish, and while a message waits for a local
// retry, no committed offset (UPDATE_CONSUMER_OFFSET, or a pull's
// commitOffset) is past a message not yet consumed. The broker refuses
// both ways of sending a failed message back (CONSUMER_SEND_MSG_BACK and a
// send to the retry topic), so the consumer falls back to local retries.
func TestPushConsumerCommitNeverPassesUnconsumed(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	produce(t, g, "T", []int32{0}, 0, 30, "")

	var mu sync.Mutex
	done := map[int64]bool{}
	var commits atomic.Int64
	check := func(where string, off int64) {
		mu.Lock()
		defer mu.Unlock()
		commits.Add(1)
		for i := range off {
			if !done[i] {
				t.Errorf("%s committed offset %d while message %d is not consumed", where, off, i)
				return
			}
		}
	}
	var refusedBack, refusedRetrySends atomic.Int32
	g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
		switch req.Code {
		case remoting.ConsumerSendMsgBack:
			refusedBack.Add(1)
			return remoting.NewResponse(req, remoting.SystemError, "refused by the test"), true
		case remoting.SendMessageV2:
			h, err := remoting.DecodeSendMessageRequestHeader(req.Code, req.ExtFields)
			require.NoError(t, err)
			if h.Topic == RetryTopic("G") {
				refusedRetrySends.Add(1)
				return remoting.NewResponse(req, remoting.MessageIllegal, "refused by the test"), true
			}
		case remoting.UpdateConsumerOffset:
			h, err := remoting.DecodeUpdateConsumerOffsetRequestHeader(req.ExtFields)
			require.NoError(t, err)
			if h.Topic == "T" {
				check("UPDATE_CONSUMER_OFFSET", h.CommitOffset)
			}
		case remoting.PullMessage:
			h, err := remoting.DecodePullMessageRequestHeader(req.ExtFields)
			require.NoError(t, err)
			if h.Topic == "T" && h.SysFlag&remoting.PullSysFlagCommitOffset != 0 {
				check("PULL_MESSAGE", h.CommitOffset)
			}
		}
		return nil, false
	})

	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	var tries7 atomic.Int32
	var reconsumed7 atomic.Int32
	o := fastOptions("G", "T")
	o.ConsumeGoroutines = 8
	o.PullBatchSize = 4
	p := startPushConsumer(t, g, o, func(_ context.Context, ms []*MessageExt) ConsumeResult {
		m := ms[0]
		switch m.QueueOffset {
		case 3:
			<-release
		case 7:
			if tries7.Add(1) <= 2 {
				return ConsumeRetryLater
			}
			reconsumed7.Store(m.ReconsumeTimes)
		}
		mu.Lock()
		done[m.QueueOffset] = true
		mu.Unlock()
		return ConsumeSuccess
	})
	t.Cleanup(releaseAll) // before the consumer's shutdown, should the test fail
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 3 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 29
	}, 5*time.Second, 5*time.Millisecond, "everything but message 3 is consumed")
	before := commits.Load()
	require.Eventually(t, func() bool { return commits.Load() > before+3 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(3), g.offset("G", "T", 0), "held at the blocked message")
	releaseAll()
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 30 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int32(3), tries7.Load())
	require.Equal(t, int32(2), reconsumed7.Load(), "each local retry counts as a reconsume")
	require.Equal(t, int32(2), refusedBack.Load(), "each failure first tries CONSUMER_SEND_MSG_BACK")
	require.Equal(t, int32(2), refusedRetrySends.Load(), "then a send to the retry topic (refused definitely: no retries)")
	require.NoError(t, p.Shutdown(testCtx(t)))
}

// TestPushConsumerBroadcastOffsetsSurviveRestart: a broadcasting consumer
// keeps its offsets in its file (written at shutdown), and a new consumer
// on the same file resumes there instead of where ConsumeFrom says;
// another consumer of the group, with its own file, gets every message.
func TestPushConsumerBroadcastOffsetsSurviveRestart(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 2)
	produce(t, g, "T", []int32{0, 1}, 0, 3, "")
	dir := t.TempDir()
	o := fastOptions("B", "T")
	o.Model = Broadcasting
	o.OffsetFile = filepath.Join(dir, "a", "offsets.json")
	o.PersistInterval = time.Hour // only the shutdown persists

	var first recorder
	a := startPushConsumer(t, g, o, first.consume)
	require.Eventually(t, func() bool { return slices.Equal(allQueues("T", 2), a.Assignment()) }, 5*time.Second, 5*time.Millisecond,
		"every queue, no retry topic")
	require.Eventually(t, func() bool { return first.count() == 6 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, a.Shutdown(testCtx(t)))
	require.Empty(t, g.nodes[0].requests(remoting.GetConsumerListByGroup), "broadcasting needs no member list")

	b, err := os.ReadFile(o.OffsetFile)
	require.NoError(t, err)
	var f offsetFile
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, offsetFile{Version: 1, Group: "B", Offsets: []offsetFileEntry{
		{Topic: "T", BrokerName: "raftmq", QueueID: 0, Offset: 3},
		{Topic: "T", BrokerName: "raftmq", QueueID: 1, Offset: 3},
	}}, f)
	entries, err := os.ReadDir(filepath.Dir(o.OffsetFile))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	produce(t, g, "T", []int32{0, 1}, 3, 2, "")
	var again, other recorder
	startPushConsumer(t, g, o, again.consume)
	o2 := o
	o2.OffsetFile = ""
	o2.OffsetDir = filepath.Join(dir, "other")
	c3 := startPushConsumer(t, g, o2, other.consume)
	require.Eventually(t, func() bool { return again.count() == 4 && other.count() == 10 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.ElementsMatch(t, []string{"0-3", "0-4", "1-3", "1-4"}, again.bodies(), "resumed from the file")
	require.Len(t, other.bodies(), 10)
	require.NoError(t, c3.Shutdown(testCtx(t)))
	_, err = os.Stat(filepath.Join(dir, "other", "B", "offsets.json"))
	require.NoError(t, err, "written under OffsetDir/<group>")
}

// orderlyRecorder checks that an orderly consumer runs one callback per
// queue at a time, and records successes per queue.
type orderlyRecorder struct {
	t      *testing.T
	mu     sync.Mutex
	active map[int32]bool
	got    map[int32][]int64
	calls  atomic.Int32
	// fail, if set, decides a batch's result before recording.
	fail func(ms []*MessageExt) bool
}

func (r *orderlyRecorder) consume(_ context.Context, ms []*MessageExt) ConsumeResult {
	r.calls.Add(1)
	q := ms[0].QueueID
	r.mu.Lock()
	if r.active[q] {
		r.t.Errorf("two callbacks at once for queue %d", q)
	}
	r.active[q] = true
	r.mu.Unlock()
	time.Sleep(time.Millisecond) // give an overlap the chance to show
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[q] = false
	if r.fail != nil && r.fail(ms) {
		return ConsumeRetryLater
	}
	for _, m := range ms {
		r.got[q] = append(r.got[q], m.QueueOffset)
	}
	return ConsumeSuccess
}

func (r *orderlyRecorder) offsets(q int32) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[q])
}

func newOrderlyRecorder(t *testing.T) *orderlyRecorder {
	return &orderlyRecorder{t: t, active: map[int32]bool{}, got: map[int32][]int64{}}
}

// TestPushConsumerOrderlyInOrder: an orderly consumer locks each queue
// before pulling it, delivers each queue's messages in order, one batch at
// a time, holding a queue back while a batch waits for its retry, and
// unlocks its queues at shutdown.
func TestPushConsumerOrderlyInOrder(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 3)
	produce(t, g, "T", []int32{0, 1, 2}, 0, 20, "")
	rec := newOrderlyRecorder(t)
	var failures atomic.Int32
	rec.fail = func(ms []*MessageExt) bool {
		for _, m := range ms {
			if m.QueueID == 1 && m.QueueOffset == 5 {
				return failures.Add(1) <= 2
			}
		}
		return false
	}
	o := fastOptions("G", "T")
	o.Orderly = true
	o.ConsumeGoroutines = 4
	o.ConsumeBatchSize = 2
	o.PullBatchSize = 3
	p := startPushConsumer(t, g, o, rec.consume)
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i)
	}
	require.Eventually(t, func() bool {
		return slices.Equal(rec.offsets(0), want) && slices.Equal(rec.offsets(1), want) && slices.Equal(rec.offsets(2), want)
	}, 5*time.Second, 5*time.Millisecond, "%v", rec.got)
	require.Equal(t, int32(3), failures.Load())

	// Every queue was locked before its first pull.
	firstLock, firstPull := map[int32]int{}, map[int32]int{}
	reqs := g.nodes[0].requests(remoting.LockBatchMQ)
	reqs = append(reqs, g.nodes[0].requests(remoting.PullMessage)...)
	slices.SortStableFunc(reqs, func(a, b *remoting.Command) int { return int(a.Opaque - b.Opaque) })
	for i, r := range reqs {
		switch r.Code {
		case remoting.LockBatchMQ:
			b, err := remoting.DecodeLockBatchRequestBody(r.Body)
			require.NoError(t, err)
			require.Equal(t, p.ClientID(), b.ClientID)
			for _, mq := range b.MQSet {
				if _, ok := firstLock[mq.QueueID]; !ok && mq.Topic == "T" {
					firstLock[mq.QueueID] = i
				}
			}
		case remoting.PullMessage:
			h, err := remoting.DecodePullMessageRequestHeader(r.ExtFields)
			require.NoError(t, err)
			if _, ok := firstPull[h.QueueID]; !ok && h.Topic == "T" {
				firstPull[h.QueueID] = i
			}
		}
	}
	for q := range int32(3) {
		require.Less(t, firstLock[q], firstPull[q], "queue %d", q)
	}
	require.NoError(t, p.Shutdown(testCtx(t)))
	unlocks := g.nodes[0].requests(remoting.UnlockBatchMQ)
	require.NotEmpty(t, unlocks)
	g.mu.Lock()
	require.Empty(t, g.mu.locks, "every lock released")
	g.mu.Unlock()
	require.Equal(t, int64(20), g.offset("G", "T", 1), "offsets persisted at shutdown")
}

// TestPushConsumerOrderlyStopsOnLockLoss: an orderly queue stops being
// consumed when the broker refuses to renew its lock, or when renewals
// fail until the lock is older than LockMaxAge; it resumes from its
// committed offset, in order, once the lock is granted again.
func TestPushConsumerOrderlyStopsOnLockLoss(t *testing.T) {
	for _, how := range []string{"refused", "expired"} {
		t.Run(how, func(t *testing.T) {
			g := newFakeGroup(t, 1)
			g.addTopic("T", 1)
			produce(t, g, "T", []int32{0}, 0, 5, "")
			var failLocks atomic.Bool
			g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
				if req.Code == remoting.LockBatchMQ && failLocks.Load() {
					return remoting.NewResponse(req, remoting.RequestCodeNotSupported, "injected"), true
				}
				return nil, false
			})
			rec := newOrderlyRecorder(t)
			o := fastOptions("G", "T")
			o.Orderly = true
			o.LockMaxAge = 200 * time.Millisecond
			p := startPushConsumer(t, g, o, rec.consume)
			require.Eventually(t, func() bool { return len(rec.offsets(0)) == 5 }, 5*time.Second, 5*time.Millisecond)

			if how == "refused" {
				g.setRefuseLocks(true)
			} else {
				failLocks.Store(true)
			}
			q := MessageQueue{Topic: "T", BrokerName: "raftmq", QueueID: 0}
			require.Eventually(t, func() bool { return !slices.Contains(p.Assignment(), q) }, 5*time.Second, 5*time.Millisecond)
			calls := rec.calls.Load()
			produce(t, g, "T", []int32{0}, 5, 5, "")
			time.Sleep(300 * time.Millisecond)
			require.Equal(t, calls, rec.calls.Load(), "no callback without a lock")
			require.Equal(t, int64(5), g.offset("G", "T", 0), "the dropped queue's offset was persisted")

			g.setRefuseLocks(false)
			failLocks.Store(false)
			require.Eventually(t, func() bool { return len(rec.offsets(0)) == 10 }, 5*time.Second, 5*time.Millisecond)
			require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, rec.offsets(0))
		})
	}
}

// TestPushConsumerFiltersAndRetryTopic: a tag subscription is filtered
// again on the client (the fake broker does not filter), the committed
// offset moves past filtered messages, and a message of the group's retry
// topic reaches the callback under its original topic.
func TestPushConsumerFiltersAndRetryTopic(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	g.addTopic("%RETRY%G", 1)
	produce(t, g, "T", []int32{0}, 0, 2, "TagA")
	produce(t, g, "T", []int32{0}, 2, 2, "TagB")
	produce(t, g, "T", []int32{0}, 4, 1, "TagC")
	c := newTestClient(t, g, time.Second)
	_, err := c.NewProducer(ProducerOptions{}).Send(testCtx(t), &Message{Topic: "%RETRY%G", QueueID: 0, Body: []byte("retried"),
		Properties: map[string]string{message.PropertyRetryTopic: "T"}})
	require.NoError(t, err)

	var rec recorder
	o := fastOptions("G", "T")
	o.Subscriptions["T"] = Subscription{Expression: "TagA || TagC"}
	p := startPushConsumer(t, g, o, rec.consume)
	require.Eventually(t, func() bool { return rec.count() == 4 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return g.offset("G", "T", 0) == 5 }, 5*time.Second, 5*time.Millisecond)
	rec.mu.Lock()
	for _, m := range rec.msgs {
		require.Equal(t, "T", m.Topic, "%s", m.Body)
		if string(m.Body) != "retried" {
			require.Contains(t, []string{"TagA", "TagC"}, m.Tags)
		}
	}
	rec.mu.Unlock()

	// The heartbeat describes the consumer as RocketMQ's do.
	hbs := g.nodes[0].requests(remoting.HeartBeat)
	require.NotEmpty(t, hbs)
	hb, err := remoting.DecodeHeartbeatData(hbs[0].Body)
	require.NoError(t, err)
	require.Equal(t, p.ClientID(), hb.ClientID)
	require.Len(t, hb.ConsumerDataSet, 1)
	cd := hb.ConsumerDataSet[0]
	require.Equal(t, "CONSUME_PASSIVELY", cd.ConsumeType)
	require.Equal(t, "CLUSTERING", cd.MessageModel)
	require.Equal(t, "CONSUME_FROM_FIRST_OFFSET", cd.ConsumeFromWhere)
	require.Len(t, cd.SubscriptionDataSet, 2)
	require.Equal(t, "T", cd.SubscriptionDataSet[0].Topic)
	require.Equal(t, []string{"TagA", "TagC"}, cd.SubscriptionDataSet[0].TagsSet)
	require.Equal(t, []int{int(message.TagsCode("TagA")), int(message.TagsCode("TagC"))}, cd.SubscriptionDataSet[0].CodeSet)
	require.Equal(t, "%RETRY%G", cd.SubscriptionDataSet[1].Topic)
	require.Equal(t, "*", cd.SubscriptionDataSet[1].SubString)
	// Pulls carry the subscription, long polling and commit flags.
	var pulled bool
	for _, r := range g.nodes[0].requests(remoting.PullMessage) {
		h, err := remoting.DecodePullMessageRequestHeader(r.ExtFields)
		require.NoError(t, err)
		if h.Topic == "T" {
			pulled = true
			require.Equal(t, "TagA || TagC", h.Subscription)
			require.Equal(t, "TAG", h.ExpressionType)
			require.NotZero(t, h.SysFlag&remoting.PullSysFlagSuspend)
			require.NotZero(t, h.SysFlag&remoting.PullSysFlagSubscription)
			require.Equal(t, h.CommitOffset > 0, h.SysFlag&remoting.PullSysFlagCommitOffset != 0, strconv.Itoa(int(h.CommitOffset)))
		}
	}
	require.True(t, pulled)
}

// TestPushConsumerStartFailsWithoutTopic: as RocketMQ's consumers, Start
// fails when a subscribed topic has no route.
func TestPushConsumerStartFailsWithoutTopic(t *testing.T) {
	g := newFakeGroup(t, 1)
	c := newTestClient(t, g, time.Second)
	p, err := c.NewPushConsumer(fastOptions("G", "missing"), (&recorder{}).consume)
	require.NoError(t, err)
	err = p.Start(testCtx(t))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, remoting.TopicNotExist, e.Code)
	require.Error(t, p.Shutdown(testCtx(t)), "nothing to shut down")
}
