package interop

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestMeasureFailoverRoutes measures what failover routes cost RocketMQ's
// Go client: SendSync of 1 KiB messages from N senders (each one send at a
// time) for 5 s against a fresh group in three modes: failover routes off
// ("off"), each follower's failover name with the topic's 8 write queues
// ("all", --failover-write-queues=0: 2 sends in 3 forwarded) and with
// one ("one", the default: 2 in 10 forwarded), rotating which goes first
// from round to round (this VM drifts; compare within a round). It logs
// sends/s and each send's latency p50 and p99. A measurement, not a
// check: it runs only with INTEROP_MEASURE=1; INTEROP_MEASURE_SENDERS
// (default "1,8,64") and INTEROP_MEASURE_ROUNDS (default 3) choose its
// settings.
func TestMeasureFailoverRoutes(t *testing.T) {
	if os.Getenv("INTEROP_MEASURE") == "" {
		t.Skip("a measurement: set INTEROP_MEASURE=1")
	}
	senders := []int{1, 8, 64}
	if s := os.Getenv("INTEROP_MEASURE_SENDERS"); s != "" {
		senders = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("INTEROP_MEASURE_SENDERS: %q is not a count of senders", f)
			}
			senders = append(senders, n)
		}
	}
	rounds := 3
	if s := os.Getenv("INTEROP_MEASURE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("INTEROP_MEASURE_ROUNDS: %q is not a count of rounds", s)
		}
		rounds = n
	}
	type mode struct{ name, flag string }
	modes := []mode{{"off", "--failover-routes=false"}, {"all", "--failover-write-queues=0"}, {"one", "--failover-write-queues=1"}}
	for round := 1; round <= rounds; round++ {
		for _, n := range senders {
			for i := range modes {
				m := modes[(i+round-1)%len(modes)]
				t.Run(fmt.Sprintf("round%d-senders%d-%s", round, n, m.name), func(t *testing.T) {
					measureSendSync(t, n, m.name, m.flag)
				})
			}
		}
	}
}

// measureSendSync runs senders SendSync loops for 5 s on a fresh group
// started with flag and logs the rate and latency percentiles.
func measureSendSync(t *testing.T, senders int, mode, flag string) {
	g := startGroup(t, flag)
	topic := uniq("measure")
	g.createTopic(t, topic, 8)
	p := newProducer(t, g)
	sendSync(t, p, primitive.NewMessage(topic, []byte("warm-up")))
	fwd0 := forwarded(t, g)
	const run = 5 * time.Second
	deadline := time.Now().Add(run)
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	body := make([]byte, 1024)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body)); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat, failed = append(lat, mine...), failed+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		t.Fatalf("no send succeeded (%d failed)", failed)
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	share := float64(forwarded(t, g)-fwd0) / float64(len(lat)+failed)
	t.Logf("MEASURE senders=%d mode=%s forwarded_share=%.3f sends_per_s=%.0f p50_ms=%.3f p99_ms=%.3f failed=%d",
		senders, mode, share, float64(len(lat))/run.Seconds(), q(.5), q(.99), failed)
}

// forwarded sums raftmq_forwarded_total (requests a follower forwarded to
// the leader) over g's nodes.
func forwarded(t *testing.T, g *group) (n int64) {
	for _, nd := range g.nodes {
		resp, err := statusClient.Get("http://" + nd.http + "/metrics")
		if err != nil {
			t.Fatalf("metrics of %s: %v", nd.http, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("metrics of %s: %v", nd.http, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "raftmq_forwarded_total "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("metrics of %s: %q: %v", nd.http, line, err)
				}
				n += int64(f)
			}
		}
	}
	return n
}
