package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Defaults for the zero values of Config.
const (
	DefaultQueueSize    = 4096
	DefaultMaxFrame     = 512 << 20
	DefaultDialTimeout  = time.Second
	DefaultMinBackoff   = 50 * time.Millisecond
	DefaultMaxBackoff   = time.Second
	DefaultWriteTimeout = 5 * time.Second

	bufferSize       = 64 << 10 // bufio size on both ends of a stream
	handshakeTimeout = 5 * time.Second
	acceptRetryDelay = 50 * time.Millisecond
)

// Config configures a Transport.
type Config struct {
	ID uint64 // this node's raft ID
	// ClusterID names the raft group. It is sent in the handshake and in
	// every frame; a stream or frame of another cluster ID is refused: the
	// stream is closed, the refusal logged with both IDs and counted
	// (ClusterMismatches). Zero means not known yet (a node joining a
	// group): the first stream accepted names it, once LearnClusterID (if
	// set) has recorded it, and no peer is dialled before that.
	ClusterID uint64
	// LearnClusterID records the cluster ID learnt from the first stream
	// when ClusterID is zero; an error refuses that stream.
	LearnClusterID func(id uint64) error
	Listener       net.Listener // accepts peers' streams (already bound by the caller)
	// Peers maps raft ID -> host:port of the peer's raft listener
	// (excluding self).
	Peers map[uint64]string
	// Handler receives every message read from a peer, in order per peer,
	// from that peer's reader goroutine. It must not block for long.
	// Different peers call it concurrently. The message and its entries
	// are the Handler's to keep.
	Handler func(m *pb.Message)
	// Unreachable is called (if set) when a message to peer id was dropped
	// because the peer is down or its queue is full (raft wants
	// ReportUnreachable). It may be called from Send itself or from the
	// peer's writer goroutine. Must not block.
	Unreachable func(id uint64)
	// SnapshotStatus is called (if set) after a MsgSnap was written and
	// flushed to the peer (failure=false) or was dropped or its write
	// failed (true) — raft's ReportSnapshot. Same goroutines as
	// Unreachable; must not block.
	SnapshotStatus func(id uint64, failure bool)
	QueueSize      int           // per-peer outbound queue in messages (default 4096)
	MaxFrame       int           // largest payload sent or accepted (default 512 MiB)
	DialTimeout    time.Duration // default 1s
	// MinBackoff and MaxBackoff bound the reconnect backoff (default 50ms
	// .. 1s); each wait is drawn from [d/2, d) for the current step d.
	MinBackoff, MaxBackoff time.Duration
	// WriteTimeout bounds how long a write may make no progress before the
	// stream is declared dead (default 5s); it catches blackholed peers
	// whose TCP window is full. It applies per chunk of at most
	// writeChunk bytes, so big snapshots are fine on a live link.
	WriteTimeout time.Duration
	// Dial is a seam for fault injection; nil means a net.Dialer (dialing
	// from LocalAddr if set). The context carries DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// LocalAddr is an optional source address for outgoing connections
	// (the chaos harness gives each node its own loopback IP). Leave its
	// port zero.
	LocalAddr net.Addr
	Logger    *slog.Logger // nil discards
	// TLS, if set, makes every stream mutual TLS: both ends present
	// Certificates and verify the other's against the group's CA
	// (RootCAs; ClientCAs defaults to it). An acceptor refuses, and logs,
	// a peer whose certificate the CA did not sign before reading a byte
	// of its handshake; a dialer verifies the acceptor's certificate
	// against the host of the peer's address unless ServerName is set.
	TLS *tls.Config
}

// PeerStats are a peer's counters since it was added.
type PeerStats struct {
	Sent         uint64 // messages written and flushed
	Direct       uint64 // of them, written by SendNow on its caller's goroutine
	Dropped      uint64 // messages dropped: peer down, queue full, failed write, too large
	BytesWritten uint64 // bytes written to the peer's streams, handshakes included
	Reconnects   uint64 // streams established after the first one
	Connected    bool   // an outbound stream is up now
}

// Transport sends raft messages to peers and delivers theirs to
// Config.Handler. Its methods are safe for concurrent use.
type Transport struct {
	cfg Config
	log *slog.Logger
	// tlsServer and tlsClient are made from Config.TLS; nil without it.
	tlsServer, tlsClient *tls.Config
	refused              refusals
	// cluster is the group's cluster ID, 0 until learnt; learned is closed
	// once it is known, learnMu serialises learning it.
	cluster    atomic.Uint64
	learned    chan struct{}
	learnMu    sync.Mutex
	mismatches atomic.Uint64   // streams and frames of another cluster refused
	ctx        context.Context // canceled by Close
	cancel     context.CancelFunc
	wg         sync.WaitGroup // every goroutine started by the transport

	mu struct {
		sync.RWMutex
		started bool
		closed  bool
		peers   map[uint64]*peer
		// inbound holds every accepted connection; readers registers the
		// one that owns each sender's handshake.
		inbound map[net.Conn]struct{}
		readers map[uint64]*reader
	}
}

