// Command jsbench measures a NATS JetStream cluster the way `raftmq bench`
// measures a raftmq group, so the two can stand side by side in
// docs/benchmarks.md:
//
//	jsbench -mode setup                  (re)create the stream and wait until it takes a message
//	jsbench -mode sync -duration 20s     one publish at a time, each waiting for its ack
//	jsbench -mode async -window 1000     publishes pipelined, at most -window unacknowledged
//	jsbench -mode consume -consumer ordered|durable   read the stream back
//
// Each run prints one line for people, starting with the mode, and one
// line "RESULT {json}" for scripts. Latency is from the publish call to
// its acknowledgement; client_cpu_s is this process's user+system CPU.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// result is one run; the JSON names are those the scripts read.
type result struct {
	System     string  `json:"system"`
	Mode       string  `json:"mode"`
	Label      string  `json:"label,omitempty"`
	Replicas   int     `json:"replicas"`
	Storage    string  `json:"storage"`
	MsgSize    int     `json:"msg_size"`
	Window     int     `json:"window,omitempty"`
	Msgs       int64   `json:"msgs"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	P50us      float64 `json:"p50_us,omitempty"`
	P90us      float64 `json:"p90_us,omitempty"`
	P99us      float64 `json:"p99_us,omitempty"`
	P999us     float64 `json:"p999_us,omitempty"`
	MaxUs      float64 `json:"max_us,omitempty"`
	ClientCPU  float64 `json:"client_cpu_s"`
}

type options struct {
	mode, stream, subject, storage, consumer, label string
	replicas, size, window                          int
	n                                               int64
	duration, timeout                               time.Duration
}

func main() {
	var o options
	urls := flag.String("url", "nats://127.0.0.1:14222", "server URLs, comma-separated")
	flag.StringVar(&o.mode, "mode", "sync", "setup, sync, async or consume")
	flag.StringVar(&o.stream, "stream", "BENCH", "stream name")
	flag.StringVar(&o.subject, "subject", "bench.data", "subject the stream holds")
	flag.IntVar(&o.replicas, "replicas", 3, "the stream's replicas (setup)")
	flag.StringVar(&o.storage, "storage", "file", "file or memory (setup)")
	flag.IntVar(&o.size, "size", 1024, "payload bytes")
	flag.Int64Var(&o.n, "n", 100000, "most messages to publish (consume: to read, 0 for all)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "longest a publish run lasts (consume: a quarter of its limit)")
	flag.IntVar(&o.window, "window", 1000, "most unacknowledged publishes (async)")
	flag.StringVar(&o.consumer, "consumer", "ordered", "ordered, or durable (acknowledging each message)")
	flag.StringVar(&o.label, "label", "", "text copied into the result")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "longest wait for one acknowledgement")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if err := run(*urls, o); err != nil {
		log.Fatalf("jsbench %s: %v", o.mode, err)
	}
}

func run(urls string, o options) error {
	nc, err := nats.Connect(urls, nats.Name("jsbench"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.window+16))
	if err != nil {
		return err
	}
	ctx := context.Background()
	payload := make([]byte, o.size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	r := result{System: "nats-jetstream", Mode: o.mode, Label: o.label, Replicas: o.replicas, Storage: o.storage, MsgSize: o.size}
	var lat []time.Duration
	cpu0, start := cpuSeconds(), time.Now()
	switch o.mode {
	case "setup":
		return setup(ctx, js, o)
	case "sync":
		lat, r.Errors, err = publishSync(ctx, js, o, payload)
	case "async":
		r.Window = o.window
		lat, r.Errors, err = publishAsync(js, o, payload)
	case "consume":
		r.Msgs, r.MsgSize, err = consume(ctx, js, o, &r)
	default:
		return fmt.Errorf("unknown mode %q", o.mode)
	}
	if err != nil {
		return err
	}
	r.Seconds, r.ClientCPU = time.Since(start).Seconds(), math.Round((cpuSeconds()-cpu0)*1e3)/1e3 // to the millisecond
	if o.mode != "consume" {
		r.Msgs = int64(len(lat))
	}
	r.MsgsPerSec = float64(r.Msgs) / r.Seconds
	r.MBPerSec = r.MsgsPerSec * float64(r.MsgSize) / 1e6
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
		r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs = q(.5), q(.9), q(.99), q(.999), q(1)
	}
	line := fmt.Sprintf("%-8s %-28s msgs=%d errs=%d %.2fs  %.0f msgs/s  %.1f MB/s", r.Mode, r.Label, r.Msgs, r.Errors, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	if len(lat) > 0 { // a consumer's run has no latency
		line += fmt.Sprintf("  p50=%.0fus p90=%.0fus p99=%.0fus p99.9=%.0fus max=%.0fus", r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs)
	}
	fmt.Println(line)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT %s\n", b)
	return nil
}

// setup recreates the stream, retrying while the cluster elects its meta
// leader, and returns once a publish is acknowledged; the stream is then
// purged so the runs start from empty.
func setup(ctx context.Context, js jetstream.JetStream, o options) error {
	storage := jetstream.FileStorage
	if o.storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	_ = js.DeleteStream(ctx, o.stream) // absent on a fresh cluster
	cfg := jetstream.StreamConfig{Name: o.stream, Subjects: []string{o.subject}, Replicas: o.replicas, Storage: storage,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld}
	var s jetstream.Stream
	err := retry(time.Minute, func() (err error) {
		c, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		s, err = js.CreateStream(c, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	err = retry(time.Minute, func() error {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := js.Publish(c, o.subject, []byte("first"))
		return err
	})
	if err != nil {
		return fmt.Errorf("first publish: %w", err)
	}
	log.Printf("stream %s ready: %d replicas, %s storage", o.stream, o.replicas, o.storage)
	return s.Purge(ctx)
}

// retry calls f every half second until it succeeds or d has passed.
func retry(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// publishSync publishes one message at a time, waiting for each ack.
func publishSync(ctx context.Context, js jetstream.JetStream, o options, payload []byte) ([]time.Duration, int64, error) {
	lat := make([]time.Duration, 0, 1<<16)
	var errs int64
	for end := time.Now().Add(o.duration); int64(len(lat)) < o.n && time.Now().Before(end); {
		t0 := time.Now()
		c, cancel := context.WithTimeout(ctx, o.timeout)
		_, err := js.Publish(c, o.subject, payload)
		cancel()
		if err != nil {
			if errs++; errs > 100 {
				return nil, errs, fmt.Errorf("%d failed publishes, the last: %w", errs, err)
			}
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, errs, nil
}

// publishAsync keeps up to o.window publishes unacknowledged. The acks of
// one stream come back in order, so one goroutine waits for them in
// the order of the publishes.
func publishAsync(js jetstream.JetStream, o options, payload []byte) ([]time.Duration, int64, error) {
	type pending struct {
		ack jetstream.PubAckFuture
		t0  time.Time
	}
	slots := make(chan struct{}, o.window)
	queue := make(chan pending, o.window+1)
	lat := make([]time.Duration, 0, 1<<20)
	var failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range queue {
			select {
			case <-p.ack.Ok():
				lat = append(lat, time.Since(p.t0))
			case err := <-p.ack.Err():
				if failed.Add(1) <= 5 {
					log.Printf("publish: %v", err)
				}
			case <-time.After(o.timeout):
				failed.Add(1)
			}
			<-slots
		}
	}()
	var sent int64
	var err error
	for end := time.Now().Add(o.duration); sent < o.n && time.Now().Before(end); {
		slots <- struct{}{}
		t0 := time.Now()
		ack, perr := js.PublishAsync(o.subject, payload)
		if perr != nil {
			<-slots
			if failed.Add(1) > 1000 {
				err = fmt.Errorf("too many failed publishes, the last: %w", perr)
				break
			}
			continue
		}
		queue <- pending{ack, t0}
		sent++
	}
	close(queue)
	wg.Wait()
	return lat, failed.Load(), err
}

// consume reads the stream back (o.n messages, or all it holds) with an
// ordered consumer or a durable one that acknowledges every message, and
// returns how many it read and their mean size.
func consume(ctx context.Context, js jetstream.JetStream, o options, r *result) (int64, int, error) {
	// On a loaded machine the cluster may be electing its meta leader
	// again: the lookups and the consumer's creation are retried for a
	// while, as in setup.
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	err := retry(time.Minute, func() (err error) {
		if s, err = js.Stream(ctx, o.stream); err != nil {
			return err
		}
		info, err = s.Info(ctx)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", o.stream, err)
	}
	want := int64(info.State.Msgs)
	if o.n > 0 {
		want = min(want, o.n)
	}
	if want == 0 {
		return 0, 0, errors.New("the stream is empty")
	}
	r.Replicas, r.Storage = info.Config.Replicas, strings.ToLower(info.Config.Storage.String())
	r.Label = strings.TrimSpace(r.Label + " " + o.consumer)
	var cons jetstream.Consumer
	ack := o.consumer == "durable"
	switch o.consumer {
	case "ordered":
		err = retry(time.Minute, func() (err error) {
			cons, err = s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
			return err
		})
	case "durable":
		name := fmt.Sprintf("bench-%d", time.Now().UnixNano())
		err = retry(time.Minute, func() (err error) {
			cons, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 100000})
			return err
		})
		defer func() { _ = s.DeleteConsumer(context.Background(), name) }()
	default:
		return 0, 0, fmt.Errorf("unknown consumer %q", o.consumer)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s consumer: %w", o.consumer, err)
	}
	var got, bytes atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ack {
			_ = m.Ack()
		}
		if n := got.Add(1); n <= want {
			bytes.Add(int64(len(m.Data())))
			if n == want {
				once.Do(func() { close(done) })
			}
		}
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-done:
	case <-time.After(4 * o.duration):
		log.Printf("consume: gave up at %d of %d messages", got.Load(), want)
	}
	cc.Stop()
	n := min(got.Load(), want)
	if n == 0 {
		return 0, 0, errors.New("read nothing")
	}
	return n, int(bytes.Load() / n), nil
}

// cpuSeconds is the user and system CPU this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
