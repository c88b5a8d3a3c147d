package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

const (
	// maxBatch caps the messages written between two flushes, so that a
	// queue that never runs dry still gets its snapshots reported.
	maxBatch = 1024
	// writeChunk is the most written under one write deadline.
	writeChunk = 1 << 20
)

// errDialAborted is returned by connect when the peer was stopped or its
// address changed while dialing.
var errDialAborted = errors.New("stopped or address changed while dialing")

// errPeerClosed is returned by stream when the acceptor closed its end.
var errPeerClosed = errors.New("transport: peer closed the stream")

// peer owns the outbound stream to one raft node: a bounded queue filled by
// Send and a writer goroutine (run) that dials, drains and reconnects.
type peer struct {
	t      *Transport
	id     uint64
	log    *slog.Logger
	queue  chan *pb.Message
	kick   chan struct{} // cap 1: the address changed, skip the backoff wait
	ctx    context.Context
	cancel context.CancelFunc // stop: RemovePeer or Close

	// connected is true while a stream is up; Send drops when it is false.
	connected                          atomic.Bool
	sent, dropped, written, reconnects atomic.Uint64

	mu struct {
		sync.Mutex
		addr string
		conn net.Conn // the current stream, closed by stop and setAddr
	}

	// Owned by the writer goroutine.
	buf []byte // frame scratch, reused across messages
	rng *rand.Rand
}

func newPeer(t *Transport, id uint64, addr string) *peer {
	p := &peer{
		t:     t,
		id:    id,
		log:   t.log.With("peer", id),
		queue: make(chan *pb.Message, t.cfg.QueueSize),
		kick:  make(chan struct{}, 1),
		rng:   rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), id)),
	}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.mu.addr = addr
	return p
}

// enqueue queues m unless the stream is down or the queue is full.
func (p *peer) enqueue(m *pb.Message) bool {
	if p.connected.Load() {
		select {
		case p.queue <- m:
			return true
		default:
		}
	}
	p.dropped.Add(1)
	return false
}

func (p *peer) stats() PeerStats {
	return PeerStats{
		Sent:         p.sent.Load(),
		Dropped:      p.dropped.Load(),
		BytesWritten: p.written.Load(),
		Reconnects:   p.reconnects.Load(),
		Connected:    p.connected.Load(),
	}
}

func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	if p.mu.addr == addr {
		p.mu.Unlock()
		return
	}
	p.mu.addr = addr
	c := p.mu.conn
	p.mu.Unlock()
	p.log.Info("peer address changed", "addr", addr)
	if c != nil {
		c.Close()
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// stop makes the writer exit soon, unblocking it if it is inside a write.
func (p *peer) stop() {
	p.cancel()
	p.mu.Lock()
	c := p.mu.conn
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// run is the writer goroutine: connect, stream until the stream fails,
// back off, repeat until stopped.
func (p *peer) run() {
	b := backoff{min: p.t.cfg.MinBackoff, max: p.t.cfg.MaxBackoff, cur: p.t.cfg.MinBackoff}
	established, failing := false, false
	select {
	case <-p.t.learned: // a joining node dials once it knows its group
	case <-p.ctx.Done():
		return
	}
	for p.ctx.Err() == nil {
		conn, err := p.connect()
		if err != nil {
			if p.ctx.Err() == nil {
				p.logDialError(err, failing)
				failing = true
				p.pause(b.next())
			}
			continue
		}
		if established {
			p.reconnects.Add(1)
		}
		established, failing = true, false
		p.log.Info("connected to peer", "remote", conn.RemoteAddr().String())
		up := time.Now()
		err = p.stream(conn)
		p.connected.Store(false)
		p.clearConn(conn)
		if p.ctx.Err() != nil {
			return
		}
		p.log.Warn("lost stream to peer", "err", err, "up", time.Since(up).Round(time.Millisecond))
		p.dropQueued()
		if time.Since(up) >= b.max {
			b.cur = b.min // it was a working stream, not a refusal loop
		}
		p.pause(b.next())
	}
}

// logDialError logs the first of a run of dial failures as a warning and
// the rest at debug level, so a peer that is down does not flood the log.
func (p *peer) logDialError(err error, again bool) {
	if again {
		p.log.Debug("cannot reach peer", "err", err)
		return
	}
	p.log.Warn("cannot reach peer, retrying", "err", err)
}

// backoff is an exponential delay between min and max.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // Invariant: min <= cur <= max
}

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d
}

// connect dials the peer and writes the handshake.
func (p *peer) connect() (net.Conn, error) {
	p.mu.Lock()
	addr := p.mu.addr
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, p.t.cfg.DialTimeout)
	defer cancel()
	conn, err := p.t.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial peer %d at %s: %w", p.id, addr, err)
	}
	if p.t.tlsClient != nil {
		conn = p.t.clientTLS(conn, addr)
	}
	if !p.setConn(conn, addr) {
		conn.Close()
		return nil, fmt.Errorf("transport: dial peer %d at %s: %w", p.id, addr, errDialAborted)
	}
	if err := handshakeClient(ctx, conn); err != nil {
		p.clearConn(conn)
		return nil, fmt.Errorf("transport: TLS handshake with peer %d at %s: %w", p.id, addr, err)
	}
	hs := handshake{cluster: p.t.cluster.Load(), from: p.t.cfg.ID, to: p.id}.marshal()
	conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
	n, err := conn.Write(hs)
	p.written.Add(uint64(n))
	if err != nil {
		p.clearConn(conn)
		return nil, fmt.Errorf("transport: handshake with peer %d at %s: %w", p.id, addr, err)
	}
	return conn, nil
}

