package remoting

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Resource limits of connections; see the package documentation. Each
// applies when the matching Server (or Options) field is 0; a negative
// field turns the limit off.
const (
	// DefaultReadTimeout is how long a frame may take to arrive once it
	// has started (Server.ReadTimeout, Options.ReadTimeout).
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a server connection may go without
	// starting a frame while it has no request in flight
	// (Server.IdleTimeout): RocketMQ's serverChannelMaxIdleTimeSeconds.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConns is the most connections a Server keeps open
	// (Server.MaxConns).
	DefaultMaxConns = 10000
	// DefaultMaxInflightRequests is the most requests of one server
	// connection read and not yet answered (Server.MaxInflightRequests).
	DefaultMaxInflightRequests = 4096
	// DefaultMaxInflightBytes bounds the frame bytes of one server
	// connection's requests read and not yet answered, the frame being
	// read included (Server.MaxInflightBytes).
	DefaultMaxInflightBytes = 64 << 20
	// DefaultMaxInflightTotal is the budget of a server without one: the
	// in-flight bytes of all its connections together.
	DefaultMaxInflightTotal = 512 << 20
)

// Frame body reading; see readBody.
const (
	// minBodyChunk is the first allocation for a frame body whose bytes
	// have not arrived yet.
	minBodyChunk = 4 << 10
)

// Errors that end a connection whose peer is too slow or silent. They are
// wrapped with the duration.
var (
	errReadTimeout = errors.New("remoting: frame not complete within the read timeout")
	errIdle        = errors.New("remoting: connection idle")
)

// Budget bounds the in-flight bytes (frames of requests read and not yet
// answered, and frames being read) of every server connection that shares
// it. Past the limit those connections stop reading until answers go out.
// Its methods are safe for concurrent use.
type Budget struct {
	limit   int64
	used    atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex
	freed   chan struct{} // closed when used drops below limit; nil if nobody waits
}

// NewBudget returns a budget of limit bytes; limit <= 0 means no limit.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit returns the limit given to NewBudget.
func (b *Budget) Limit() int64 { return b.limit }

// InUse returns the bytes in flight now.
func (b *Budget) InUse() int64 { return b.used.Load() }

func (b *Budget) add(n int64) { b.used.Add(n) }

func (b *Budget) release(n int64) {
	if b.used.Add(-n) < b.limit && b.waiters.Load() > 0 {
		b.mu.Lock()
		if b.freed != nil {
			close(b.freed)
			b.freed = nil
		}
		b.mu.Unlock()
	}
}

// wait blocks until the budget is below its limit. It returns errStopped
// if stop closes first, and an error wrapping errReadTimeout if deadline
// (zero: none) passes first.
func (b *Budget) wait(stop <-chan struct{}, deadline time.Time) error {
	if b.limit <= 0 || b.used.Load() < b.limit {
		return nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	for {
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if b.used.Load() < b.limit {
			return nil
		}
		select {
		case <-freed:
		case <-stop:
			return errStopped
		case <-expired:
			return fmt.Errorf("%w (waiting for the in-flight byte budget)", errReadTimeout)
		}
	}
}

// errStopped is returned by waits cut short because the connection closed.
var errStopped = errors.New("remoting: connection closing")

// connAcct counts the in-flight requests and bytes of one server
// connection, and charges the bytes to the shared Budget too. Bytes are
// charged as the reader allocates them and released when the request's
// answer has been written (or the handler returned nothing); close
// releases whatever the connection still holds, after which releases are
// ignored.
type connAcct struct {
	maxReqs  int   // <= 0: no limit
	maxBytes int64 // <= 0: no limit
	global   *Budget
	wake     chan struct{} // capacity 1: a release happened while waiting
	waiting  atomic.Bool   // the reader is in waitRoom
	// lastAnswer is the time (UnixNano) of the last release, for the idle
	// timeout.
	lastAnswer atomic.Int64

	mu    sync.Mutex
	reqs  int
	bytes int64
	done  bool
}

func newConnAcct(maxReqs int, maxBytes int64, global *Budget) *connAcct {
	return &connAcct{maxReqs: maxReqs, maxBytes: maxBytes, global: global, wake: make(chan struct{}, 1)}
}

// charge counts n more bytes read.
func (a *connAcct) charge(n int64) {
	a.mu.Lock()
	if !a.done {
		a.bytes += n
		a.global.add(n)
	}
	a.mu.Unlock()
}

// begin counts one more request in flight; its bytes are charged already.
func (a *connAcct) begin() {
	a.mu.Lock()
	if !a.done {
		a.reqs++
	}
	a.mu.Unlock()
}

// finish releases n bytes and, if req, one request.
func (a *connAcct) finish(n int64, req bool) {
	if req {
		// Before the count drops: a reader that sees no request in
		// flight must see this answer's time too.
		a.lastAnswer.Store(time.Now().UnixNano())
	}
	a.mu.Lock()
	if a.done {
		a.mu.Unlock()
		return
	}
	a.bytes -= n
	if req {
		a.reqs--
	}
	a.mu.Unlock()
	a.global.release(n)
	// The reader sets waiting before it checks the counts under mu, so
	// either it sees this release or this sees it waiting.
	if a.waiting.Load() {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// alone reports whether at most one request is in flight: the one being
// answered.
func (a *connAcct) alone() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reqs <= 1
}

// busy reports whether a request is in flight.
func (a *connAcct) busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reqs > 0
}

// close releases everything the connection holds.
func (a *connAcct) close() {
	a.mu.Lock()
	n := a.bytes
	a.done = true
	a.bytes, a.reqs = 0, 0
	a.mu.Unlock()
	if n != 0 {
		a.global.release(n)
	}
}

// full reports whether the connection is at a limit.
func (a *connAcct) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return (a.maxReqs > 0 && a.reqs >= a.maxReqs) || (a.maxBytes > 0 && a.bytes >= a.maxBytes)
}

