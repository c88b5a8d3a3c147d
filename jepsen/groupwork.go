package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The group workload: producers send as in the other workloads while two
// consumer groups of push consumers (client.PushConsumer) consume the
// topic, their members joining, leaving and being killed while the
// nemeses run:
//
//   - ConcurrentGroup: concurrent consumers; a member lives 2-6 s, then
//     shuts down cleanly or is killed (its connections cut, nothing
//     persisted, unregistered or unlocked), and a new one takes its slot;
//   - OrderlyGroup: orderly consumers under queue locks; members leave
//     cleanly only (a killed member's locks would stall its queues for the
//     broker's 60 s lock life, longer than a run).
//
// Every callback is recorded (history.Deliver), so are joins and leaves, the
// member lists every node answers (history.Members) and each group's
// committed offsets (history.GroupOffset), a few times a second. When the
// run ends one member per group stays until it has been delivered every
// acknowledged send (or groupCatchUp passes). The consumer-group checker
// judges the result.

// Consumer groups of the group workload.
const (
	ConcurrentGroup = "jepsen-cg"
	OrderlyGroup    = "jepsen-og"
)

const (
	// groupCatchUp bounds the wait, after the run, for each group to be
	// delivered every acknowledged send.
	groupCatchUp = 30 * time.Second
	// groupHeartbeat is the members' heartbeat period: RocketMQ's 30 s,
	// longer than a run, so a node that lost its member table (the
	// forget-members mutant) is not repaired by a routine heartbeat.
	groupHeartbeat = 30 * time.Second
	// groupWatch is how often the member lists and offsets are read.
	groupWatch = 250 * time.Millisecond
)

// groupState is what the group workload's goroutines share.
type groupState struct {
	w     *workload
	mu    sync.Mutex
	acked map[string]bool            // values of acknowledged sends
	seen  map[string]map[string]bool // group -> values delivered
}

func (g *groupState) ack(value string) {
	g.mu.Lock()
	g.acked[value] = true
	g.mu.Unlock()
}

// missing counts the acknowledged values not yet delivered to group.
func (g *groupState) missing(group string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for v := range g.acked {
		if !g.seen[group][v] {
			n++
		}
	}
	return n
}

// runGroups runs the consumers and the watcher until ctx ends, then lets
// one member per group catch up.
func (g *groupState) runGroups(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	slot := func(group string, orderly, kills bool, k int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g.w.seed), uint64(1000+k)))
			if err := g.slot(ctx, rng, group, orderly, kills); err != nil {
				errc <- err
			}
		}()
	}
	for i := range 3 {
		slot(ConcurrentGroup, false, true, i)
	}
	for i := range 2 {
		slot(OrderlyGroup, true, false, 10+i)
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); g.watch(wctx) }()
	wg.Wait()
	// Catch up: one fresh member per group until it has everything.
	var cwg sync.WaitGroup
	for _, grp := range []struct {
		name    string
		orderly bool
	}{{ConcurrentGroup, false}, {OrderlyGroup, true}} {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			if err := g.catchUp(grp.name, grp.orderly); err != nil {
				errc <- err
			}
		}()
	}
	cwg.Wait()
	stopWatch()
	<-watchDone
	close(errc)
	return joinErrs(errc)
}

