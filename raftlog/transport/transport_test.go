package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestDeliveryInOrder sends from each of three transports to both others,
// sharing entries between the two copies of each message, and checks that
// every receiver gets every sender's messages in order with intact data
// that does not alias the reader's reused buffer.
func TestDeliveryInOrder(t *testing.T) {
	const n = 2000
	nodes := startCluster(t, 3, Config{})
	for _, src := range nodes {
		go func() {
			for i := uint64(0); i < n; i++ {
				ents := []*pb.Entry{{Term: proto.Uint64(1), Index: proto.Uint64(i), Data: entryData(src.id, i)}}
				var batch []*pb.Message
				for _, dst := range nodes {
					if dst != src {
						batch = append(batch, appMsg(src.id, dst.id, i, ents))
					}
				}
				src.tr.Send(batch)
			}
		}()
	}
	for _, dst := range nodes {
		for _, src := range nodes {
			if src == dst {
				continue
			}
			require.Eventually(t, func() bool { return len(dst.rec.from(src.id)) == n },
				5*time.Second, 5*time.Millisecond, "%d -> %d", src.id, dst.id)
			for i, m := range dst.rec.from(src.id) {
				require.Equal(t, uint64(i), m.GetIndex(), "%d -> %d out of order", src.id, dst.id)
				require.Len(t, m.GetEntries(), 1)
				require.Equal(t, entryData(src.id, uint64(i)), m.GetEntries()[0].GetData())
			}
		}
	}
	for _, nd := range nodes {
		for id, st := range nd.tr.Stats() {
			require.Zero(t, st.Dropped, "node %d peer %d", nd.id, id)
			require.EqualValues(t, n, st.Sent, "node %d peer %d", nd.id, id)
			require.True(t, st.Connected)
			require.Greater(t, st.BytesWritten, uint64(n*200))
		}
	}
}

// TestWrongClusterRefused dials with a handshake of another cluster: the
// acceptor closes the stream, logs why, and delivers nothing.
func TestWrongClusterRefused(t *testing.T) {
	b := startNode(t, 2, listen(t), nil, Config{})

	conn, err := net.Dial("tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(handshake{cluster: testCluster + 1, from: 1, to: 2}.marshal())
	require.NoError(t, err)
	frame, err := appendFrame(nil, appMsg(1, 2, 1, nil), DefaultMaxFrame, testCluster)
	require.NoError(t, err)
	conn.Write(frame) // may fail if already closed

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "stream not closed: %v", err)
	require.Eventually(t, func() bool { return b.logs.contains(ErrClusterMismatch.Error()) },
		time.Second, time.Millisecond)

	// A whole transport of the other cluster never gets through either.
	a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, Config{ClusterID: testCluster + 1})
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		a.tr.Send([]*pb.Message{appMsg(1, 2, 1, nil)})
		time.Sleep(5 * time.Millisecond)
	}
	require.Empty(t, b.rec.from(1))
}

