// Command etcdbench measures Puts on an etcd cluster, the raft-and-fsync
// peer of docs/benchmarks.md: -clients goroutines each put one key at a
// time (a closed loop) over -conns shared gRPC connections, to the leader
// only unless -leader-only=false.
//
//	etcdbench -endpoints http://127.0.0.1:22379,... -clients 256 -conns 16 -duration 20s
//
// It prints one line for people, starting with "put", and one line
// "RESULT {json}" for scripts.
package main

import (
	"context"
	"encoding/json"
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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type result struct {
	System     string  `json:"system"`
	Mode       string  `json:"mode"`
	Label      string  `json:"label,omitempty"`
	Clients    int     `json:"clients"`
	Conns      int     `json:"conns"`
	MsgSize    int     `json:"msg_size"`
	Msgs       int64   `json:"msgs"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	P50us      float64 `json:"p50_us"`
	P90us      float64 `json:"p90_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MaxUs      float64 `json:"max_us"`
	ClientCPU  float64 `json:"client_cpu_s"`
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:22379", "client URLs, comma-separated")
	clients := flag.Int("clients", 1, "goroutines putting one key at a time each")
	conns := flag.Int("conns", 1, "gRPC connections the clients share")
	size := flag.Int("size", 1024, "value bytes")
	n := flag.Int64("n", 10_000_000, "most puts")
	duration := flag.Duration("duration", 20*time.Second, "longest the run lasts")
	leaderOnly := flag.Bool("leader-only", true, "send every put to the leader")
	label := flag.String("label", "", "text copied into the result")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	eps := strings.Split(*endpoints, ",")
	if *leaderOnly {
		l, err := leader(eps)
		if err != nil {
			log.Fatalf("etcdbench: %v", err)
		}
		eps = []string{l}
	}
	r, err := run(eps, *clients, max(1, min(*conns, *clients)), *size, *n, *duration)
	if err != nil {
		log.Fatalf("etcdbench: %v", err)
	}
	r.Label = *label
	fmt.Printf("put c=%-4d %-22s msgs=%d errs=%d %.2fs  %.0f puts/s  %.1f MB/s  p50=%.0fus p90=%.0fus p99=%.0fus p99.9=%.0fus max=%.0fus\n",
		r.Clients, r.Label, r.Msgs, r.Errors, r.Seconds, r.MsgsPerSec, r.MBPerSec, r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs)
	b, err := json.Marshal(r)
	if err != nil {
		log.Fatalf("etcdbench: %v", err)
	}
	fmt.Printf("RESULT %s\n", b)
}

func config(eps []string) clientv3.Config {
	return clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
}

// leader returns the endpoint of the member that leads.
func leader(eps []string) (string, error) {
	c, err := clientv3.New(config(eps))
	if err != nil {
		return "", err
	}
	defer c.Close()
	for _, e := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.Status(ctx, e)
		cancel()
		if err == nil && st.Header.MemberId == st.Leader {
			return e, nil
		}
	}
	return "", fmt.Errorf("no leader among %s", strings.Join(eps, ", "))
}

func run(eps []string, clients, conns, size int, n int64, d time.Duration) (result, error) {
	cs := make([]*clientv3.Client, conns)
	for i := range cs {
		c, err := clientv3.New(config(eps))
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		cs[i] = c
	}
	value := strings.Repeat("v", size)
	var next, failed atomic.Int64
	lats := make([][]time.Duration, clients)
	cpu0, start := cpuSeconds(), time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cs[w%conns]
			for time.Now().Before(end) {
				i := next.Add(1)
				if i > n {
					return
				}
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.Put(ctx, fmt.Sprintf("bench/%010d", i), value)
				cancel()
				if err != nil {
					if failed.Add(1) <= 5 {
						log.Printf("put: %v", err)
					}
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r := result{System: "etcd", Mode: "put", Clients: clients, Conns: conns, MsgSize: size, Errors: failed.Load(),
		Seconds: time.Since(start).Seconds(), ClientCPU: math.Round((cpuSeconds()-cpu0)*1e3) / 1e3}
	all := slices.Concat(lats...)
	slices.Sort(all)
	r.Msgs = int64(len(all))
	r.MsgsPerSec = float64(r.Msgs) / r.Seconds
	r.MBPerSec = r.MsgsPerSec * float64(size) / 1e6
	if len(all) > 0 {
		q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e3 }
		r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs = q(.5), q(.9), q(.99), q(.999), q(1)
	}
	return r, nil
}

// cpuSeconds is the user and system CPU this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