// ErrInvalidConfig is returned by New when the Config cannot work.
var ErrInvalidConfig = errors.New("transport: invalid config")

// New validates cfg, fills in defaults and returns a Transport that does
// nothing until Start.
func New(cfg Config) (*Transport, error) {
	if cfg.ID == 0 {
		return nil, fmt.Errorf("%w: ID must be nonzero", ErrInvalidConfig)
	}
	if cfg.Listener == nil {
		return nil, fmt.Errorf("%w: Listener is required", ErrInvalidConfig)
	}
	if cfg.Handler == nil {
		return nil, fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	}
	setDefaults(&cfg)
	if cfg.MinBackoff > cfg.MaxBackoff {
		return nil, fmt.Errorf("%w: MinBackoff %v > MaxBackoff %v", ErrInvalidConfig, cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.MaxFrame > 1<<31 {
		return nil, fmt.Errorf("%w: MaxFrame %d exceeds 2 GiB", ErrInvalidConfig, cfg.MaxFrame)
	}
	t := &Transport{cfg: cfg, log: cfg.Logger.With("raft_id", cfg.ID), learned: make(chan struct{})}
	if cfg.ClusterID != 0 {
		t.cluster.Store(cfg.ClusterID)
		close(t.learned)
	}
	if cfg.TLS != nil {
		var err error
		if t.tlsServer, t.tlsClient, err = tlsConfigs(cfg.TLS); err != nil {
			return nil, err
		}
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.peers = make(map[uint64]*peer)
	t.mu.inbound = make(map[net.Conn]struct{})
	t.mu.readers = make(map[uint64]*reader)
	for id, addr := range cfg.Peers {
		if id == cfg.ID {
			continue
		}
		t.mu.peers[id] = newPeer(t, id, addr)
	}
	return t, nil
}

func setDefaults(cfg *Config) {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Dial == nil {
		d := &net.Dialer{LocalAddr: cfg.LocalAddr}
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// Start starts accepting and the per-peer writers. It does nothing after
// the first call or after Close.
func (t *Transport) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.started || t.mu.closed {
		return
	}
	t.mu.started = true
	t.goFunc(t.acceptLoop)
	for _, p := range t.mu.peers {
		t.goFunc(p.run)
	}
}

// goFunc runs f on a goroutine that Close waits for.
func (t *Transport) goFunc(f func()) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
}

// Send queues messages to their peers (m.GetTo()). It never blocks: when a
// peer's stream is down or its queue is full the message is dropped and
// Unreachable(to) is called (raft retransmits); a dropped MsgSnap also
// gets SnapshotStatus(to, true). Messages to unknown peers are dropped and
// logged at Debug. The caller must not modify a message after Send.
func (t *Transport) Send(msgs []*pb.Message) { t.send(msgs, false) }

// SendNow is Send, except that a message whose peer's writer goroutine is
// idle is written to the stream on the caller's goroutine, without
// waiting for the socket (peer.direct): for a caller with nothing else to
// do, which would otherwise wait for the writer to be scheduled. The
// write costs the caller a system call per peer, so a busy caller should
// use Send.
func (t *Transport) SendNow(msgs []*pb.Message) { t.send(msgs, true) }

func (t *Transport) send(msgs []*pb.Message, now bool) {
	var drops []drop // reported after unlocking: callbacks may call back in
	t.mu.RLock()
	for _, m := range msgs {
		p := t.mu.peers[m.GetTo()]
		if p == nil {
			t.log.Debug("dropping message to unknown peer", "to", m.GetTo(), "type", m.GetType())
			if m.GetType() == pb.MessageType_MsgSnap {
				drops = append(drops, drop{id: m.GetTo(), snap: true})
			}
			continue
		}
		if now && p.direct(m) {
			continue
		}
		if !p.enqueue(m) {
			drops = append(drops, drop{id: p.id, snap: m.GetType() == pb.MessageType_MsgSnap, peer: true})
		}
	}
	t.mu.RUnlock()
	t.reportDrops(drops)
}

// Queued reports whether messages Send took wait for a writer goroutine
// (queued, or taken and not yet written): false when Send wrote them all
// itself (see peer.direct) or dropped them.
func (t *Transport) Queued() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, p := range t.mu.peers {
		if p.queued.Load() > 0 {
			return true
		}
	}
	return false
}

// drop is a message that Send could not queue.
type drop struct {
	id   uint64
	snap bool // a MsgSnap: report SnapshotStatus failure
	peer bool // to a known peer: report Unreachable
}

// reportDrops calls Unreachable once per peer and SnapshotStatus once per
// dropped snapshot.
func (t *Transport) reportDrops(drops []drop) {
	var reported []uint64
	for _, d := range drops {
		if d.snap {
			t.snapshotStatus(d.id, true)
		}
		if d.peer && !slices.Contains(reported, d.id) {
			reported = append(reported, d.id)
			t.unreachable(d.id)
		}
	}
}

// AddPeer adds a peer or updates its address; a changed address closes the
// current stream so the writer redials at once.
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == t.cfg.ID {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return
	}
	if p := t.mu.peers[id]; p != nil {
		p.setAddr(addr)
		return
	}
	p := newPeer(t, id, addr)
	t.mu.peers[id] = p
	if t.mu.started {
		t.goFunc(p.run)
	}
	t.log.Info("peer added", "peer", id, "addr", addr)
}

// RemovePeer stops the peer's writer and drops its queue without calling
// Unreachable or SnapshotStatus (only a batch being written at that moment
// may still be reported as failed). It does not wait for the writer to
// exit, and it leaves the peer's inbound stream to us alone.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	p := t.mu.peers[id]
	delete(t.mu.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.stop()
		t.log.Info("peer removed", "peer", id)
	}
}

