package store

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// openBenchStore opens a store on real files in b.TempDir() through fs,
// checkpointing every persist (0: the default), and takes its commitlog
// writer; both are released when the benchmark ends.
func openBenchStore(b *testing.B, fs vfs.FS, persist time.Duration) (*Store, *commitlog.Writer) {
	s, err := Open(Config{Dir: b.TempDir(), FS: fs, SegmentSize: 1 << 30, Flush: commitlog.FlushAsync, NoSyncMeta: true,
		PersistInterval: persist})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	w, err := s.clog.Writer()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Release)
	return s, w
}

// applyBenchEntries applies entries first, first+1, ... (entries of them),
// each expected to store perEntry new messages.
func applyBenchEntries(b *testing.B, s *Store, first uint64, entries, perEntry int) {
	for e := range entries {
		rs, err := s.Apply(first + uint64(e))
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != 1 || len(rs[0].Messages) != perEntry || rs[0].Messages[0].Err != nil || rs[0].Messages[0].Duplicate {
			b.Fatalf("entry %d: unexpected result %+v", e, rs)
		}
	}
}

// BenchmarkApply measures Apply on real files in b.TempDir(): 1 KiB
// messages, each with a distinct UNIQ_KEY and a tag, 64 messages per raft
// entry, one Apply call per entry (as a follower applies a Ready), spread
// over 8 queues. The persist every PersistInterval (100 ms, the default)
// is included, since it also writes consume queues and the index. One op is
// one message. writes/op and syncs/op count the WriteAt and Sync calls made
// through Config.FS while the clock runs (consume queues, index, and the
// commitlog's background syncs; bbolt does not use Config.FS and runs with
// NoSyncMeta): on real files each is one pwrite or fdatasync system call.
//
//	go test ./store/ -run XXX -bench BenchmarkApply -benchtime 2s
func BenchmarkApply(b *testing.B) {
	const perEntry, queues = 64, 8
	var writes, syncs atomic.Int64
	counting := vfs.WithErrors(vfs.Default(), vfs.InjectorFunc(func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpWrite:
			writes.Add(1)
		case vfs.OpSync:
			syncs.Add(1)
		}
		return nil
	}))
	s, w := openBenchStore(b, counting, 0)
	tc := offsets.NewTopicConfig("bench", queues)
	ctc := Command{Op: OpCreateTopic, Topic: &tc}
	body, err := EncodeCommand(0, &ctc)
	if err != nil {
		b.Fatal(err)
	}
	next := s.clog.LastIndex() + 1
	if err := w.Append(commitlog.Entry{Index: next, Term: 1, Data: body}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Apply(next); err != nil {
		b.Fatal(err)
	}
	// Build every entry before the clock starts.
	payload := make([]byte, 1024)
	entries := (b.N + perEntry - 1) / perEntry
	first := s.clog.LastIndex() + 1
	ts := int64(1_760_000_000_000)
	n := 0
	for e := 0; e < entries; e++ {
		msgs := make([]*message.Message, 0, perEntry)
		for k := 0; k < perEntry; k++ {
			msgs = append(msgs, benchMessage(s, "bench", n%queues, n, payload, ts))
			n++
		}
		body, err := EncodeMessages(uint64(e+1), msgs)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Append(commitlog.Entry{Index: first + uint64(e), Term: 1, Data: body}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.clog.Sync(); err != nil {
		b.Fatal(err)
	}
	writes.Store(0)
	syncs.Store(0)
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	applyBenchEntries(b, s, first, entries, perEntry)
	b.StopTimer()
	b.ReportMetric(float64(writes.Load())/float64(entries*perEntry), "writes/op")
	b.ReportMetric(float64(syncs.Load())/float64(entries*perEntry), "syncs/op")
}

// benchMessage is the n-th message of a benchmark's stream: payload as
// its body, to queue of topic, stamped by s as a send would be.
func benchMessage(s *Store, topic string, queue, n int, payload []byte, ts int64) *message.Message {
	m := &message.Message{
		Topic: topic, QueueID: int32(queue), Body: payload,
		BornHost: netip.MustParseAddrPort("10.0.0.1:5000"), BornTimestamp: ts,
		Properties: map[string]string{
			message.PropertyUniqKey: fmt.Sprintf("0A00000100002A9F0000%012X", n),
			message.PropertyTags:    "TagA",
		},
	}
	s.StoreStamp(m)
	m.StoreTimestamp = ts + int64(n)/1000
	return m
}
