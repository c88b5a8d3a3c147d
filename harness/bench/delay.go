package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/message"
)

// DelayConfig configures a delay run: Messages timer messages, each due
// Delay (plus up to Spread) after it is sent, and pull consumers that
// measure how late each is delivered.
type DelayConfig struct {
	Topic    string
	Queues   int // default 4
	Size     int // body bytes (at least 16: due time and sequence number)
	Messages int64
	Delay    time.Duration
	Spread   time.Duration
	Window   int // sends in flight (default 256)
	// SameDue makes every message due Delay after the run starts (rather
	// than after it is sent): the whole run piles up in the schedule and
	// falls due at once, a backlog to drain.
	SameDue bool
	// Stall ends the run when nothing is delivered for this long after the
	// last message is due (default 30 s).
	Stall    time.Duration
	Progress io.Writer
}

// DelayResult is a delay run's summary.
type DelayResult struct {
	Messages   int64   `json:"messages"` // acknowledged sends
	SendErrors int64   `json:"sendErrors"`
	SendSecs   float64 `json:"sendSeconds"`
	SendRate   float64 `json:"sendMsgsPerSec"`
	Delivered  int64   `json:"delivered"` // distinct messages delivered
	Duplicates int64   `json:"duplicates"`
	// Early counts deliveries stored before their due time (never
	// expected).
	Early int64 `json:"early"`
	// Lateness of each delivery, milliseconds: when the consumer got it
	// (Recv) and when the leader stored the delivered copy (Store), after
	// its due time.
	RecvP50, RecvP99, RecvMax    float64
	StoreP50, StoreP99, StoreMax float64
	DrainSecs                    float64    `json:"drainSeconds"` // last due time to last delivery
	Size                         int        `json:"size"`
	Delay                        string     `json:"delay"`
	Spread                       string     `json:"spread"`
	Series                       []Interval `json:"-"` // deliveries per step, with their receive lateness
}

func (r DelayResult) String() string {
	return fmt.Sprintf("delay %s (+%s): sent %d (%d errors) in %.1fs = %.0f msgs/s; delivered %d, %d duplicates, %d early; "+
		"lateness received p50 %.1f ms p99 %.1f ms max %.1f ms, stored p50 %.1f ms p99 %.1f ms max %.1f ms; drained %.1fs after the last was due",
		r.Delay, r.Spread, r.Messages, r.SendErrors, r.SendSecs, r.SendRate, r.Delivered, r.Duplicates, r.Early,
		r.RecvP50, r.RecvP99, r.RecvMax, r.StoreP50, r.StoreP99, r.StoreMax, r.DrainSecs)
}

