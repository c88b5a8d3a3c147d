package store

import (
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// BenchmarkGetMessages reads 1 KiB messages by queue offset, 32 per call,
// from the page cache of real files: consume queue lookup, commitlog copy,
// offset patching.
func BenchmarkGetMessages(b *testing.B) {
	sa, err := OpenStandalone(Config{Dir: b.TempDir(), FS: vfs.Default(), SegmentSize: 256 << 20, Flush: commitlog.FlushAsync})
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	tc := offsets.NewTopicConfig("bench", 1)
	if err := sa.Exec(&Command{Op: OpCreateTopic, Topic: &tc}); err != nil {
		b.Fatal(err)
	}
	const n = 20000
	body := make([]byte, 1024)
	for i := 0; i < n; i += 100 {
		batch := make([]*message.Message, 100)
		for k := range batch {
			batch[k] = &message.Message{Topic: "bench", Body: body, BornHost: netip.MustParseAddrPort("127.0.0.1:1")}
		}
		if _, err := sa.Put(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1024)
	b.ResetTimer()
	off := int64(0)
	for i := 0; i < b.N; i += 32 {
		r, err := sa.GetMessages("bench", 0, off, 32, 1<<20, nil)
		if err != nil || r.Status != Found {
			b.Fatal(err, r.Status)
		}
		off = r.NextBeginOffset % n
	}
}
