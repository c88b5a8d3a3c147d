package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// ExpressionType is the language of a subscription expression.
type ExpressionType string

// Expression types. The broker filters; a push consumer filters TAG
// expressions again after a pull, as RocketMQ's clients do, and passes
// SQL92 results through.
const (
	ExpressionTag   ExpressionType = "TAG"   // "TagA || TagB", or "*"
	ExpressionSQL92 ExpressionType = "SQL92" // over message properties
)

// Subscription selects the messages of one topic.
type Subscription struct {
	// Type is the expression's language; "" means ExpressionTag.
	Type ExpressionType
	// Expression selects messages; "" or "*" means all (TAG only).
	Expression string
}

// MessageModel is how a consumer group shares a topic.
type MessageModel int

const (
	// Clustering shares a topic's queues among the group's consumers; each
	// message goes to one of them. Offsets are kept by the broker.
	Clustering MessageModel = iota
	// Broadcasting gives every consumer every queue; each message goes to
	// all of them. Each consumer keeps its offsets in a local file.
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeFromWhere is where a consumer starts in a queue for which its
// group has no offset yet.
type ConsumeFromWhere int

const (
	// ConsumeFromLastOffset starts at the queue's max offset (new messages
	// only); retry topics start at 0.
	ConsumeFromLastOffset ConsumeFromWhere = iota
	// ConsumeFromFirstOffset starts at offset 0.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// PushConsumerOptions.ConsumeTimestamp.
	ConsumeFromTimestamp
)

func (w ConsumeFromWhere) String() string {
	switch w {
	case ConsumeFromFirstOffset:
		return "CONSUME_FROM_FIRST_OFFSET"
	case ConsumeFromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	}
	return "CONSUME_FROM_LAST_OFFSET"
}

// ConsumeResult is a consume callback's verdict on a batch.
type ConsumeResult int

const (
	// ConsumeSuccess: the batch is consumed; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: deliver the batch again later. Concurrent
	// clustering consumers send its messages back to the broker, which
	// delivers them again from the group's retry topic after a delay
	// (past MaxReconsumeTimes it moves them to the dead-letter queue);
	// only a message that cannot be sent back is retried locally, after
	// RetryDelay. Orderly consumers retry after SuspendDelay, holding the
	// queue back meanwhile, up to MaxReconsumeTimes times. Broadcasting
	// consumers drop the batch. See the package documentation.
	ConsumeRetryLater
)

// ConsumeFunc consumes a batch of messages of one queue, in queue order.
// ctx ends when the consumer gives up waiting for callbacks at shutdown.
// A panic counts as ConsumeRetryLater (and is logged).
type ConsumeFunc func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// Push consumer defaults (RocketMQ's, where it has them).
const (
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultRebalanceInterval = 20 * time.Second
	DefaultPersistInterval   = 5 * time.Second
	DefaultLockInterval      = 20 * time.Second
	DefaultLockMaxAge        = 30 * time.Second
	DefaultLongPoll          = 20 * time.Second
	DefaultConsumeGoroutines = 20
	DefaultRetryDelay        = 5 * time.Second
	DefaultSuspendDelay      = time.Second
	DefaultMaxReconsumeTimes = 16
	DefaultQueueCacheSize    = 1000
	DefaultMaxSpan           = 2000
	// DefaultConsumeTimestampAgo is how far back ConsumeFromTimestamp
	// starts when ConsumeTimestamp is zero.
	DefaultConsumeTimestampAgo = 30 * time.Minute
)

// PushConsumerOptions configure a PushConsumer. Zero fields take the
// defaults.
type PushConsumerOptions struct {
	// Group is the consumer group (required).
	Group string
	// Subscriptions maps topics to expressions (at least one). A
	// clustering consumer also subscribes %RETRY%<Group> to "*".
	Subscriptions map[string]Subscription
	// Model is Clustering (default) or Broadcasting.
	Model MessageModel
	// ConsumeFrom applies to queues without a stored offset.
	ConsumeFrom ConsumeFromWhere
	// ConsumeTimestamp is ConsumeFromTimestamp's start; zero means
	// DefaultConsumeTimestampAgo before Start.
	ConsumeTimestamp time.Time
	// Strategy allocates queues in clustering; nil means
	// AllocateAveragely. Broadcasting consumers take every queue.
	Strategy AllocateStrategy
	// Orderly consumes each queue one batch at a time, in queue order; in
	// clustering it holds a broker lock on every queue it consumes.
	// Otherwise batches are consumed concurrently.
	Orderly bool
	// PullBatchSize is the message count a pull asks for (default 32).
	PullBatchSize int
	// ConsumeBatchSize is the most messages one callback gets (default 1).
	ConsumeBatchSize int
	// ConsumeGoroutines bounds the callbacks running at once (default 20).
	ConsumeGoroutines int
	// QueueCacheSize: a queue holding this many pulled, unconsumed
	// messages stops pulling (default 1000). MaxSpan: a concurrent
	// consumer also stops when its pulls are this many offsets past the
	// oldest unconsumed message (default 2000).
	QueueCacheSize, MaxSpan int
	// LongPoll is how long the broker may hold an empty pull (default
	// 20 s).
	LongPoll time.Duration
	// HeartbeatInterval (30 s), RebalanceInterval (20 s), PersistInterval
	// (5 s): the periods of HEART_BEAT to every node, of rebalancing, and
	// of persisting offsets. The first heartbeat and rebalance happen at
	// Start; a NOTIFY_CONSUMER_IDS_CHANGED also rebalances at once.
	HeartbeatInterval, RebalanceInterval, PersistInterval time.Duration
	// LockInterval (20 s): orderly clustering consumers renew their queue
	// locks this often; a queue whose lock was refused, or is older than
	// LockMaxAge (30 s), stops being consumed.
	LockInterval, LockMaxAge time.Duration
	// RetryDelay is the wait before a concurrent message whose callback
	// asked to retry, and which could not be sent back to the broker, is
	// delivered again locally (default 5 s).
	RetryDelay time.Duration
	// SuspendDelay is an orderly queue's pause after a batch asked to
	// retry (default 1 s).
	SuspendDelay time.Duration
	// MaxReconsumeTimes bounds the retries of a failing message (default
	// 16). Concurrent consumers send it with every message sent back
	// (maxReconsumeTimes): the broker moves a message that failed that
	// many times to the dead-letter queue %DLQ%<group>. Orderly consumers
	// send a message whose ReconsumeTimes reached it straight to the
	// dead-letter queue (delay level -1) and go on. A message retried
	// locally past it is logged at error level.
	MaxReconsumeTimes int
	// OffsetFile is where a broadcasting consumer keeps its offsets;
	// "" means <OffsetDir>/<Group>/offsets.json, with OffsetDir defaulting
	// to <os.UserConfigDir()>/raftmq/offsets. Two broadcasting consumers
	// of one group on one machine need different files.
	OffsetFile, OffsetDir string
	// ClientID names this consumer to the brokers; "" means
	// "<local IP>@<pid>@<random>". It must be unique in the group.
	ClientID string

	// fs is the broadcasting offset file's file system (tests); nil means
	// the OS.
	fs vfs.FS
}

// PushConsumer consumes a consumer group's share of its topics' messages
// and hands them to a ConsumeFunc, as RocketMQ's push consumer does: it
// heartbeats, rebalances, long-polls every owned queue and keeps offsets.
// See the package documentation for its goroutines and consumption
// models. Start it once and Shutdown it once.
type PushConsumer struct {
	c     *Client
	pc    *PullConsumer
	retry *Producer           // sends failed messages to the retry topic
	o     PushConsumerOptions // defaults filled in
	fn    ConsumeFunc
	log   *slog.Logger
	subs  []*subscription // immutable after NewPushConsumer
	id    string          // client id; set by Start
	store offsetStore     // set by Start

	// sem holds a slot per running callback.
	sem chan struct{}
	// cbCtx is the callbacks' context, cancelled when Shutdown stops
	// waiting for them.
	cbCtx    context.Context
	cbCancel context.CancelFunc
	// cbs tracks running callbacks; once stopping is set none starts.
	cbs struct {
		sync.Mutex
		stopping bool
		wg       sync.WaitGroup
	}

	trigger  chan struct{}     // cap 1: rebalance now
	resets   chan offsetReset  // offsets an operator reset, for the run loop
	lost     chan *queueWorker // orderly queues whose lock went stale
	finished chan MessageQueue // dropped queues done persisting
	// runCtx ends at Shutdown; every loop, pull and queue context derives
	// from it.
	runCtx    context.Context
	runCancel context.CancelFunc
	loops     sync.WaitGroup // the run, heartbeat and persist loops
	finishes  sync.WaitGroup // dropped queues' finish goroutines

	// Owned by the run goroutine (and by Shutdown once it has exited).
	queues    map[MessageQueue]*queueWorker
	finishing map[MessageQueue]struct{}

	assigned     atomic.Pointer[[]MessageQueue]
	state        atomic.Int32
	removeNotify func()
}

// PushConsumer states.
const (
	pushNew int32 = iota
	pushStarted
	pushStopped
)

// subscription is one subscribed topic, parsed.
type subscription struct {
	topic string
	typ   ExpressionType
	expr  string          // "*" for all
	tags  map[string]bool // TAG expressions other than "*"; nil: all pass
	retry bool            // the group's %RETRY% topic
	data  remoting.SubscriptionData
}

// RetryTopic returns a consumer group's retry topic, %RETRY%<group>.
func RetryTopic(group string) string { return retryTopicPrefix + group }

const retryTopicPrefix = "%RETRY%"

// newSubscription parses an expression.
func newSubscription(topic string, s Subscription, version int64) (*subscription, error) {
	if err := message.CheckTopic(topic); err != nil {
		return nil, fmt.Errorf("client: subscription to %q: %w", topic, err)
	}
	sub := &subscription{topic: topic, typ: s.Type, expr: strings.TrimSpace(s.Expression), retry: strings.HasPrefix(topic, retryTopicPrefix)}
	if sub.typ == "" {
		sub.typ = ExpressionTag
	}
	if sub.expr == "" {
		sub.expr = subscribeAll
	}
	sub.data = remoting.SubscriptionData{Topic: topic, SubString: sub.expr, SubVersion: version, ExpressionType: string(sub.typ)}
	switch sub.typ {
	case ExpressionTag:
		if sub.expr == subscribeAll {
			break
		}
		sub.tags = map[string]bool{}
		for _, t := range strings.Split(sub.expr, "||") {
			if t = strings.TrimSpace(t); t != "" && !sub.tags[t] {
				sub.tags[t] = true
				sub.data.TagsSet = append(sub.data.TagsSet, t)
				sub.data.CodeSet = append(sub.data.CodeSet, int(message.TagsCode(t)))
			}
		}
		if len(sub.tags) == 0 {
			return nil, fmt.Errorf("client: subscription to %s: empty tag expression %q", topic, s.Expression)
		}
	case ExpressionSQL92:
		if sub.expr == subscribeAll {
			return nil, fmt.Errorf("client: subscription to %s: SQL92 needs an expression", topic)
		}
	default:
		return nil, fmt.Errorf("client: subscription to %s: unknown expression type %q", topic, s.Type)
	}
	return sub, nil
}

// matches reports whether m passes the subscription's client-side filter.
func (s *subscription) matches(m *MessageExt) bool {
	return s.tags == nil || s.tags[m.Tags]
}

// NewPushConsumer returns a consumer of o.Group that hands messages to
// fn. It does no I/O; Start does.
func (c *Client) NewPushConsumer(o PushConsumerOptions, fn ConsumeFunc) (*PushConsumer, error) {
	if o.Group == "" {
		return nil, errors.New("client: push consumer: Group is required")
	}
	if len(o.Subscriptions) == 0 {
		return nil, fmt.Errorf("client: push consumer %s: no subscriptions", o.Group)
	}
	if fn == nil {
		return nil, fmt.Errorf("client: push consumer %s: nil ConsumeFunc", o.Group)
	}
	if o.Model != Clustering && o.Model != Broadcasting {
		return nil, fmt.Errorf("client: push consumer %s: unknown message model %d", o.Group, o.Model)
	}
	if o.ConsumeFrom < ConsumeFromLastOffset || o.ConsumeFrom > ConsumeFromTimestamp {
		return nil, fmt.Errorf("client: push consumer %s: unknown ConsumeFrom %d", o.Group, o.ConsumeFrom)
	}
	setDefaults(&o)
	p := &PushConsumer{
		c:         c,
		pc:        c.NewPullConsumer(o.Group),
		retry:     c.NewProducer(ProducerOptions{Group: innerProducerGroup}),
		o:         o,
		fn:        fn,
		log:       c.log.With("group", o.Group),
		sem:       make(chan struct{}, o.ConsumeGoroutines),
		trigger:   make(chan struct{}, 1),
		resets:    make(chan offsetReset, 16),
		lost:      make(chan *queueWorker),
		finished:  make(chan MessageQueue),
		queues:    map[MessageQueue]*queueWorker{},
		finishing: map[MessageQueue]struct{}{},
	}
	p.cbCtx, p.cbCancel = context.WithCancel(context.Background())
	p.runCtx, p.runCancel = context.WithCancel(context.Background())
	version := time.Now().UnixMilli()
	for _, topic := range slices.Sorted(maps.Keys(o.Subscriptions)) {
		if strings.HasPrefix(topic, retryTopicPrefix) {
			return nil, fmt.Errorf("client: push consumer %s: subscribe to %s: retry topics are subscribed by the consumer itself", o.Group, topic)
		}
		sub, err := newSubscription(topic, o.Subscriptions[topic], version)
		if err != nil {
			return nil, err
		}
		p.subs = append(p.subs, sub)
	}
	if o.Model == Clustering {
		sub, err := newSubscription(RetryTopic(o.Group), Subscription{}, version)
		if err != nil {
			return nil, err
		}
		p.subs = append(p.subs, sub)
	}
	empty := []MessageQueue{}
	p.assigned.Store(&empty)
	return p, nil
}

func setDefaults(o *PushConsumerOptions) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Strategy == nil {
		o.Strategy = AllocateAveragely{}
	}
	def(&o.PullBatchSize, DefaultPullBatch)
	def(&o.ConsumeBatchSize, 1)
	def(&o.ConsumeGoroutines, DefaultConsumeGoroutines)
	def(&o.QueueCacheSize, DefaultQueueCacheSize)
	def(&o.MaxSpan, DefaultMaxSpan)
	def(&o.MaxReconsumeTimes, DefaultMaxReconsumeTimes)
	defDur(&o.LongPoll, DefaultLongPoll)
	defDur(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	defDur(&o.RebalanceInterval, DefaultRebalanceInterval)
	defDur(&o.PersistInterval, DefaultPersistInterval)
	defDur(&o.LockInterval, DefaultLockInterval)
	defDur(&o.LockMaxAge, DefaultLockMaxAge)
	defDur(&o.RetryDelay, DefaultRetryDelay)
	defDur(&o.SuspendDelay, DefaultSuspendDelay)
	if o.fs == nil {
		o.fs = vfs.Default()
	}
}

// ClientID returns the id this consumer heartbeats with ("" before Start).
func (p *PushConsumer) ClientID() string { return p.id }

// Assignment returns the queues the consumer owns now, sorted.
func (p *PushConsumer) Assignment() []MessageQueue { return slices.Clone(*p.assigned.Load()) }

// locking reports whether queues need broker locks: orderly clustering.
func (p *PushConsumer) locking() bool { return p.o.Orderly && p.o.Model == Clustering }

// Start checks that the subscribed topics exist (an error wrapping an
// *Error with code TOPIC_NOT_EXIST otherwise, as RocketMQ's consumers
// fail), loads a broadcasting consumer's offset file, heartbeats every
// known node (failing if none answers), and starts consuming in the
// background: the first rebalance runs at once.
func (p *PushConsumer) Start(ctx context.Context) error {
	if !p.state.CompareAndSwap(pushNew, pushStarted) {
		return fmt.Errorf("client: push consumer %s: Start called twice", p.o.Group)
	}
	if err := p.start(ctx); err != nil {
		p.state.Store(pushStopped)
		p.runCancel()
		p.cbCancel()
		if p.removeNotify != nil {
			p.removeNotify()
		}
		return fmt.Errorf("client: push consumer %s: start: %w", p.o.Group, err)
	}
	return nil
}

func (p *PushConsumer) start(ctx context.Context) error {
	for _, sub := range p.subs {
		if sub.retry {
			continue // created by the broker at the first heartbeat
		}
		if _, err := p.c.route(ctx, sub.topic, time.Now(), false); err != nil {
			return err
		}
	}
	p.id = p.o.ClientID
	if p.id == "" {
		id, err := p.c.newClientID(ctx)
		if err != nil {
			return err
		}
		p.id = id
	}
	p.log = p.log.With("client", p.id)
	if p.o.Model == Broadcasting {
		path := p.o.OffsetFile
		if path == "" {
			dir := p.o.OffsetDir
			if dir == "" {
				base, err := os.UserConfigDir()
				if err != nil {
					return fmt.Errorf("no OffsetFile or OffsetDir, and %w", err)
				}
				dir = filepath.Join(base, "raftmq", "offsets")
			}
			path = filepath.Join(dir, p.o.Group, "offsets.json")
		}
		s, err := openFileOffsetStore(p.o.fs, path, p.o.Group)
		if err != nil {
			return err
		}
		p.store = s
	} else {
		p.store = newBrokerOffsetStore(p.pc)
	}
	p.removeNotify = p.c.onNotify(p.o.Group, p.notified)
	if err := p.heartbeat(ctx); err != nil {
		return err
	}
	p.loops.Add(3)
	go p.run()
	go p.heartbeatLoop()
	go p.persistLoop()
	return nil
}

// newClientID makes "<local IP>@<pid>@<8 hex digits>": the IP this host
// uses towards the group, the process, and a random part so that several
// consumers and producers of one process differ.
func (c *Client) newClientID(ctx context.Context) (string, error) {
	conn, err := c.pool.get(ctx, c.writeTarget(""))
	if err != nil {
		return "", err
	}
	ip := "127.0.0.1"
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	return fmt.Sprintf("%s@%d@%08X", ip, os.Getpid(), c.ids.jitter(1<<32)), nil
}

// notified handles a broker's notice to the group (on a connection's
// request goroutine; it never blocks): a reset goes to the run loop, a
// change of members asks for a rebalance.
func (p *PushConsumer) notified(n groupNotice) {
	if n.reset == nil {
		p.rebalanceSoon()
		return
	}
	select {
	case p.resets <- *n.reset:
	default:
		p.log.Warn("client: too many offset resets at once; this one is ignored (restart the consumer to start from the reset offsets)", "topic", n.reset.topic)
	}
}

// rebalanceSoon asks the run loop to rebalance now; it never blocks.
func (p *PushConsumer) rebalanceSoon() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// heartbeatData is the consumer's HEART_BEAT body.
func (p *PushConsumer) heartbeatData() ([]byte, error) {
	cd := remoting.ConsumerData{
		GroupName:        p.o.Group,
		ConsumeType:      "CONSUME_PASSIVELY",
		MessageModel:     p.o.Model.String(),
		ConsumeFromWhere: p.o.ConsumeFrom.String(),
	}
	for _, s := range p.subs {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, s.data)
	}
	hb := remoting.HeartbeatData{ClientID: p.id, ConsumerDataSet: []remoting.ConsumerData{cd}}
	return hb.Encode()
}

