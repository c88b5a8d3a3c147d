package netfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the largest chunk a proxy reads at once; faults apply per
// chunk.
const chunkSize = 32 << 10

// queueChunks bounds the chunks in flight in one direction of a connection
// (read but not yet written, for example while delayed).
const queueChunks = 64

// acceptRetry is the pause after a failed Accept (for example EMFILE).
const acceptRetry = 50 * time.Millisecond

// LinkStats are the counters of one link's proxy, for debugging.
type LinkStats struct {
	// Kind, From and To name the link; Addr is the proxy's address and
	// Target the address it forwards to.
	Kind   string
	From   int
	To     int
	Addr   string
	Target string
	// Accepted counts connections accepted since the link was added.
	Accepted int64
	// Active is the number of connections open now, held or forwarding.
	Active int
	// Held is the number of connections waiting, not yet dialed, for a cut
	// to heal.
	Held int64
	// DialErrors counts failed dials to Target.
	DialErrors int64
	// Resets counts connections reset by SetLoss.
	Resets int64
	// BytesFromTo and BytesToFrom count the bytes delivered from node From
	// to node To (requests) and back (replies).
	BytesFromTo int64
	BytesToFrom int64
}

// String renders the counters on one line.
func (s LinkStats) String() string {
	return fmt.Sprintf("%s %d->%d %s->%s: accepted=%d active=%d held=%d dial_errors=%d resets=%d bytes %d->%d=%d %d->%d=%d",
		s.Kind, s.From, s.To, s.Addr, s.Target, s.Accepted, s.Active, s.Held, s.DialErrors, s.Resets,
		s.From, s.To, s.BytesFromTo, s.To, s.From, s.BytesToFrom)
}

// link is the proxy of one link: a listener on 127.0.0.1 and the
// connections it forwards.
type link struct {
	net    *Net
	key    linkKey
	target string
	addr   string
	ln     *net.TCPListener
	// local is the address the proxy dials from: node key.from's.
	local *net.TCPAddr

	accepted, held, dialErrors, resets atomic.Int64
	bytesFromTo, bytesToFrom           atomic.Int64

	mu struct {
		sync.Mutex
		conns  map[*proxyConn]struct{}
		closed bool
	}
}

// newLink returns the proxy of a link; the caller starts acceptLoop.
func newLink(n *Net, key linkKey, target string, ln *net.TCPListener) *link {
	l := &link{
		net:    n,
		key:    key,
		target: target,
		addr:   ln.Addr().String(),
		ln:     ln,
		local:  net.TCPAddrFromAddrPort(netip.AddrPortFrom(n.ips[key.from], 0)),
	}
	l.mu.conns = make(map[*proxyConn]struct{})
	return l
}

// acceptLoop accepts connections until the listener is closed.
func (l *link) acceptLoop() {
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			if l.isClosed() {
				return
			}
			l.net.log.Warn("proxy accept failed", "link", l.name(), "err", err)
			time.Sleep(acceptRetry)
			continue
		}
		l.accepted.Add(1)
		pc := &proxyConn{link: l, client: c, done: make(chan struct{})}
		if !l.register(pc) {
			c.Close()
			return
		}
		l.net.wg.Go(pc.run)
	}
}

// name renders the link for logs.
func (l *link) name() string {
	return fmt.Sprintf("%s %d->%d", l.key.kind, l.key.from, l.key.to)
}

// isClosed reports whether close was called.
func (l *link) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.closed
}

// register adds a connection; it returns false once the link is closed.
func (l *link) register(pc *proxyConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return false
	}
	l.mu.conns[pc] = struct{}{}
	return true
}

// unregister removes a finished connection.
func (l *link) unregister(pc *proxyConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.conns, pc)
}

// close stops the listener and closes every connection.
func (l *link) close() {
	l.mu.Lock()
	l.mu.closed = true
	conns := make([]*proxyConn, 0, len(l.mu.conns))
	for pc := range l.mu.conns {
		conns = append(conns, pc)
	}
	l.mu.Unlock()
	l.ln.Close()
	for _, pc := range conns {
		pc.shutdown(false)
	}
}

// stats returns the link's counters.
func (l *link) stats() LinkStats {
	l.mu.Lock()
	active := len(l.mu.conns)
	l.mu.Unlock()
	return LinkStats{
		Kind:        l.key.kind,
		From:        l.key.from,
		To:          l.key.to,
		Addr:        l.addr,
		Target:      l.target,
		Accepted:    l.accepted.Load(),
		Active:      active,
		Held:        l.held.Load(),
		DialErrors:  l.dialErrors.Load(),
		Resets:      l.resets.Load(),
		BytesFromTo: l.bytesFromTo.Load(),
		BytesToFrom: l.bytesToFrom.Load(),
	}
}

// proxyConn is one proxied connection: the client's socket (from node
// link.key.from) and, once dialed, the upstream socket to the target.
type proxyConn struct {
	link   *link
	client *net.TCPConn
	// done is closed by shutdown.
	done chan struct{}

	mu struct {
		sync.Mutex
		upstream *net.TCPConn
		closed   bool
	}
}

