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
	"syscall"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"golang.org/x/sys/unix"
)

const (
	// maxBatch caps the messages written between two flushes, so that a
	// queue that never runs dry still gets its snapshots reported.
	maxBatch = 1024
	// writeChunk is the most written under one write deadline.
	writeChunk = 1 << 20
	// directMax caps the entry bytes of a message Send may write itself
	// (see peer.direct); bigger ones go through the writer goroutine.
	directMax = 32 << 10
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
	connected                                   atomic.Bool
	sent, directs, dropped, written, reconnects atomic.Uint64

	mu struct {
		sync.Mutex
		addr string
		conn net.Conn // the current stream, closed by stop and setAddr
	}

	// queued counts the messages enqueued and not yet written, dropped or
	// failed by the writer goroutine (it lowers it under ws).
	queued atomic.Int64
	// ws is the stream's write side, shared by the writer goroutine and
	// Send's direct writes (direct): whoever holds it writes to the
	// stream, so frames never interleave.
	ws struct {
		sync.Mutex
		// raw is the current plain-TCP stream's descriptor while the
		// writer streams to it; nil while down or over TLS (no direct
		// writes then).
		raw syscall.RawConn
		// rest is what a direct write left unwritten (the socket buffer
		// was full); the writer writes it before anything else.
		rest []byte
		buf  []byte // frame scratch of direct writes
	}
	flush chan struct{} // cap 1: a direct write left rest for the writer
	rests atomic.Uint64 // direct writes that left a rest

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
		flush: make(chan struct{}, 1),
		rng:   rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), id)),
	}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.mu.addr = addr
	return p
}

// enqueue queues m unless the stream is down or the queue is full.
func (p *peer) enqueue(m *pb.Message) bool {
	if p.connected.Load() {
		p.queued.Add(1)
		select {
		case p.queue <- m:
			return true
		default:
			p.queued.Add(-1)
		}
	}
	p.dropped.Add(1)
	return false
}

// direct writes m to the stream on the caller's goroutine, if that can
// be done at once: a plain-TCP stream is up, nothing is queued or being
// written before m, nobody holds the write side, m is not a snapshot and
// its entries are small. The write does not wait: what the socket does
// not take now is left to the writer goroutine (rest), which writes it
// before anything else. It reports whether m was taken; if not, Send
// queues it as usual.
//
// Why: one send at a time, the raft goroutine hands its appends to the
// writer goroutines and must let them run (Node's sentEarly yields)
// before it blocks in its fsync; on a busy machine that hand-over costs
// more than the write itself. The follower's acknowledgement, sent after
// its fsync, saves the same hop.
func (p *peer) direct(m *pb.Message) bool {
	if p.queued.Load() != 0 || m.GetType() == pb.MessageType_MsgSnap || entryBytes(m) > directMax {
		return false
	}
	if !p.ws.TryLock() {
		return false
	}
	defer p.ws.Unlock()
	if p.ws.raw == nil || p.queued.Load() != 0 || len(p.ws.rest) > 0 {
		return false
	}
	frame, err := appendFrame(p.ws.buf[:0], m, p.t.cfg.MaxFrame, p.t.cluster.Load())
	if err != nil {
		return false // the writer drops and logs it
	}
	p.ws.buf = frame
	var n int
	var werr error
	if err := p.ws.raw.Write(func(fd uintptr) bool {
		n, werr = unix.Write(int(fd), frame)
		return true // never wait for the socket
	}); err != nil {
		// Closed, or the writer's last write deadline has passed (the
		// poller then refuses every write): the writer sends m and sets
		// a fresh deadline.
		return false
	}
	if n < 0 {
		n = 0
	}
	if werr != nil && werr != unix.EAGAIN {
		return false // the stream is failing: the writer finds out
	}
	p.written.Add(uint64(n))
	p.sent.Add(1)
	p.directs.Add(1)
	if n < len(frame) {
		p.rests.Add(1)
		p.ws.rest = append(p.ws.rest[:0], frame[n:]...)
		select {
		case p.flush <- struct{}{}:
		default:
		}
	}
	if cap(p.ws.buf) > maxRetainedBufSize {
		p.ws.buf = nil
	}
	return true
}

// entryBytes is the size of m's entries' data.
func entryBytes(m *pb.Message) int {
	n := 0
	for _, e := range m.GetEntries() {
		n += len(e.GetData())
	}
	return n
}

func (p *peer) stats() PeerStats {
	return PeerStats{
		Sent:         p.sent.Load(),
		Direct:       p.directs.Load(),
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
	var raw syscall.RawConn
	if tc, ok := conn.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			raw = rc
		}
	}
	p.ws.Lock()
	p.ws.raw, p.ws.rest = raw, nil
	p.ws.Unlock()
	defer func() {
		p.ws.Lock()
		p.ws.raw, p.ws.rest = nil, nil
		p.ws.Unlock()
	}()
	p.connected.Store(true)
	for {
		var m *pb.Message
		select {
		case m = <-p.queue:
		case <-p.flush:
		case <-dead:
			return errPeerClosed
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
		if err := p.write(w, m); err != nil {
			return err
		}
	}
}

// write writes, holding the write side, what a direct write left over,
// then m (if not nil) and whatever else is queued.
func (p *peer) write(w *bufio.Writer, m *pb.Message) error {
	p.ws.Lock()
	defer p.ws.Unlock()
	if len(p.ws.rest) > 0 {
		_, err := w.Write(p.ws.rest)
		p.ws.rest = p.ws.rest[:0]
		if err == nil && m == nil {
			err = w.Flush()
		}
		if err != nil {
			if m != nil {
				p.queued.Add(-1)
				p.failBatch(1, 0)
			}
			return fmt.Errorf("transport: write to peer %d: %w", p.id, err)
		}
	}
	if m == nil {
		return nil
	}
	return p.writeBatch(w, m)
}

// writeBatch writes first and whatever else is queued right now, then
// flushes once: many small messages become one syscall.
func (p *peer) writeBatch(w *bufio.Writer, first *pb.Message) error {
	n, snaps, taken := 0, 0, 0
	// Everything taken is written, dropped or failed by the return.
	defer func() { p.queued.Add(int64(-taken)) }()
	for m := first; m != nil; m = p.poll(n) {
		taken++
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
		p.queued.Add(-1)
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
			p.queued.Add(-1)
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
