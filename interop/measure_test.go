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
	"syscall"
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
	lead := g.waitLeader(30 * time.Second)
	ent0, req0, sync0 := leaderCounts(t, g, lead)
	cpu0 := groupCPU(t, g)
	self0 := selfCPU(t)
	const run = 5 * time.Second
	deadline := time.Now().Add(run)
	var mu sync.Mutex
	var lat, direct, fwd []time.Duration
	failed := 0
	var wg sync.WaitGroup
	body := make([]byte, 1024)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine, myDirect, myFwd []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				t0 := time.Now()
				res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
				if err != nil {
					bad++
					continue
				}
				d := time.Since(t0)
				mine = append(mine, d)
				// A failover name (raftmq@ID) is a follower's: the send
				// took the forwarding hop.
				if strings.Contains(res.MessageQueue.BrokerName, "@") {
					myFwd = append(myFwd, d)
				} else {
					myDirect = append(myDirect, d)
				}
			}
			mu.Lock()
			lat, failed = append(lat, mine...), failed+bad
			direct, fwd = append(direct, myDirect...), append(fwd, myFwd...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		t.Fatalf("no send succeeded (%d failed)", failed)
	}
	self1 := selfCPU(t)
	cpu1 := groupCPU(t, g)
	ent1, req1, sync1 := leaderCounts(t, g, lead)
	q := func(l []time.Duration, f float64) float64 {
		if len(l) == 0 {
			return 0
		}
		slices.Sort(l)
		return float64(l[int(f*float64(len(l)-1))].Microseconds()) / 1000
	}
	n := float64(len(lat))
	share := float64(forwarded(t, g)-fwd0) / float64(len(lat)+failed)
	perSend := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	var followers time.Duration
	for id, c := range cpu1 {
		if id != lead {
			followers += c - cpu0[id]
		}
	}
	t.Logf("MEASURE senders=%d mode=%s forwarded_share=%.3f sends_per_s=%.0f p50_ms=%.3f p99_ms=%.3f "+
		"direct_p50_ms=%.3f forwarded_p50_ms=%.3f sends_per_entry=%.2f sends_per_fsync=%.2f cpu_us_per_send_leader=%.1f "+
		"cpu_us_per_send_followers=%.1f cpu_us_per_send_client=%.1f failed=%d",
		senders, mode, share, n/run.Seconds(), q(lat, .5), q(lat, .99), q(direct, .5), q(fwd, .5),
		(req1-req0)/max(ent1-ent0, 1), n/max(sync1-sync0, 1), perSend(cpu1[lead]-cpu0[lead]), perSend(followers), perSend(self1-self0), failed)
}

// groupCPU returns each broker process's CPU time (user + system) so far,
// by node id, from /proc/PID/stat.
func groupCPU(t *testing.T, g *group) map[int]time.Duration {
	out := make(map[int]time.Duration, len(g.nodes))
	for _, nd := range g.nodes {
		nd.mu.Lock()
		pid := nd.cmd.Process.Pid
		nd.mu.Unlock()
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("CPU of node %d: %v", nd.id, err)
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state is field 3, utime 14, stime 15.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		var ticks int64
		for _, s := range f[11:13] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("CPU of node %d: %q: %v", nd.id, s, err)
			}
			ticks += v
		}
		out[nd.id] = time.Duration(ticks) * (time.Second / 100) // USER_HZ
	}
	return out
}

// selfCPU returns this test process's CPU time (user + system) so far: the
// RocketMQ client's, with the test's own small share.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// leaderCounts returns node id's raftmq_entry_requests histogram count and
// sum (batches of requests proposed, and the requests in them) and its
// raftmq_log_fsync_seconds count (log appends made durable).
func leaderCounts(t *testing.T, g *group, id int) (entries, requests, fsyncs float64) {
	for _, line := range strings.Split(metricsText(t, g.nodes[id-1].http), "\n") {
		if v, ok := strings.CutPrefix(line, "raftmq_entry_requests_count "); ok {
			entries = parseMetric(t, line, v)
		} else if v, ok := strings.CutPrefix(line, "raftmq_entry_requests_sum "); ok {
			requests = parseMetric(t, line, v)
		} else if v, ok := strings.CutPrefix(line, "raftmq_log_fsync_seconds_count "); ok {
			fsyncs = parseMetric(t, line, v)
		}
	}
	return entries, requests, fsyncs
}

func metricsText(t *testing.T, addr string) string {
	resp, err := statusClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	return string(b)
}

func parseMetric(t *testing.T, line, v string) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("metric %q: %v", line, err)
	}
	return f
}

// forwarded sums raftmq_forwarded_total (requests a follower forwarded to
// the leader) over g's nodes.
func forwarded(t *testing.T, g *group) (n int64) {
	for _, nd := range g.nodes {
		for _, line := range strings.Split(metricsText(t, nd.http), "\n") {
			if v, ok := strings.CutPrefix(line, "raftmq_forwarded_total "); ok {
				n += int64(parseMetric(t, line, v))
			}
		}
	}
	return n
}