// Connected reports whether an outbound stream to id is currently up. The
// acceptor never answers the handshake, so a refused stream counts as up
// until the refusal (its close) arrives, typically within a round trip.
func (t *Transport) Connected(id uint64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p := t.mu.peers[id]
	return p != nil && p.connected.Load()
}

// Stats returns per-peer counters for metrics.
func (t *Transport) Stats() map[uint64]PeerStats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[uint64]PeerStats, len(t.mu.peers))
	for id, p := range t.mu.peers {
		out[id] = p.stats()
	}
	return out
}

// ClusterID returns the group's cluster ID, 0 while it is not known yet
// (see Config.ClusterID).
func (t *Transport) ClusterID() uint64 { return t.cluster.Load() }

// ClusterMismatches counts the streams and frames refused because they
// came from another cluster.
func (t *Transport) ClusterMismatches() uint64 { return t.mismatches.Load() }

// learn makes id the cluster ID if none is known yet, recording it with
// Config.LearnClusterID first; it fails if that fails or another ID was
// learnt meanwhile.
func (t *Transport) learn(id uint64, from uint64) error {
	t.learnMu.Lock()
	defer t.learnMu.Unlock()
	if cur := t.cluster.Load(); cur != 0 {
		if cur != id {
			return mismatch("node "+strconv.FormatUint(from, 10), id, cur)
		}
		return nil
	}
	if f := t.cfg.LearnClusterID; f != nil {
		if err := f(id); err != nil {
			return fmt.Errorf("transport: record cluster ID %s: %w", FormatClusterID(id), err)
		}
	}
	t.cluster.Store(id)
	close(t.learned)
	t.log.Info("cluster ID learnt from a peer's stream", "cluster_id", FormatClusterID(id), "peer", from)
	return nil
}

// Close stops accepting, closes every stream, stops the writers and waits
// for all goroutines. Queued messages are discarded without callbacks.
// Close closes Config.Listener; it returns that error, if any.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	t.cancel()
	peers := t.mu.peers
	t.mu.peers = make(map[uint64]*peer)
	for c := range t.mu.inbound {
		c.Close()
	}
	t.mu.Unlock()

	err := t.cfg.Listener.Close()
	for _, p := range peers {
		p.stop()
	}
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("transport: close listener: %w", err)
	}
	return nil
}

func (t *Transport) unreachable(id uint64) {
	if f := t.cfg.Unreachable; f != nil {
		f(id)
	}
}

func (t *Transport) snapshotStatus(id uint64, failure bool) {
	if f := t.cfg.SnapshotStatus; f != nil {
		f(id, failure)
	}
}

// acceptLoop hands every accepted connection to its own reader.
func (t *Transport) acceptLoop() {
	for {
		conn, err := t.cfg.Listener.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("accept failed", "err", err)
			select {
			case <-time.After(acceptRetryDelay):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		if !t.trackInbound(conn) {
			conn.Close()
			return
		}
		t.goFunc(func() { t.serveInbound(conn) })
	}
}

func (t *Transport) trackInbound(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return false
	}
	t.mu.inbound[c] = struct{}{}
	return true
}