// setConn publishes conn as the current stream unless the peer was stopped
// or its address changed while dialing.
func (p *peer) setConn(conn net.Conn, addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil || p.mu.addr != addr {
		return false
	}
	p.mu.conn = conn
	return true
}

func (p *peer) clearConn(conn net.Conn) {
	p.mu.Lock()
	if p.mu.conn == conn {
		p.mu.conn = nil
	}
	p.mu.Unlock()
	conn.Close()
}

// stream writes queued messages to conn until a write fails, the acceptor
// closes its end, or the peer is stopped.
func (p *peer) stream(conn net.Conn) error {
	dead := make(chan struct{})
	p.t.goFunc(func() { watch(conn, dead) })
	w := bufio.NewWriterSize(&deadlineWriter{conn: conn, timeout: p.t.cfg.WriteTimeout, n: &p.written}, bufferSize)
	p.connected.Store(true)
	for {
		var m *pb.Message
		select {
		case m = <-p.queue:
		case <-dead:
			return errPeerClosed
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
		if err := p.writeBatch(w, m); err != nil {
			return err
		}
	}
}

// writeBatch writes first and whatever else is queued right now, then
// flushes once: many small messages become one syscall.
func (p *peer) writeBatch(w *bufio.Writer, first *pb.Message) error {
	n, snaps := 0, 0
	for m := first; m != nil; m = p.poll(n) {
		isSnap := m.GetType() == pb.MessageType_MsgSnap
		var err error
		p.buf, err = appendFrame(p.buf[:0], m, p.t.cfg.MaxFrame, p.t.cluster.Load())
		if err != nil {
			p.log.Error("dropping unsendable message", "err", err)
			p.dropped.Add(1)
			if isSnap {
				p.t.snapshotStatus(p.id, true)
			}
			continue
		}
		n++
		if isSnap {
			snaps++
		}
		if _, err := w.Write(p.buf); err != nil {
			p.failBatch(n, snaps)
			return fmt.Errorf("transport: write to peer %d: %w", p.id, err)
		}
		if cap(p.buf) > maxRetainedBufSize {
			p.buf = nil
		}
	}
	if err := w.Flush(); err != nil {
		p.failBatch(n, snaps)
		return fmt.Errorf("transport: flush to peer %d: %w", p.id, err)
	}
	p.sent.Add(uint64(n))
	for range snaps {
		p.t.snapshotStatus(p.id, false)
	}
	return nil
}

// poll returns the next queued message, or nil if the queue is empty or
// the batch is full.
func (p *peer) poll(n int) *pb.Message {
	if n >= maxBatch {
		return nil
	}
	select {
	case m := <-p.queue:
		return m
	default:
		return nil
	}
}

// failBatch reports n messages, snaps of them snapshots, lost in a failed
// write. Some may have reached the peer; raft copes either way.
func (p *peer) failBatch(n, snaps int) {
	p.dropped.Add(uint64(n))
	for range snaps {
		p.t.snapshotStatus(p.id, true)
	}
	if n > 0 {
		p.t.unreachable(p.id)
	}
}

// dropQueued discards what Send queued for a stream that is now gone.
func (p *peer) dropQueued() {
	n, snaps := 0, 0
	for m := p.poll(0); m != nil; m = p.poll(0) {
		n++
		if m.GetType() == pb.MessageType_MsgSnap {
			snaps++
		}
	}
	p.failBatch(n, snaps)
}

// pause waits about d (drawn from [d/2, d]) before the next dial, dropping
// anything that races into the queue meanwhile. An address change or stop
// ends the wait early.
func (p *peer) pause(d time.Duration) {
	half := d / 2
	timer := time.NewTimer(half + time.Duration(p.rng.Int64N(int64(d-half)+1)))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-p.kick:
			return
		case <-p.ctx.Done():
			return
		case m := <-p.queue:
			snaps := 0
			if m.GetType() == pb.MessageType_MsgSnap {
				snaps = 1
			}
			p.failBatch(1, snaps)
		}
	}
}

// watch blocks reading conn, on which the acceptor never writes; when the
// read returns (EOF, reset, or our own Close) the stream is dead.
func watch(conn net.Conn, dead chan<- struct{}) {
	var b [1]byte
	conn.Read(b[:]) // any outcome, even unexpected data, ends the stream
	conn.Close()
	close(dead)
}

// deadlineWriter writes to conn in chunks, each under a fresh deadline, so
// that a peer making no progress for timeout fails the write while a big
// snapshot on a live link does not. It counts bytes written in n.
type deadlineWriter struct {
	conn    net.Conn
	timeout time.Duration
	n       *atomic.Uint64
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		chunk := b[written:min(len(b), written+writeChunk)]
		if err := d.conn.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
			return written, err
		}
		n, err := d.conn.Write(chunk)
		written += n
		d.n.Add(uint64(n))
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
