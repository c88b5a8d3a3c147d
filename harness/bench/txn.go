package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TxnConfig configures a transaction run: Producers transaction producers
// each committing one transaction at a time for Duration (a fraction
// Rollback of them rolled back instead).
type TxnConfig struct {
	Topic     string
	Queues    int // default 4
	Size      int
	Producers int // default 8
	Duration  time.Duration
	Rollback  float64 // fraction of transactions rolled back, 0 to 1
	Progress  io.Writer
}

// benchListener decides every n-th transaction to roll back.
type benchListener struct {
	every int64 // roll back one in every (0: none)
	mu    sync.Mutex
	n     int64
}

func (l *benchListener) ExecuteLocalTransaction(context.Context, *client.Message) client.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.every > 0 && l.n%l.every == 0 {
		return client.RollbackMessage
	}
	return client.CommitMessage
}

func (l *benchListener) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.CommitMessage
}

// Txn runs a transaction benchmark on c's group: transactions per second
// (each a half message, a local transaction that decides at once, and
// END_TRANSACTION), the latency of each, and a check that the topic holds
// exactly the committed ones.
func Txn(ctx context.Context, c *client.Client, cfg TxnConfig) (Result, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 8
	}
	if _, err := createTopics(ctx, c, []string{cfg.Topic}, cfg.Queues, cfg.Progress); err != nil {
		return Result{}, err
	}
	before := int64(0)
	for q := range cfg.Queues {
		n, err := c.MaxOffset(ctx, cfg.Topic, int32(q))
		if err != nil {
			return Result{}, err
		}
		before += n
	}
	l := &benchListener{}
	if cfg.Rollback > 0 {
		l.every = int64(1 / cfg.Rollback)
	}
	tp, err := c.NewTransactionProducer(client.TransactionProducerOptions{Producer: client.ProducerOptions{Group: "bench-txn"}}, l)
	if err != nil {
		return Result{}, err
	}
	if err := tp.Start(ctx); err != nil {
		return Result{}, err
	}
	defer tp.Shutdown(context.WithoutCancel(ctx))
	body := make([]byte, cfg.Size)
	start := time.Now()
	lat := newRecorder(start)
	cnt := counters{rec: lat}
	stop := make(chan struct{})
	go progress(cfg.Progress, "txn", &cnt, start, stop)
	var committed, rolledBack int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := start.Add(cfg.Duration)
	for p := range cfg.Producers {
		wg.Go(func() {
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				m := &client.Message{Topic: cfg.Topic, QueueID: int32((p + i) % cfg.Queues), Body: body}
				r, err := tp.SendMessageInTransaction(ctx, m)
				if err != nil {
					cnt.fail(err)
					continue
				}
				lat.add(time.Since(t0), 1)
				cnt.msgs.Add(1)
				mu.Lock()
				if r.State == client.CommitMessage {
					committed++
				} else {
					rolledBack++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	elapsed := time.Since(start)
	r := Result{Mode: "txn", Messages: cnt.msgs.Load(), Errors: cnt.errs.Load(), Seconds: elapsed.Seconds(),
		MsgsPerSec: float64(cnt.msgs.Load()) / elapsed.Seconds(), Size: cfg.Size, Producers: cfg.Producers, Queues: cfg.Queues, Topics: 1}
	r.MBPerSec = r.MsgsPerSec * float64(cfg.Size) / 1e6
	if p := cnt.firstErr.Load(); p != nil {
		r.FirstErr = *p
	}
	lat.fill(&r)
	r.Series = timeline(lat, elapsed)
	// The topic must hold exactly the committed transactions.
	var after int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = 0
		for q := range cfg.Queues {
			n, err := c.MaxOffset(ctx, cfg.Topic, int32(q))
			if err != nil {
				return r, err
			}
			after += n
		}
		if after-before >= committed || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after-before != committed {
		return r, fmt.Errorf("bench txn: %d transactions committed (%d rolled back), but the topic gained %d messages", committed, rolledBack, after-before)
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench txn: %d committed, %d rolled back; the topic gained exactly the committed ones\n", committed, rolledBack)
	}
	return r, nil
}
