package transport

import (
	"bufio"
	"bytes"
	"log/slog"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// BenchmarkSend1KiBEntries streams MsgApps of 32 one-KiB entries from one
// transport to another over loopback; MB/s counts entry data delivered
// (and unmarshaled) by the receiver.
func BenchmarkSend1KiBEntries(b *testing.B) {
	const entries, size = 32, 1 << 10
	b.SetBytes(entries * size)
	benchSend(b, appMsg(1, 2, 1, testEntries(entries, size, 'b')))
}

// BenchmarkSendHeartbeats measures small messages, where batching many
// frames into one write matters most.
func BenchmarkSendHeartbeats(b *testing.B) {
	benchSend(b, &pb.Message{
		Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
		Term: proto.Uint64(5), Commit: proto.Uint64(1000),
	})
}

// benchSend sends m b.N times from node 1 to node 2 and waits until all
// arrived. At most window messages are in flight, so the queue never
// overflows and nothing is dropped.
func benchSend(b *testing.B, m *pb.Message) {
	const window = 1024
	credits := make(chan struct{}, window)
	done := make(chan struct{})
	var received atomic.Int64
	total := int64(b.N)
	handler := func(*pb.Message) {
		<-credits
		if received.Add(1) == total {
			close(done)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	recv := startNode(b, 2, listen(b), nil, Config{Logger: quiet, Handler: handler})
	send := startNode(b, 1, listen(b), map[uint64]string{2: recv.addr}, Config{Logger: quiet})
	waitConnected(b, send.tr, 2)
	batch := []*pb.Message{m}

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		credits <- struct{}{}
		send.tr.Send(batch)
	}
	<-done
	b.StopTimer()
	if st := send.tr.Stats()[2]; st.Dropped != 0 {
		b.Fatalf("%d messages dropped", st.Dropped)
	}
}

// BenchmarkFrameCodec encodes a message into a frame and decodes it again,
// the per-message CPU of the send and receive paths without the network:
// a heartbeat (where the frame header is a large part of the bytes) and a
// MsgApp of 32 one-KiB entries.
func BenchmarkFrameCodec(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    *pb.Message
	}{
		{"heartbeat", &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
			Term: proto.Uint64(5), Commit: proto.Uint64(1000)}},
		{"app32x1KiB", appMsg(1, 2, 1, testEntries(32, 1<<10, 'b'))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var buf []byte
			var src bytes.Reader
			fr := frameReader{r: bufio.NewReaderSize(&src, bufferSize), maxFrame: DefaultMaxFrame, cluster: testCluster}
			b.ReportAllocs()
			for range b.N {
				var err error
				buf, err = appendFrame(buf[:0], bc.m, DefaultMaxFrame, testCluster)
				if err != nil {
					b.Fatal(err)
				}
				src.Reset(buf)
				fr.r.Reset(&src)
				if _, err := fr.next(); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