// TestPeerDownDropsAndReconnects stops a peer: Send stays fast and drops
// with Unreachable; when the peer comes back on its address, delivery
// resumes on a new stream.
func TestPeerDownDropsAndReconnects(t *testing.T) {
	lb := listen(t)
	addrB := lb.Addr().String()
	cfg := Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	a := startNode(t, 1, listen(t), map[uint64]string{2: addrB}, cfg)
	b := startNode(t, 2, lb, map[uint64]string{1: a.addr}, cfg)
	waitConnected(t, a.tr, 2)

	require.NoError(t, b.tr.Close())
	require.Eventually(t, func() bool { return !a.tr.Connected(2) }, 5*time.Second, time.Millisecond)

	msgs := make([]*pb.Message, 10000)
	for i := range msgs {
		msgs[i] = appMsg(1, 2, uint64(i), nil)
	}
	start := time.Now()
	a.tr.Send(msgs)
	require.Less(t, time.Since(start), 500*time.Millisecond, "Send blocked on a dead peer")
	require.Equal(t, 1, a.rec.unreachableCount(2), "one Unreachable per Send call and peer")
	require.GreaterOrEqual(t, a.tr.Stats()[2].Dropped, uint64(len(msgs)))

	lb2, err := net.Listen("tcp", addrB)
	require.NoError(t, err)
	b2 := startNode(t, 2, lb2, map[uint64]string{1: a.addr}, cfg)
	waitConnected(t, a.tr, 2)
	require.GreaterOrEqual(t, a.tr.Stats()[2].Reconnects, uint64(1))
	a.tr.Send([]*pb.Message{appMsg(1, 2, 7, testEntries(1, 10, 'r'))})
	require.Eventually(t, func() bool { return len(b2.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(7), b2.rec.from(1)[0].GetIndex())
}

// TestFullQueueDrops stalls the stream's writes: the queue fills, Send
// drops the rest without blocking, and the queued messages still arrive in
// order once the stream moves again.
func TestFullQueueDrops(t *testing.T) {
	const queue = 8
	gate := make(chan struct{})
	cfg := Config{QueueSize: queue, Dial: hookDial(func(_, write int, b []byte, closed <-chan struct{}) ([]byte, error) {
		if write > 0 {
			select {
			case <-gate:
			case <-closed:
				return nil, net.ErrClosed
			}
		}
		return b, nil
	})}
	lb := listen(t)
	b := startNode(t, 2, lb, nil, Config{})
	a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, cfg)
	waitConnected(t, a.tr, 2)

	const total = 1000
	start := time.Now()
	for i := range total {
		a.tr.Send([]*pb.Message{appMsg(1, 2, uint64(i), nil)})
	}
	require.Less(t, time.Since(start), 500*time.Millisecond, "Send blocked on a full queue")
	dropped := a.tr.Stats()[2].Dropped
	// Only the queue plus the batch stuck in the writer's flush got in.
	require.Greater(t, dropped, uint64(total/2))
	require.EqualValues(t, dropped, a.rec.unreachableCount(2))

	close(gate)
	want := total - int(dropped)
	require.Eventually(t, func() bool { return len(b.rec.from(1)) == want }, 5*time.Second, time.Millisecond)
	last := int64(-1)
	for _, m := range b.rec.from(1) {
		require.Greater(t, int64(m.GetIndex()), last)
		last = int64(m.GetIndex())
	}
}

// TestCorruptFrameRecovers flips the last byte of the first batch on the
// first stream: the acceptor rejects the frame and closes the stream, the
// dialer reconnects, and later messages arrive intact.
func TestCorruptFrameRecovers(t *testing.T) {
	cfg := Config{
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Dial: hookDial(func(conn, write int, b []byte, _ <-chan struct{}) ([]byte, error) {
			if conn == 0 && write == 1 {
				b = bytes.Clone(b)
				b[len(b)-1] ^= 0x01
			}
			return b, nil
		}),
	}
	b := startNode(t, 2, listen(t), nil, Config{})
	a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, cfg)
	waitConnected(t, a.tr, 2)

	a.tr.Send([]*pb.Message{appMsg(1, 2, 0, []*pb.Entry{{Data: entryData(1, 0)}})})
	require.Eventually(t, func() bool { return b.logs.contains("corrupt frame") }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return a.tr.Stats()[2].Reconnects >= 1 && a.tr.Connected(2) },
		5*time.Second, time.Millisecond)

	for i := uint64(1); ; i++ {
		a.tr.Send([]*pb.Message{appMsg(1, 2, i, []*pb.Entry{{Data: entryData(1, i)}})})
		if len(b.rec.from(1)) > 0 {
			break
		}
		require.Less(t, i, uint64(1000), "stream did not recover")
		time.Sleep(5 * time.Millisecond)
	}
	for _, m := range b.rec.from(1) {
		require.NotZero(t, m.GetIndex(), "the corrupted message was delivered")
		require.Equal(t, entryData(1, m.GetIndex()), m.GetEntries()[0].GetData())
	}
}

// TestBlackholedPeerTimesOut points a transport at a listener that accepts
// and never reads: once TCP buffers fill, the write deadline declares the
// stream dead and the writer redials, while Send keeps dropping.
func TestBlackholedPeerTimesOut(t *testing.T) {
	hole := listen(t)
	var held []net.Conn
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		hole.Close()
		<-acceptDone
		for _, c := range held {
			c.Close()
		}
	})
	cfg := Config{QueueSize: 16, WriteTimeout: 100 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	a := startNode(t, 1, listen(t), map[uint64]string{2: hole.Addr().String()}, cfg)
	waitConnected(t, a.tr, 2)
	big := appMsg(1, 2, 1, testEntries(1, 1<<20, 'b'))
	deadline := time.Now().Add(10 * time.Second)
	for a.tr.Stats()[2].Reconnects == 0 {
		require.True(t, time.Now().Before(deadline), "stuck stream never timed out")
		start := time.Now()
		a.tr.Send([]*pb.Message{big})
		require.Less(t, time.Since(start), 100*time.Millisecond, "Send blocked on a stuck stream")
		time.Sleep(time.Millisecond)
	}
	require.Positive(t, a.rec.unreachableCount(2))
}

