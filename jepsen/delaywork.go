package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/store/schedule"
)

// The delay workload: beside two producers and the queue consumers of the
// main topic (so that the main topic's checkers keep working), two
// producers send unique values "d<worker>-<seq>" to DelayTopic, each with
// a timer delay (TIMER_DELAY_MS, 1.5-4 s) or delay level 1 (1 s) or 2
// (5 s), repeating an indeterminate send with the same UNIQ_KEY; one
// consumer per queue of DelayTopic polls random nodes from offset 0,
// following NextBeginOffset. Delayed sends are history.DelaySend ops (the
// offset a broker acknowledges is the message's offset in
// SCHEDULE_TOPIC_XXXX, not in DelayTopic) and the polls history.TopicPoll
// ops. After the run the harness waits until every delayed message is due
// (plus delayMargin), then drains DelayTopic from every node too. The
// delay checker judges the result.

// Topics of the delay, transaction and retry workloads.
const (
	DelayTopic = "jepsen-delayed"
)

const (
	// delayGroup is the pull consumers' group of DelayTopic (they commit
	// nothing).
	delayGroup = "jepsen-delay-consumers"
	// delayMargin is how long after the last delayed message is due the
	// final drain starts.
	delayMargin = 2 * time.Second
	// delayProducers is how many producers send delayed messages.
	delayProducers = 2
)

// timerDelay picks a timer message's delay: 1.5 to 4 s, so that timer
// messages hop between buckets on their way (package schedule).
func timerDelay(rng *rand.Rand) time.Duration {
	return time.Duration(1500+rng.IntN(2501)) * time.Millisecond
}

// extraTopic is a topic a workload uses besides the main one: created
// before the run, drained after it.
type extraTopic struct {
	name   string
	queues int
	// missingOK: the topic may not exist when drained (the broker creates
	// it on demand); a drain finding no topic reads it as empty.
	missingOK bool
}

// extraTopics lists the topics workload uses besides the main topic.
// Created ones (missingOK false) are made before the run.
func extraTopics(workload string, queues int) []extraTopic {
	switch workload {
	case WorkloadDelay:
		return []extraTopic{{name: DelayTopic, queues: queues}}
	case WorkloadTransaction:
		return []extraTopic{{name: TxnTopic, queues: queues}}
	case WorkloadRetry:
		return []extraTopic{{name: RetryTopic, queues: queues}, {name: retryDLQ, queues: 1, missingOK: true}}
	case WorkloadPop:
		return []extraTopic{{name: PopTopic, queues: queues}, {name: "%DLQ%" + PopGroup, queues: 1, missingOK: true},
			{name: "%DLQ%" + PopFIFOGroup, queues: 1, missingOK: true}}
	}
	return nil
}

// pendingUntil returns when (run time, ns) the last message the workload
// holds back (a delayed message) is due; 0 if none.
func (w *workload) pendingUntil() int64 { return w.due.Load() }

// noteDue records that a message is due at t (run time, ns).
func (w *workload) noteDue(t int64) {
	for {
		cur := w.due.Load()
		if t <= cur || w.due.CompareAndSwap(cur, t) {
			return
		}
	}
}

// delayProducer sends delayed values to random queues of DelayTopic.
func (w *workload) delayProducer(worker int) func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	return func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
		p := c.NewProducer(client.ProducerOptions{Group: "jepsen-delay-producers", MaxRetries: -1})
		proc := w.rec.process()
		for seq := 0; w.token(ctx); seq++ {
			value := fmt.Sprintf("d%d-%d", worker, seq)
			queue := rng.IntN(w.queues)
			props := map[string]string{message.PropertyUniqKey: value}
			var (
				delay time.Duration
				level int
			)
			switch r := rng.IntN(10); {
			case r < 6:
				delay = timerDelay(rng)
				props[message.PropertyTimerDelayMS] = strconv.FormatInt(delay.Milliseconds(), 10)
			case r < 8:
				level = 1
			default:
				level = 2
			}
			if level > 0 {
				delay, _ = schedule.LevelDelay(level)
				props[message.PropertyDelayTimeLevel] = strconv.Itoa(level)
			}
			for attempt := 1; ; attempt++ {
				o := history.Op{Process: proc, Kind: history.DelaySend, Topic: DelayTopic, Queue: queue, Value: value,
					DelayMs: delay.Milliseconds(), Level: level, Attempt: attempt, Invoke: w.rec.now()}
				m := &client.Message{Topic: DelayTopic, QueueID: int32(queue), Body: []byte(value), Properties: props}
				sctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
				res, err := p.Send(sctx, m)
				cancel()
				o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
				if err == nil {
					o.Offset, o.SysQueue = res.QueueOffset, int(res.QueueID)
				}
				// A message stored is due by then (the run's end waits for
				// it; the drain's margin covers one stored late).
				w.noteDue(o.Complete + int64(delay))
				w.rec.op(o)
				if o.Outcome == history.Info {
					proc = w.rec.process()
				}
				if o.Outcome != history.Info || attempt >= maxAttempts || ctx.Err() != nil {
					break
				}
				time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
			}
		}
		return nil
	}
}

// topicConsumer polls one queue of topic from offset 0, from random nodes,
// following NextBeginOffset (it commits nothing).
func (w *workload) topicConsumer(topic, group string, queue int) func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	return func(ctx context.Context, c *client.Client, rng *rand.Rand) error {
		pc := c.NewPullConsumer(group)
		proc := w.rec.process()
		var pos int64
		for w.token(ctx) {
			addr, node := w.node(rng)
			p := w.pollTopic(pc, proc, topic, group, addr, node, queue, pos)
			if p.Outcome == history.OK {
				pos = p.Next
			}
		}
		return nil
	}
}

// pollTopic pulls one batch of a queue of another topic than the main
// one, recorded as a history.TopicPoll.
func (w *workload) pollTopic(pc *client.PullConsumer, proc int, topic, group, addr string, node, queue int, from int64) history.Op {
	o := history.Op{Process: proc, Kind: history.TopicPoll, Topic: topic, Queue: queue, Group: group, Offset: from, Node: node, Invoke: w.rec.now()}
	pctx, cancel := context.WithTimeout(context.Background(), w.timeout+time.Second)
	res, err := pc.PullWith(pctx, client.PullRequest{Addr: addr, Topic: topic, Queue: int32(queue), Offset: from, Max: 32})
	cancel()
	o.Complete, o.Outcome, o.Error = w.rec.now(), outcome(err), errString(err)
	if err != nil {
		o.Outcome = history.Fail // a read
	} else {
		o.Next = res.NextBeginOffset
		for _, m := range res.Messages {
			o.Msgs = append(o.Msgs, history.Msg{Offset: m.QueueOffset, Value: string(m.Body)})
		}
	}
	w.rec.op(o)
	return o
}
