package cluster

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// BenchmarkSendAnswer measures what the leader does per send once its
// message applied: the answer (sendResponse: the message ID, the header)
// and the per-topic counters, one message per send, round robin over the
// topics, as pipelined sends over 1,024 topics × 8 queues make it
// (scripts/queues-curve.sh). Between two sends it reads random lines of a
// 64 MiB buffer, as the rest of a broker's work over 8,192 queues does,
// so that per-topic state is not found in the CPU's caches for free; the
// difference between the layouts is the per-topic part.
//
//	go test ./cluster -run '^$' -bench SendAnswer -benchtime 1000000x
func BenchmarkSendAnswer(b *testing.B) {
	for _, topics := range []int{1, 1024} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			br := &Broker{met: NewMetrics(scrapeFuncs{})}
			res := benchResults(b, topics)
			req := &remoting.Command{Code: remoting.SendMessageV2, Opaque: 1}
			cold := make([]byte, 64<<20)
			var sink byte
			x := uint64(88172645463325252)
			start := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r := res[i%topics]
				r[0].PhyOffset += 1200
				r[0].QueueOffset++
				if resp := br.sendResponse(req, r, nil, start); resp.Code != remoting.Success {
					b.Fatal(resp.Remark)
				}
				// 32 lines a send at random in the buffer: 1,024 sends
				// later, a topic's lines have left the CPU's own caches.
				for range 32 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					sink += cold[x%uint64(len(cold))]
				}
			}
			_ = sink
		})
	}
}

// benchResults returns the result of one message stored to each of topics
// topics (of 8 queues) by a store in memory, as Apply makes them.
func benchResults(b *testing.B, topics int) [][]store.MessageResult {
	sa, err := store.OpenStandalone(store.Config{Dir: b.TempDir(), FS: vfs.NewMem(), NoSyncMeta: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	res := make([][]store.MessageResult, topics)
	for t := range res {
		tc := offsets.NewTopicConfig(fmt.Sprintf("bench-%d", t), 8)
		if err := sa.Exec(&store.Command{Op: store.OpCreateTopic, Topic: &tc}); err != nil {
			b.Fatal(err)
		}
		m := &message.Message{Topic: tc.TopicName, QueueID: int32(t % 8), Body: make([]byte, 1024),
			BornHost:   netip.MustParseAddrPort("10.0.0.2:50000"),
			Properties: map[string]string{message.PropertyUniqKey: fmt.Sprintf("7F000001000100000000000000%06X", t)}}
		if res[t], err = sa.Put(m); err != nil || res[t][0].Err != nil {
			b.Fatal(err, res[t])
		}
	}
	return res
}
