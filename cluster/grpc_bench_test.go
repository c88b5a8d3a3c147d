package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// BenchmarkSendRemotingVsGRPC sends 1 KiB messages to the leader of one
// three-node group, over remoting and over gRPC, one at a time (serial:
// latency, reported as p50-ms) and from 64 goroutines (parallel:
// throughput, msgs/s), each run on a group of its own. Both go through
// the same raft path; the difference is the front end (and, here, the
// gRPC client's own cost, in the same process).
//
//	go test ./cluster -run '^$' -bench SendRemotingVsGRPC -benchtime 3000x
func BenchmarkSendRemotingVsGRPC(b *testing.B) {
	for _, name := range []string{"remoting", "grpc"} {
		b.Run(name+"/serial", func(b *testing.B) {
			send := benchSender(b, name)
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := send(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			send := benchSender(b, name)
			b.SetParallelism(32) // 64 senders on 2 cores
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := send(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			// The process's CPU (client and the three nodes) per message:
			// what throughput follows on a shared machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/msg")
		})
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSender starts a group of its own (so that no run inherits
// another's log) and returns a send of a 1 KiB message to its leader
// over remoting or gRPC.
func benchSender(b *testing.B, proto string) func() error {
	// The store's default index: the tests' small one makes the
	// deduplication lookups of later sends slower than earlier ones.
	tb := startGRPCBrokers(b, func(c *Config) { c.Store.IndexSlots, c.Store.IndexMaxEntries = 0, 0 })
	l := tb.leader()
	body := string(make([]byte, 1024))
	rc := dial(b, l.ClientAddr())
	// Create the topic, outside the measurement.
	if r := invoke(b, rc, sendCmd("B", 0, body, "warm")); r.Code != remoting.Success {
		b.Fatalf("warm-up send: %d %s", r.Code, r.Remark)
	}
	var seq atomic.Int64
	if proto == "remoting" {
		return func() error {
			id := fmt.Sprintf("R%d", seq.Add(1))
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := rc.Invoke(cctx, sendCmd("B", -1, body, id))
			if err == nil && r.Code != remoting.Success {
				err = fmt.Errorf("remoting send: %d %s", r.Code, r.Remark)
			}
			return err
		}
	}
	// The options of bench produce's gRPC client (harness/bench): fixed
	// windows (no bandwidth-estimate PINGs), no retries.
	cc, err := grpc.NewClient(l.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithReadBufferSize(256<<10), grpc.WithWriteBufferSize(256<<10),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(16<<20),
		grpc.WithDisableRetry(), grpc.WithDisableServiceConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	gc := rmqpb.NewMessagingServiceClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), mdClientID, "bench@1")
	return func() error {
		id := fmt.Sprintf("G%d", seq.Add(1))
		r, err := gc.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{grpcMsg("B", id, body, nil)}})
		if err == nil && r.Status.Code != rmqpb.Code_OK {
			err = fmt.Errorf("grpc send: %s %s", r.Status.Code, r.Status.Message)
		}
		return err
	}
}