// reader is the one inbound stream allowed to deliver a sender's messages.
type reader struct {
	conn net.Conn
	done chan struct{} // closed when its serveInbound returns
}

// serveInbound checks the handshake, takes over the sender's slot from
// any older stream, then delivers frames until the stream fails.
func (t *Transport) serveInbound(conn net.Conn) {
	self := &reader{conn: conn, done: make(chan struct{})}
	var from uint64 // set once the sender owns a slot
	defer func() {
		t.untrackInbound(conn, from, self)
		close(self.done)
	}()
	remote := conn.RemoteAddr().String()

	rc := conn // what the stream is read from: conn, or TLS over it
	if t.tlsServer != nil {
		var err error
		if rc, err = t.serverTLS(conn); err != nil {
			switch {
			case t.ctx.Err() != nil:
			case t.refused.warn(remote):
				t.log.Warn("refusing peer stream: TLS handshake failed (logged once a minute per host)", "remote", remote, "err", err)
			default:
				t.log.Debug("refusing peer stream: TLS handshake failed", "remote", remote, "err", err)
			}
			return
		}
	}
	conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(rc, bufferSize)
	h, err := readHandshake(br, t.cluster.Load(), t.cfg.ID)
	if err == nil {
		// Learns the ID if it is still unknown; checks it again if another
		// stream learnt one since readHandshake looked.
		err = t.learn(h.cluster, h.from)
	}
	if err != nil {
		switch {
		case t.ctx.Err() != nil:
		case errors.Is(err, io.EOF): // a probe that connected and left
			t.log.Debug("connection closed before handshake", "remote", remote)
		case errors.Is(err, ErrClusterMismatch):
			t.refuseCluster(remote, h.from, err)
		default:
			t.log.Warn("refusing peer stream", "remote", remote, "from", h.from, "err", err)
		}
		return
	}
	conn.SetReadDeadline(time.Time{})
	from = h.from
	if !t.takeOver(from, self) {
		return
	}
	t.log.Debug("peer stream accepted", "peer", h.from, "remote", remote)

	fr := frameReader{r: br, maxFrame: t.cfg.MaxFrame}
	if h.version != protocolV1 {
		fr.cluster = t.cluster.Load()
	}
	for {
		m, err := fr.next()
		if err != nil {
			t.logReadError(h.from, remote, err)
			return
		}
		t.cfg.Handler(m)
	}
}

// takeOver makes r the reader for sender from, closing the previous one and
// waiting for it to stop so that Handler sees one stream per sender at a
// time, in order. Messages buffered on the old stream are lost.
func (t *Transport) takeOver(from uint64, r *reader) bool {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return false
	}
	old := t.mu.readers[from]
	t.mu.readers[from] = r
	t.mu.Unlock()
	if old == nil {
		return true
	}
	old.conn.Close()
	select {
	case <-old.done:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// untrackInbound forgets conn and, if from is nonzero and r still owns the
// sender's slot, frees the slot. It closes conn.
func (t *Transport) untrackInbound(conn net.Conn, from uint64, r *reader) {
	conn.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.inbound, conn)
	if from != 0 && t.mu.readers[from] == r {
		delete(t.mu.readers, from)
	}
}

// refuseCluster counts and logs a stream or frame of another cluster: at
// Error once a minute per host (a misplaced node redials every second),
// at Debug in between.
func (t *Transport) refuseCluster(remote string, from uint64, err error) {
	t.mismatches.Add(1)
	if t.refused.warn(remote) {
		t.log.Error("refusing peer stream from another cluster (logged once a minute per host)", "remote", remote, "from", from, "err", err)
		return
	}
	t.log.Debug("refusing peer stream from another cluster", "remote", remote, "from", from, "err", err)
}

func (t *Transport) logReadError(from uint64, remote string, err error) {
	switch {
	case t.ctx.Err() != nil:
	case errors.Is(err, ErrClusterMismatch):
		t.refuseCluster(remote, from, err)
	case errors.Is(err, ErrCorruptFrame), errors.Is(err, ErrFrameTooLarge):
		t.log.Error("closing peer stream", "peer", from, "remote", remote, "err", err)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		t.log.Debug("peer stream closed", "peer", from, "remote", remote)
	default:
		t.log.Info("peer stream failed", "peer", from, "remote", remote, "err", err)
	}
}