// heartbeat sends HEART_BEAT to every known node at once; each node keeps
// its own registry of the group's consumers. It fails only if no node
// accepted it.
func (p *PushConsumer) heartbeat(ctx context.Context) error {
	body, err := p.heartbeatData()
	if err != nil {
		return err
	}
	return p.c.heartbeatAll(ctx, body)
}

func (p *PushConsumer) heartbeatLoop() {
	defer p.loops.Done()
	t := time.NewTicker(p.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-p.runCtx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := p.stopContext(p.c.timeout)
		if err := p.heartbeat(ctx); err != nil {
			p.log.Warn("client: push consumer heartbeat failed", "err", err)
		}
		cancel()
	}
}

func (p *PushConsumer) persistLoop() {
	defer p.loops.Done()
	t := time.NewTicker(p.o.PersistInterval)
	defer t.Stop()
	for {
		select {
		case <-p.runCtx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := p.stopContext(p.c.timeout)
		if err := p.store.persist(ctx, nil); err != nil {
			p.log.Warn("client: persisting consumer offsets failed", "err", err)
		}
		cancel()
	}
}

// stopContext returns a context with timeout d that also ends at Shutdown.
func (p *PushConsumer) stopContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.runCtx, d)
}

// beginCallback reserves a callback's place among those Shutdown waits
// for; false once Shutdown stopped waiting for new ones.
func (p *PushConsumer) beginCallback() bool {
	p.cbs.Lock()
	defer p.cbs.Unlock()
	if p.cbs.stopping {
		return false
	}
	p.cbs.wg.Add(1)
	return true
}