func TestSnapshotStatus(t *testing.T) {
	snap := func(to uint64, size int) *pb.Message {
		return &pb.Message{
			Type: pb.MessageType_MsgSnap.Enum(), From: proto.Uint64(1), To: proto.Uint64(to),
			Snapshot: &pb.Snapshot{
				Data:     bytes.Repeat([]byte{'s'}, size),
				Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(10), Term: proto.Uint64(2)},
			},
		}
	}

	t.Run("flushed", func(t *testing.T) {
		b := startNode(t, 2, listen(t), nil, Config{})
		a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, Config{})
		waitConnected(t, a.tr, 2)
		m := snap(2, 4<<20)
		a.tr.Send([]*pb.Message{m})
		require.Eventually(t, func() bool { return len(a.rec.snapReports()) == 1 }, 5*time.Second, time.Millisecond)
		require.Equal(t, snapReport{2, false}, a.rec.snapReports()[0])
		require.Eventually(t, func() bool { return len(b.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)
		require.True(t, proto.Equal(m, b.rec.from(1)[0]))
	})

	t.Run("peer down", func(t *testing.T) {
		dead := listen(t)
		addr := dead.Addr().String()
		dead.Close()
		a := startNode(t, 1, listen(t), map[uint64]string{2: addr}, Config{})
		a.tr.Send([]*pb.Message{snap(2, 10)})
		require.Equal(t, []snapReport{{2, true}}, a.rec.snapReports())
		require.Equal(t, 1, a.rec.unreachableCount(2))
	})

	t.Run("unknown peer", func(t *testing.T) {
		a := startNode(t, 1, listen(t), nil, Config{})
		a.tr.Send([]*pb.Message{snap(9, 10)})
		require.Equal(t, []snapReport{{9, true}}, a.rec.snapReports())
		require.Zero(t, a.rec.unreachableCount(9))
	})

	t.Run("write fails", func(t *testing.T) {
		b := startNode(t, 2, listen(t), nil, Config{})
		cfg := Config{Dial: hookDial(func(_, write int, b []byte, _ <-chan struct{}) ([]byte, error) {
			if write > 0 {
				return nil, io.ErrClosedPipe
			}
			return b, nil
		})}
		a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, cfg)
		waitConnected(t, a.tr, 2)
		a.tr.Send([]*pb.Message{snap(2, 10)})
		require.Eventually(t, func() bool { return len(a.rec.snapReports()) == 1 }, 5*time.Second, time.Millisecond)
		require.Equal(t, snapReport{2, true}, a.rec.snapReports()[0])
		require.Equal(t, 1, a.rec.unreachableCount(2))
	})

	t.Run("too large", func(t *testing.T) {
		b := startNode(t, 2, listen(t), nil, Config{})
		a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, Config{MaxFrame: 1 << 10})
		waitConnected(t, a.tr, 2)
		a.tr.Send([]*pb.Message{snap(2, 4<<10), appMsg(1, 2, 5, nil)})
		require.Eventually(t, func() bool { return len(b.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)
		require.Equal(t, []snapReport{{2, true}}, a.rec.snapReports())
		require.True(t, a.tr.Connected(2), "an unsendable message must not cost the stream")
	})
}