// waitRoom blocks until the connection may read another frame: it is
// below its own limits and the budget below its own.
func (a *connAcct) waitRoom(stop <-chan struct{}) error {
	if a.full() {
		a.waiting.Store(true)
		for a.full() {
			select {
			case <-a.wake:
			case <-stop:
				a.waiting.Store(false)
				return errStopped
			}
		}
		a.waiting.Store(false)
	}
	return a.global.wait(stop, time.Time{})
}

// deadlineReader is a connection's reader under the read and idle
// timeouts. The frame loop says whether a frame has started (frame) or
// not (idle); the reader sets the connection's read deadline only when it
// must block and the deadline in force is later than the one wanted, so a
// connection whose frames arrive whole sets it rarely. A deadline that
// fires early (an older, earlier one) is moved and the read retried.
type deadlineReader struct {
	nc           net.Conn
	frameTimeout time.Duration // <= 0: none
	idleTimeout  time.Duration // <= 0: none
	acct         *connAcct     // nil: no requests are tracked (a client)

	inFrame bool
	start   time.Time // when this frame or idle period began blocking; zero until then
	set     time.Time // the deadline in force on nc; zero: none
}

// idle says that no frame has started.
func (d *deadlineReader) idle() { d.inFrame, d.start = false, time.Time{} }

// frame says that a frame has started.
func (d *deadlineReader) frame() { d.inFrame, d.start = true, time.Time{} }

// want returns the deadline of the current state, zero for none.
func (d *deadlineReader) want() time.Time {
	t := d.idleTimeout
	if d.inFrame {
		t = d.frameTimeout
	}
	if t <= 0 {
		return time.Time{}
	}
	if d.start.IsZero() {
		d.start = time.Now()
	}
	return d.start.Add(t)
}

// frameDeadline returns the deadline of the frame being read, zero for
// none.
func (d *deadlineReader) frameDeadline() time.Time {
	if !d.inFrame {
		return time.Time{}
	}
	return d.want()
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	for {
		want := d.want()
		if !want.IsZero() && (d.set.IsZero() || d.set.After(want)) {
			if err := d.nc.SetReadDeadline(want); err != nil {
				return 0, err
			}
			d.set = want
		}
		n, err := d.nc.Read(p)
		if n > 0 || err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		now := time.Now()
		if !d.inFrame && d.extendIdle(now) {
			want = d.want()
		}
		if want.IsZero() || now.Before(want) {
			// An earlier deadline fired, or the idle period was
			// extended: move the deadline and read on.
			if err := d.nc.SetReadDeadline(want); err != nil {
				return 0, err
			}
			d.set = want
			continue
		}
		if d.inFrame {
			return 0, fmt.Errorf("%w of %v", errReadTimeout, d.frameTimeout)
		}
		return 0, fmt.Errorf("%w for %v", errIdle, d.idleTimeout)
	}
}

// extendIdle moves the start of the idle period to the last answer, or to
// now while a request is in flight (a held long poll is not idleness). It
// reports whether it moved it.
func (d *deadlineReader) extendIdle(now time.Time) bool {
	if d.acct == nil || d.idleTimeout <= 0 {
		return false
	}
	if d.acct.busy() {
		d.start = now
		return true
	}
	if last := time.Unix(0, d.acct.lastAnswer.Load()); last.After(d.start) {
		d.start = last
		return true
	}
	return false
}

// readBody reads a frame body of n bytes as it arrives: it allocates what
// is buffered already (at least minBodyChunk) and then, each time the
// buffer is full and another byte has come, grows it to twice what has
// arrived (what it holds and what the reader has buffered). So a frame
// never holds more than twice what its peer has sent, whatever length it
// announced, and a body that has mostly arrived (a 34 KiB pop answer
// behind a 32 KiB read buffer) is copied once, not once per doubling.
// charge (nil: none) is told every allocation before it is made and may
// refuse it.
func readBody(r io.Reader, n int, charge func(int) error) ([]byte, error) {
	buffered := func() int { return 0 }
	if br, ok := r.(interface{ Buffered() int }); ok {
		buffered = br.Buffered
	}
	size := min(n, max(minBodyChunk, buffered()))
	if charge != nil {
		if err := charge(size); err != nil {
			return nil, err
		}
	}
	b := make([]byte, size)
	got := 0
	for {
		m, err := io.ReadFull(r, b[got:])
		got += m
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		if got == n {
			return b, nil
		}
		// Full: wait for one more byte before growing.
		var one [1]byte
		if _, err := io.ReadFull(r, one[:]); err != nil {
			return nil, unexpectedEOF(err)
		}
		grow := min(n, 2*(got+buffered()))
		if charge != nil {
			if err := charge(grow - len(b)); err != nil {
				return nil, err
			}
		}
		nb := make([]byte, grow)
		copy(nb, b[:got])
		nb[got] = one[0]
		got++
		b = nb
	}
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