func joinErrs(ch <-chan error) error {
	var errs []error
	for err := range ch {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("jepsen: group workload: %w", errs[0])
}

// member is one running push consumer.
type member struct {
	c    *client.Client
	p    *client.PushConsumer
	proc int
	id   string
}

// join starts a member of group, recording a Join op.
func (g *groupState) join(group string, orderly bool) (*member, error) {
	c, err := g.w.newClient()
	if err != nil {
		return nil, err
	}
	m := &member{c: c, proc: g.w.rec.process()}
	opts := client.PushConsumerOptions{
		Group:             group,
		Subscriptions:     map[string]client.Subscription{topic: {Type: client.ExpressionTag, Expression: "*"}},
		ConsumeFrom:       client.ConsumeFromFirstOffset,
		Orderly:           orderly,
		ConsumeBatchSize:  4,
		LongPoll:          2 * time.Second,
		HeartbeatInterval: groupHeartbeat,
		RebalanceInterval: time.Second,
		PersistInterval:   200 * time.Millisecond,
		LockInterval:      time.Second,
		LockMaxAge:        3 * time.Second,
		RetryDelay:        200 * time.Millisecond,
	}
	m.p, err = c.NewPushConsumer(opts, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		o := history.Op{Process: m.proc, Kind: history.Deliver, Group: group, Queue: int(msgs[0].QueueID), Invoke: g.w.rec.now(), Outcome: history.OK, Orderly: orderly}
		for _, x := range msgs {
			o.Msgs = append(o.Msgs, history.Msg{Offset: x.QueueOffset, Value: string(x.Body)})
		}
		// Callbacks take a while, as real ones do: a queue handed over
		// while its old owner is still inside one shows as an overlap.
		time.Sleep(time.Duration(5+2*len(msgs)) * time.Millisecond)
		o.Complete = g.w.rec.now()
		g.w.rec.op(o)
		g.mu.Lock()
		for _, x := range msgs {
			g.seen[group][string(x.Body)] = true
		}
		g.mu.Unlock()
		return client.ConsumeSuccess
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	o := history.Op{Process: m.proc, Kind: history.Join, Group: group, Invoke: g.w.rec.now(), Orderly: orderly}
	sctx, cancel := context.WithTimeout(context.Background(), 2*g.w.timeout+time.Second)
	err = m.p.Start(sctx)
	cancel()
	o.Complete, o.Outcome, o.Error = g.w.rec.now(), outcome(err), errString(err)
	if err != nil {
		o.Outcome = history.Fail // a start that failed left nothing behind
	}
	m.id = m.p.ClientID()
	o.Value = m.id
	g.w.rec.op(o)
	if err != nil {
		c.Close()
		return nil, nil // not the harness's fault: the group is under faults
	}
	return m, nil
}

// leave stops a member: cleanly, or killed (its client closed first, so
// nothing it would say on the way out reaches a broker).
func (g *groupState) leave(m *member, group string, kill bool) {
	o := history.Op{Process: m.proc, Kind: history.Leave, Group: group, Value: m.id, Invoke: g.w.rec.now(), Outcome: history.OK}
	if kill {
		o.Outcome = history.Info
		m.c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*g.w.timeout)
	err := m.p.Shutdown(ctx)
	cancel()
	o.Complete = g.w.rec.now()
	if err != nil && !kill {
		o.Error = errString(err) // still gone: the broker expires or drops it
	}
	g.w.rec.op(o)
	if !kill {
		m.c.Close()
	}
}

// slot keeps one member of group running until ctx ends, replacing it
// every 2-6 s.
func (g *groupState) slot(ctx context.Context, rng *rand.Rand, group string, orderly, kills bool) error {
	for ctx.Err() == nil {
		m, err := g.join(group, orderly)
		if err != nil {
			return err
		}
		life := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
		select {
		case <-time.After(life):
		case <-ctx.Done():
		}
		if m != nil {
			g.leave(m, group, kills && rng.IntN(3) == 0)
		}
		select {
		case <-time.After(time.Duration(200+rng.IntN(1000)) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return nil
}

// catchUp runs one member of group until every acknowledged send has been
// delivered to the group, or groupCatchUp passes.
func (g *groupState) catchUp(group string, orderly bool) error {
	deadline := time.Now().Add(groupCatchUp)
	var m *member
	for m == nil && time.Now().Before(deadline) {
		var err error
		if m, err = g.join(group, orderly); err != nil {
			return err
		}
		if m == nil {
			time.Sleep(500 * time.Millisecond)
		}
	}
	for g.missing(group) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if m != nil {
		g.leave(m, group, false)
	}
	return nil
}

// watch records every node's member list of both groups and the groups'
// committed offsets until ctx ends.
func (g *groupState) watch(ctx context.Context) {
	c, err := g.w.newClient()
	if err != nil {
		return
	}
	defer c.Close()
	proc := g.w.rec.process()
	pcs := map[string]*client.PullConsumer{ConcurrentGroup: c.NewPullConsumer(ConcurrentGroup), OrderlyGroup: c.NewPullConsumer(OrderlyGroup)}
	t := time.NewTicker(groupWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, grp := range []string{ConcurrentGroup, OrderlyGroup} {
			for i, addr := range g.w.addrs {
				g.members(c, proc, grp, i+1, addr)
			}
			for q := range g.w.queues {
				o := history.Op{Process: proc, Kind: history.GroupOffset, Group: grp, Queue: q, Invoke: g.w.rec.now()}
				fctx, cancel := context.WithTimeout(context.Background(), g.w.timeout)
				off, found, err := pcs[grp].FetchOffset(fctx, topic, int32(q))
				cancel()
				o.Complete, o.Outcome, o.Error = g.w.rec.now(), outcome(err), errString(err)
				if err != nil {
					o.Outcome = history.Fail // a read
				} else if found {
					o.Offset = off
				} else {
					o.Offset = -1
				}
				g.w.rec.op(o)
			}
		}
	}
}

// members records node's answer to GET_CONSUMER_LIST_BY_GROUP.
func (g *groupState) members(c *client.Client, proc int, group string, node int, addr string) {
	o := history.Op{Process: proc, Kind: history.Members, Group: group, Node: node, Invoke: g.w.rec.now()}
	h := remoting.GetConsumerListByGroupRequestHeader{ConsumerGroup: group}
	ctx, cancel := context.WithTimeout(context.Background(), g.w.timeout)
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetConsumerListByGroup, h.Encode(), nil))
	cancel()
	o.Complete, o.Outcome = g.w.rec.now(), history.OK
	if err != nil {
		o.Outcome, o.Error = history.Fail, errString(err)
	} else {
		var body remoting.ConsumerListBody
		if e := json.Unmarshal(resp.Body, &body); e != nil && resp.Code == remoting.Success {
			o.Outcome, o.Error = history.Fail, errString(e)
		}
		for _, id := range body.ConsumerIDList {
			o.Msgs = append(o.Msgs, history.Msg{Value: id})
		}
	}
	g.w.rec.op(o)
}
