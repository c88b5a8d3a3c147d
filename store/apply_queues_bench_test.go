package store

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// BenchmarkApplyQueues is BenchmarkApply spread over many queues, as the
// many-queues curve (scripts/queues-curve.sh) lays them out: 1 KiB messages
// with a UNIQ_KEY and a tag, 64 per raft entry, one Apply per entry, sent
// round robin over every queue of topics×queues, with the checkpoints of
// the default PersistInterval running beside. Every queue gets a message
// and a checkpoint before the clock starts, so that its files exist (as in
// the curve's timed run). cpu-ns/op is the process's user + system CPU per
// message while the clock runs, checkpoints included (they run on their own
// goroutine, so ns/op, which is wall time, misses most of them), and
// gc-cpu-ns/op the collector's share of it (the runtime's estimate), in
// gcs collections; heap-objs
// is the live heap objects after the run (runtime.MemStats.HeapObjects
// after a collection), which the collector marks in every cycle.
//
//	go test ./store/ -run XXX -bench BenchmarkApplyQueues -benchtime 400000x
func BenchmarkApplyQueues(b *testing.B) {
	for _, c := range []struct{ topics, queues int }{{1, 4}, {1, 256}, {1024, 8}} {
		b.Run(fmt.Sprintf("%dx%d", c.topics, c.queues), func(b *testing.B) { benchApplyQueues(b, c.topics, c.queues) })
	}
}

func benchApplyQueues(b *testing.B, topics, queues int) {
	const perEntry = 64
	// Checkpoints every 100 ms (stretched with many queues as in a broker):
	// about as many messages per checkpoint as a broker applying ~25 k
	// messages/s sees with the default 1 s.
	s, w := openBenchStore(b, vfs.Default(), 100*time.Millisecond)
	next := s.clog.LastIndex() + 1
	appendEntry := func(body []byte) {
		if err := w.Append(commitlog.Entry{Index: next, Term: 1, Data: body}); err != nil {
			b.Fatal(err)
		}
		next++
	}
	name := func(t int) string { return fmt.Sprintf("bench-%d", t) }
	for t := range topics {
		tc := offsets.NewTopicConfig(name(t), int32(queues))
		body, err := EncodeCommand(0, &Command{Op: OpCreateTopic, Topic: &tc})
		if err != nil {
			b.Fatal(err)
		}
		appendEntry(body)
	}
	payload := make([]byte, 1024)
	ts := int64(1_760_000_000_000)
	total := topics * queues
	n := 0
	// entry builds the next entry of perEntry messages, round robin over
	// every queue of every topic.
	entry := func(batch uint64) []byte {
		msgs := make([]*message.Message, 0, perEntry)
		for range perEntry {
			i := n % total
			msgs = append(msgs, benchMessage(s, name(i%topics), i/topics%queues, n, payload, ts))
			n++
		}
		body, err := EncodeMessages(batch, msgs)
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	warm := (total + perEntry - 1) / perEntry
	for e := range warm {
		appendEntry(entry(uint64(e + 1)))
	}
	if _, err := s.Apply(next - 1); err != nil {
		b.Fatal(err)
	}
	if err := s.Persist(); err != nil {
		b.Fatal(err)
	}
	entries := (b.N + perEntry - 1) / perEntry
	first := next
	for e := range entries {
		appendEntry(entry(uint64(warm + e + 1)))
	}
	if err := s.clog.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	cpu0, gc0, n0 := cpuTime(b), gcCPU(), gcCycles()
	b.ResetTimer()
	applyBenchEntries(b, s, first, entries, perEntry)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(entries*perEntry), "cpu-ns/op")
	b.ReportMetric(float64(gcCPU()-gc0)/float64(entries*perEntry), "gc-cpu-ns/op")
	b.ReportMetric(float64(gcCycles()-n0), "gcs")
	// The live heap objects the collector marks in each cycle, with every
	// queue open (the count moves with the queues' files and buffers).
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapObjects), "heap-objs")
}

// gcCPU returns the runtime's estimate of the CPU its collector has used so
// far (/cpu/classes/gc/total:cpu-seconds; an estimate, to compare between
// runs of this benchmark only).
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}

// gcCycles returns the number of collections completed so far.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// cpuTime returns the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