// Delay runs a delay benchmark on c's group.
func Delay(ctx context.Context, c *client.Client, cfg DelayConfig) (DelayResult, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	cfg.Size = max(cfg.Size, 16)
	if cfg.Window <= 0 {
		cfg.Window = 256
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 30 * time.Second
	}
	if cfg.Messages <= 0 {
		return DelayResult{}, fmt.Errorf("bench delay: --messages must be > 0")
	}
	if _, err := createTopics(ctx, c, []string{cfg.Topic}, cfg.Queues, cfg.Progress); err != nil {
		return DelayResult{}, err
	}
	start := time.Now()
	res := DelayResult{Size: cfg.Size, Delay: cfg.Delay.String(), Spread: cfg.Spread.String()}
	seen := make([]atomic.Bool, cfg.Messages)
	var delivered, dups, early atomic.Int64
	var lastDelivery atomic.Int64 // unix ms
	var mu sync.Mutex
	var recvLate, storeLate []time.Duration
	rec := newRecorder(start)

	// Consumers first, from each queue's current end.
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var cwg sync.WaitGroup
	pc := c.NewPullConsumer("bench-delay")
	for q := range cfg.Queues {
		from, err := c.MaxOffset(ctx, cfg.Topic, int32(q))
		if err != nil {
			return res, err
		}
		cwg.Go(func() {
			for cctx.Err() == nil {
				pr, err := pc.Pull(cctx, cfg.Topic, int32(q), from, 64, time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				now := time.Now().UnixMilli()
				var rl, sl []time.Duration
				for _, m := range pr.Messages {
					if len(m.Body) < 16 {
						continue
					}
					due := int64(binary.BigEndian.Uint64(m.Body))
					seq := binary.BigEndian.Uint64(m.Body[8:])
					if seq >= uint64(len(seen)) || seen[seq].Swap(true) {
						dups.Add(1)
						continue
					}
					delivered.Add(1)
					if m.StoreTimestamp < due {
						early.Add(1)
					}
					rl = append(rl, time.Duration(now-due)*time.Millisecond)
					sl = append(sl, time.Duration(m.StoreTimestamp-due)*time.Millisecond)
					rec.add(time.Duration(max(now-due, 0))*time.Millisecond, 1)
				}
				if len(pr.Messages) > 0 {
					lastDelivery.Store(now)
					mu.Lock()
					recvLate, storeLate = append(recvLate, rl...), append(storeLate, sl...)
					mu.Unlock()
				}
				from = pr.NextBeginOffset
			}
		})
	}

	// Producer.
	pr := c.NewProducer(client.ProducerOptions{Group: "bench-delay", Window: cfg.Window})
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 1))
	var acked, failed atomic.Int64
	var lastDue int64
	var swg sync.WaitGroup
	stop := make(chan struct{})
	cnt := counters{rec: newRecorder(start)}
	go progress(cfg.Progress, "delay send", &cnt, start, stop)
	for i := range cfg.Messages {
		if ctx.Err() != nil {
			break
		}
		d := cfg.Delay
		if cfg.Spread > 0 {
			d += time.Duration(rng.Int64N(int64(cfg.Spread)))
		}
		due := time.Now().Add(d).UnixMilli()
		if cfg.SameDue {
			due = start.Add(d).UnixMilli()
		}
		lastDue = max(lastDue, due)
		body := make([]byte, cfg.Size)
		binary.BigEndian.PutUint64(body, uint64(due))
		binary.BigEndian.PutUint64(body[8:], uint64(i))
		m := &client.Message{Topic: cfg.Topic, QueueID: int32(i % int64(cfg.Queues)), Body: body,
			Properties: map[string]string{message.PropertyTimerDeliverMS: strconv.FormatInt(due, 10)}}
		swg.Add(1)
		err := pr.SendAsync(ctx, m, func(_ client.SendResult, err error) {
			defer swg.Done()
			if err != nil {
				failed.Add(1)
				cnt.fail(err)
				return
			}
			acked.Add(1)
			cnt.msgs.Add(1)
		})
		if err != nil {
			swg.Done()
			failed.Add(1)
		}
	}
	swg.Wait()
	close(stop)
	sent := time.Since(start)
	res.Messages, res.SendErrors = acked.Load(), failed.Load()
	res.SendSecs = sent.Seconds()
	res.SendRate = float64(res.Messages) / sent.Seconds()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench delay: %d sent in %.1fs; waiting for deliveries (last due in %v)\n", res.Messages, sent.Seconds(),
			time.Until(time.UnixMilli(lastDue)).Round(time.Millisecond))
	}

	// Wait for every acknowledged message, or a stall.
	for {
		n := delivered.Load()
		if n >= res.Messages {
			break
		}
		last := max(lastDelivery.Load(), lastDue)
		if time.Now().UnixMilli()-last > cfg.Stall.Milliseconds() || ctx.Err() != nil {
			break
		}
		if cfg.Progress != nil && time.Now().Unix()%5 == 0 {
			fmt.Fprintf(cfg.Progress, "bench delay: %d of %d delivered\n", n, res.Messages)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // late duplicates
	stopConsumers()
	cwg.Wait()
	res.Delivered, res.Duplicates, res.Early = delivered.Load(), dups.Load(), early.Load()
	res.DrainSecs = float64(lastDelivery.Load()-lastDue) / 1e3
	mu.Lock()
	slices.Sort(recvLate)
	slices.Sort(storeLate)
	if len(recvLate) > 0 {
		res.RecvP50, res.RecvP99, res.RecvMax = quantile(recvLate, 0.5), quantile(recvLate, 0.99), quantile(recvLate, 1)
		res.StoreP50, res.StoreP99, res.StoreMax = quantile(storeLate, 0.5), quantile(storeLate, 0.99), quantile(storeLate, 1)
	}
	mu.Unlock()
	res.Series = timeline(rec, time.Since(start))
	if res.Delivered < res.Messages {
		return res, fmt.Errorf("bench delay: %d of %d acknowledged messages delivered", res.Delivered, res.Messages)
	}
	return res, nil
}