func TestAddRemovePeer(t *testing.T) {
	b := startNode(t, 2, listen(t), nil, Config{})
	dead := listen(t)
	deadAddr := dead.Addr().String()
	dead.Close()
	a := startNode(t, 1, listen(t), map[uint64]string{2: deadAddr}, Config{MinBackoff: time.Second, MaxBackoff: 2 * time.Second})
	require.Never(t, func() bool { return a.tr.Connected(2) }, 50*time.Millisecond, time.Millisecond)

	// The address change must not wait for the (long) backoff.
	a.tr.AddPeer(2, b.addr)
	waitConnected(t, a.tr, 2)
	a.tr.Send([]*pb.Message{appMsg(1, 2, 1, nil)})
	require.Eventually(t, func() bool { return len(b.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)

	a.tr.RemovePeer(2)
	require.False(t, a.tr.Connected(2))
	require.NotContains(t, a.tr.Stats(), uint64(2))
	a.tr.Send([]*pb.Message{appMsg(1, 2, 2, nil)})
	require.Zero(t, a.rec.unreachableCount(2))

	a.tr.AddPeer(2, b.addr)
	waitConnected(t, a.tr, 2)
}

// TestCloseLeavesNoGoroutines runs a cluster with a dead peer, a removed
// peer and traffic, closes it, and waits for the goroutine count to settle
// back.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		ls := []net.Listener{listen(t), listen(t)}
		dead := listen(t)
		deadAddr := dead.Addr().String()
		dead.Close()
		peers := map[uint64]string{1: ls[0].Addr().String(), 2: ls[1].Addr().String(), 3: deadAddr}
		var trs []*Transport
		for i, l := range ls {
			id := uint64(i + 1)
			ps := map[uint64]string{}
			for pid, a := range peers {
				if pid != id {
					ps[pid] = a
				}
			}
			tr, err := New(Config{ID: id, ClusterID: testCluster, Listener: l, Peers: ps, Handler: func(*pb.Message) {}})
			require.NoError(t, err)
			tr.Start()
			trs = append(trs, tr)
		}
		waitConnected(t, trs[0], 2)
		waitConnected(t, trs[1], 1)
		for i := range 100 {
			trs[0].Send([]*pb.Message{appMsg(1, 2, uint64(i), nil), appMsg(1, 3, uint64(i), nil)})
			trs[1].Send([]*pb.Message{appMsg(2, 1, uint64(i), nil)})
		}
		trs[1].RemovePeer(3)
		for _, tr := range trs {
			require.NoError(t, tr.Close())
			require.NoError(t, tr.Close(), "Close is idempotent")
		}
	}()
	// Polled here, not with require.Eventually, which runs its condition
	// on a goroutine of its own.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: before %d, now %d\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewValidates(t *testing.T) {
	l := listen(t)
	defer l.Close()
	h := func(*pb.Message) {}
	for name, cfg := range map[string]Config{
		"no ID":       {Listener: l, Handler: h},
		"no listener": {ID: 1, Handler: h},
		"no handler":  {ID: 1, Listener: l},
		"backoff":     {ID: 1, Listener: l, Handler: h, MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// TestSendNowInOrder sends small messages with SendNow (written by the
// caller while the writer is idle) to a peer whose handler is held, until
// the socket buffers are full and a direct write is left half-done; then
// mixes SendNow and Send, small and big messages (big ones always go
// through the writer), and lets the peer read. Every message must arrive
// once, in order, intact: the writer finishes the half-done frame before
// anything else.
func TestSendNowInOrder(t *testing.T) {
	const most = 8000 // 128 MB, far more than loopback's socket buffers hold
	gate := make(chan struct{})
	rec := newRecorder()
	l1, l2 := listen(t), listen(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	n1 := startNode(t, 1, l1, peers, Config{QueueSize: 2 * most, WriteTimeout: time.Minute})
	startNode(t, 2, l2, peers, Config{Handler: func(m *pb.Message) {
		<-gate
		rec.handle(m)
	}})
	waitConnected(t, n1.tr, 2)
	p := n1.tr.mu.peers[2]

	data := func(i uint64) []byte {
		size := 16 << 10
		if i%7 == 3 {
			size = directMax + 1
		}
		b := bytes.Repeat([]byte{byte(i)}, size)
		copy(b, entryData(1, i))
		return b
	}
	msg := func(i uint64) []*pb.Message {
		return []*pb.Message{appMsg(1, 2, i, []*pb.Entry{{Term: proto.Uint64(1), Index: proto.Uint64(i), Data: data(i)}})}
	}
	var n uint64
	for ; p.rests.Load() == 0 && n < most; n++ {
		if n%7 == 3 {
			n++ // small ones only, so the writer stays idle
		}
		n1.tr.SendNow(msg(n))
	}
	require.NotZero(t, p.rests.Load(), "no direct write was left half-done: the socket never filled")
	require.NotZero(t, n1.tr.Stats()[2].Direct, "no message was written by SendNow itself")
	for end := n + 500; n < end; n++ {
		if n%5 == 4 {
			n1.tr.Send(msg(n))
		} else {
			n1.tr.SendNow(msg(n))
		}
	}
	close(gate)
	require.Eventually(t, func() bool { return !n1.tr.Queued() }, 30*time.Second, 5*time.Millisecond)
	st := n1.tr.Stats()[2]
	require.Zero(t, st.Dropped)
	got := rec.from(1)
	require.Eventually(t, func() bool { got = rec.from(1); return uint64(len(got)) == st.Sent }, 30*time.Second, 5*time.Millisecond,
		"%d of %d delivered", len(got), st.Sent)
	var want uint64
	for _, m := range got {
		if want%7 == 3 && want < n-500 {
			want++ // skipped in the first phase
		}
		require.Equal(t, want, m.GetIndex(), "out of order")
		require.Equal(t, data(want), m.GetEntries()[0].GetData())
		want++
	}
	require.Equal(t, n, want)
}