// call runs the user's callback, turning a panic into ConsumeRetryLater.
func (p *PushConsumer) call(msgs []*MessageExt) (res ConsumeResult) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("client: consume callback panicked; the batch will be retried",
				"topic", msgs[0].Topic, "queue", msgs[0].QueueID, "offset", msgs[0].QueueOffset,
				"panic", r, "stack", string(debug.Stack()))
			res = ConsumeRetryLater
		}
	}()
	return p.fn(p.cbCtx, msgs)
}

// Shutdown stops the consumer: it stops pulling, waits for the callbacks
// in progress (until ctx ends; their context is then cancelled), persists
// every offset, unregisters the client from every node (UNREGISTER_CLIENT)
// and, if orderly in clustering, releases its queue locks
// (UNLOCK_BATCH_MQ). Messages pulled but not consumed, and messages
// waiting for a local retry, are left uncommitted: the group gets them
// again. The
// Client stays open. Errors of the persist, unregister and unlock steps are
// joined; every step runs regardless. Do not call it from a ConsumeFunc: it
// would wait for that callback until ctx ends.
func (p *PushConsumer) Shutdown(ctx context.Context) error {
	if !p.state.CompareAndSwap(pushStarted, pushStopped) {
		return fmt.Errorf("client: push consumer %s: Shutdown without a running consumer", p.o.Group)
	}
	p.removeNotify()
	p.runCancel()
	p.loops.Wait() // the run loop has stopped every queue's pulling
	var errs []error
	if err := p.waitCallbacks(ctx); err != nil {
		errs = append(errs, err)
	}
	owned := slices.SortedFunc(maps.Keys(p.queues), CompareQueues)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.c.timeout*adminAttempts)
	defer cancel()
	if err := p.store.persist(pctx, nil); err != nil {
		errs = append(errs, err)
	}
	if err := p.unregister(pctx); err != nil {
		errs = append(errs, err)
	}
	if p.locking() && len(owned) > 0 {
		if err := p.unlockBatch(pctx, owned); err != nil {
			errs = append(errs, err)
		}
	}
	empty := []MessageQueue{}
	p.assigned.Store(&empty)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("client: push consumer %s: shutdown: %w", p.o.Group, err)
	}
	return nil
}

// waitCallbacks waits for running callbacks, orderly consume loops and
// dropped queues' finish goroutines, or for ctx; then it cancels the
// callbacks' context.
func (p *PushConsumer) waitCallbacks(ctx context.Context) error {
	defer p.cbCancel()
	done := make(chan struct{})
	go func() {
		for _, w := range p.queues {
			<-w.consumeDone
		}
		p.finishes.Wait()
		p.cbs.Lock()
		p.cbs.stopping = true
		p.cbs.Unlock()
		p.cbs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for consume callbacks: %w", ctx.Err())
	}
}

// unregister sends UNREGISTER_CLIENT to every known node.
func (p *PushConsumer) unregister(ctx context.Context) error {
	h := remoting.UnregisterClientRequestHeader{ClientID: p.id, ConsumerGroup: p.o.Group}
	nodes := p.c.nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, addr := range nodes {
		wg.Go(func() {
			resp, _, err := p.c.invoke(ctx, addr, remoting.NewRequest(remoting.UnregisterClient, h.Encode(), nil), p.c.timeout)
			if err == nil && resp.Code != remoting.Success {
				err = responseError(addr, resp)
			}
			if err != nil {
				errs[i] = fmt.Errorf("unregister: %w", err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