// run holds the connection while the link's pair is cut either way, dials
// the target and forwards both directions until both end.
func (pc *proxyConn) run() {
	l := pc.link
	defer l.unregister(pc)
	from, to := l.key.from, l.key.to
	faults := l.net.faults

	ab, _ := faults.get(from, to)
	ba, _ := faults.get(to, from)
	if ab.cut || ba.cut {
		l.held.Add(1)
		open := faults.waitBothOpen(from, to, pc.done)
		l.held.Add(-1)
		if !open {
			pc.shutdown(false)
			return
		}
		if peerClosed(pc.client) {
			pc.shutdown(false)
			return
		}
	}

	d := net.Dialer{LocalAddr: l.local, Timeout: dialTimeout}
	c, err := d.DialContext(l.net.ctx, "tcp", l.target)
	if err != nil {
		l.dialErrors.Add(1)
		l.net.log.Debug("proxy dial failed", "link", l.name(), "target", l.target, "err", err)
		pc.shutdown(true)
		return
	}
	up := c.(*net.TCPConn)
	if !pc.setUpstream(up) {
		up.Close()
		return
	}

	fwd := newPump(pc, pc.client, up, from, to, &l.bytesFromTo)
	rev := newPump(pc, up, pc.client, to, from, &l.bytesToFrom)
	var wg sync.WaitGroup
	wg.Go(fwd.readLoop)
	wg.Go(fwd.writeLoop)
	wg.Go(rev.readLoop)
	wg.Go(rev.writeLoop)
	wg.Wait()
	pc.shutdown(false)
}

// setUpstream records the dialed socket; it returns false if the connection
// was shut down meanwhile.
func (pc *proxyConn) setUpstream(up *net.TCPConn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.mu.closed {
		return false
	}
	pc.mu.upstream = up
	return true
}

// shutdown closes both sockets, with an RST if reset is set, and wakes the
// pumps. Only the first call has an effect.
func (pc *proxyConn) shutdown(reset bool) {
	pc.mu.Lock()
	if pc.mu.closed {
		pc.mu.Unlock()
		return
	}
	pc.mu.closed = true
	up := pc.mu.upstream
	pc.mu.Unlock()
	close(pc.done)
	for _, c := range []*net.TCPConn{pc.client, up} {
		if c == nil {
			continue
		}
		if reset {
			_ = c.SetLinger(0)
		}
		c.Close()
	}
}

// chunk is a piece of the stream read by a pump, due at a given time.
type chunk struct {
	data []byte
	due  time.Time
}

// pump forwards one direction of a connection: the bytes node "from" sends
// to node "to". A reader goroutine reads chunks and stamps them with their
// due time; a writer goroutine delivers them in order.
type pump struct {
	pc       *proxyConn
	src, dst *net.TCPConn
	from, to int
	bytes    *atomic.Int64
	ch       chan chunk
	// readErr is set by readLoop before it closes ch.
	readErr error
	// lastDue is the due time of the previous chunk (readLoop only).
	lastDue time.Time
}

// newPump returns a pump from src to dst for the pair (from, to).
func newPump(pc *proxyConn, src, dst *net.TCPConn, from, to int, bytes *atomic.Int64) *pump {
	return &pump{pc: pc, src: src, dst: dst, from: from, to: to, bytes: bytes, ch: make(chan chunk, queueChunks)}
}

// readLoop reads chunks while the pair is not cut; a cut leaves the bytes in
// the kernel's buffers, so the sender eventually blocks, as on a real
// partition.
func (p *pump) readLoop() {
	defer close(p.ch)
	faults := p.pc.link.net.faults
	buf := make([]byte, chunkSize)
	for {
		if !faults.waitOpen(p.from, p.to, p.pc.done) {
			return
		}
		n, err := p.src.Read(buf)
		if n > 0 {
			f, _ := faults.get(p.from, p.to)
			due := time.Now().Add(faults.sampleDelay(f))
			if due.Before(p.lastDue) {
				due = p.lastDue
			}
			p.lastDue = due
			select {
			case p.ch <- chunk{data: slices.Clone(buf[:n]), due: due}:
			case <-p.pc.done:
				return
			}
		}
		if err != nil {
			p.readErr = err
			return
		}
	}
}

// writeLoop delivers chunks when due and while the pair is not cut, applies
// loss, and passes the end of the stream on: a half-close on EOF, a reset on
// an error.
func (p *pump) writeLoop() {
	l := p.pc.link
	faults := l.net.faults
	var timer *time.Timer
	for c := range p.ch {
		if wait := time.Until(c.due); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-p.pc.done:
				return
			}
		}
		if !faults.waitOpen(p.from, p.to, p.pc.done) {
			return
		}
		f, _ := faults.get(p.from, p.to)
		if faults.roll(f.loss) {
			l.resets.Add(1)
			l.net.log.Debug("proxy loss: resetting connection", "link", l.name(), "from", p.from, "to", p.to)
			p.pc.shutdown(true)
			return
		}
		if _, err := p.dst.Write(c.data); err != nil {
			p.pc.shutdown(true)
			return
		}
		p.bytes.Add(int64(len(c.data)))
	}
	switch {
	case errors.Is(p.readErr, io.EOF):
		_ = p.dst.CloseWrite()
	case p.readErr != nil:
		p.pc.shutdown(true)
	}
}
