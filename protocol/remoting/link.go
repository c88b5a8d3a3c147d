package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of connections.
var (
	// ErrConnClosed is wrapped by every error a connection returns once it
	// is gone: sends, pending requests, Conn.Err. The error also wraps the
	// cause (io.EOF, a write error, ...) when there is one.
	ErrConnClosed = errors.New("remoting: connection closed")
	// ErrTimeout is passed to an InvokeAsync callback when no response
	// came within the timeout.
	ErrTimeout = errors.New("remoting: request timed out")
)

// Connection tuning. None of these is part of the wire format; the
// buffer sizes are in bufs.go.
const (
	// outQueueLen is how many encoded frames may wait for the writer
	// before senders block.
	outQueueLen = 4096
	// maxPooledFrame is the largest frame buffer kept for reuse.
	maxPooledFrame = 256 << 10
)

// link is one connection, the part a server connection and a client
// connection share: the writer, the reader and the table of requests
// waiting for a response.
//
// Goroutines: run reads frames, completes pending calls, passes requests
// to dispatch, and on exit fails every pending call; it runs as long as
// the link. Senders (any goroutine) encode their frame themselves and
// queue it; the sender that queues a frame when no writer runs starts
// writeLoop, which drains the queue into a pooled bufio.Writer, flushes
// when the queue is empty and returns (a server's handler goroutine,
// which ends with its answer, drains the queue itself instead; so does a
// client's Invoke, bounded by its deadline: writeInline). So an idle link
// has one goroutine.
type link struct {
	nc       net.Conn
	addr     string // peer address, for errors and logs
	maxFrame int
	log      *slog.Logger
	pools    *bufPools // may be shared by links
	// readTimeout and idleTimeout are the deadlines of the reader; <= 0
	// means none.
	readTimeout, idleTimeout time.Duration
	// acct, on a server connection, counts the requests in flight and
	// holds the reader back at its limits; nil on a client connection.
	acct *connAcct
	// onClose, if set, reports why the reader stopped instead of run's
	// own logging.
	onClose func(err error)

	// The writer's queue. A sender takes a slot, appends its frame to
	// queue.frames and starts writeLoop if no writer runs; writeLoop
	// takes all queued frames at once and frees a slot per frame written.
	// So at most outQueueLen frames wait and senders block beyond that;
	// a channel of empty structs holds no memory per slot, and a large
	// queue slice is dropped when the writer returns.
	slots chan struct{} // capacity outQueueLen
	queue struct {
		sync.Mutex
		frames []*frameBuf
		// spare is the other slice, emptied: takeQueued and returnBatch
		// swap the two, so that a busy link allocates none.
		spare []*frameBuf
		// writing is set while a writeLoop runs: at most one does.
		writing bool
		// stopped is set by stopWriter; no writer starts after it.
		stopped bool
	}
	// writeLoop as a func value, made once: "go l.writeLoop()" would
	// allocate a closure for every goroutine it starts.
	writeLoopFn func()
	// writers counts the writeLoop goroutine. Add happens under queue's
	// lock while !queue.stopped; Wait in stopWriter after setting stopped.
	writers sync.WaitGroup
	closed  chan struct{} // closed by closeWith
	once    sync.Once
	// err says why the link is gone; it wraps ErrConnClosed. Written once,
	// before closed is closed.
	err error

	nextOpaque atomic.Int32
	pending    pendingTable
}

func newLink(nc net.Conn, addr string, maxFrame int, readTimeout time.Duration, log *slog.Logger, pools *bufPools) *link {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &link{
		nc:          nc,
		addr:        addr,
		maxFrame:    maxFrame,
		readTimeout: orDefault(readTimeout, DefaultReadTimeout),
		log:         log,
		pools:       pools,
		slots:       make(chan struct{}, outQueueLen),
		closed:      make(chan struct{}),
	}
	l.writeLoopFn = l.writeLoop
	return l
}

// orDefault returns v, or def if v is 0; a negative v (no limit) comes back
// as is.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// closeWith closes the link once; cause (nil for a local Close) is kept in
// err. It does not wait for the goroutines.
func (l *link) closeWith(cause error) {
	l.once.Do(func() {
		if cause == nil {
			l.err = fmt.Errorf("%w (%s)", ErrConnClosed, l.addr)
		} else {
			l.err = fmt.Errorf("%w (%s): %w", ErrConnClosed, l.addr, cause)
		}
		close(l.closed)
		_ = l.nc.Close() // the reader and writer see the error; nothing to add
	})
}

// closedErr returns err if the link is closed, else nil.
func (l *link) closedErr() error {
	select {
	case <-l.closed:
		return l.err
	default:
		return nil
	}
}

// run reads frames until the connection fails, then closes the link and
// fails every pending call. dispatch gets each request, on this goroutine.
// It returns the error that ended the reading.
func (l *link) run(dispatch func(*Command)) error {
	err := l.readLoop(dispatch)
	switch {
	case l.onClose != nil:
		l.onClose(err)
	case errors.Is(err, ErrMalformed) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, errReadTimeout):
		l.log.Warn("remoting: closing connection after a bad frame", "remote", l.addr, "err", err)
	case l.closedErr() != nil:
		// Closed on this side; the read error is only the consequence.
	case errors.Is(err, io.EOF):
		l.log.Debug("remoting: connection closed by peer", "remote", l.addr)
	default:
		l.log.Debug("remoting: connection read failed", "remote", l.addr, "err", err)
	}
	l.closeWith(err)
	l.stopWriter()
	if l.acct != nil {
		l.acct.close()
	}
	for _, c := range l.pending.close(l.err) {
		c.fail(l.err)
	}
	return err
}

// readLoop reads and hands on frames. Between frames it waits, on a server
// connection, until the connection is below its in-flight limits; the
// deadlineReader enforces the read and idle timeouts; frame bodies are
// read as they arrive, charged to the connection as they grow. The read
// buffer is held only while a frame is being read or bytes are buffered
// (see frameReader).
func (l *link) readLoop(dispatch func(*Command)) error {
	dr := &deadlineReader{nc: l.nc, frameTimeout: l.readTimeout, idleTimeout: l.idleTimeout, acct: l.acct}
	br := &frameReader{src: dr, pools: l.pools}
	defer br.release()
	var charge func(int) error
	if a := l.acct; a != nil {
		charge = func(n int) error {
			if err := a.global.wait(l.closed, dr.frameDeadline()); err != nil {
				return err
			}
			a.charge(int64(n))
			return nil
		}
	}
	var prefix [lenPrefixSize]byte
	for {
		if l.acct != nil {
			if err := l.acct.waitRoom(l.closed); err != nil {
				return err
			}
		}
		dr.idle()
		if err := br.waitFrame(); err != nil {
			return err
		}
		dr.frame()
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return unexpectedEOF(err)
		}
		n, err := frameLength(prefix[:], l.maxFrame)
		if err != nil {
			return err
		}
		frame, err := readBody(br, n, charge)
		if err != nil {
			return err
		}
		cmd, err := DecodeFrame(frame)
		if err != nil {
			return err
		}
		if cmd.IsResponse() {
			l.complete(cmd)
			if l.acct != nil {
				l.acct.finish(int64(n), false)
			}
			continue
		}
		if l.acct != nil {
			cmd.held = int64(n)
			l.acct.begin()
		}
		dispatch(cmd)
	}
}

// releaseReq ends the accounting of req as a request in flight, if that
// has not happened yet.
func (l *link) releaseReq(req *Command) {
	if n := atomic.SwapInt64(&req.held, 0); n > 0 && l.acct != nil {
		l.acct.finish(n, true)
	}
}

// writeLoop is the writer goroutine push starts: drain, yielding before
// each flush.
func (l *link) writeLoop() { l.drain(true) }

// drain writes queued frames until the queue is empty, then returns; it
// runs as the writer goroutine (writeLoop) or on a goroutine that queued a
// frame with nobody writing and writes it itself (push's inline). It
// copies what is queued into a bufio.Writer from the pool and, when the
// queue is empty, flushes and returns the writer to the pool. With yield,
// before flushing it yields the processor once, so that handler
// goroutines that are about to queue a response can join the same write;
// on the echo benchmark that saves about a tenth of the CPU per request.
// But a yielded goroutine waits in the global run queue behind whatever
// else is runnable, on a busy broker 0.1-0.2 ms per answer, which a
// client with one request in flight (a pop consumer) pays on every
// round. An inline writer does not yield: it is the goroutine whose
// answer is ready, and what is queued while it writes goes out with its
// next flush.
func (l *link) drain(yield bool) {
	defer l.writers.Done()
	bw := l.pools.getWriter(l.nc)
	defer l.pools.putWriter(bw)
	yielded := false
	for {
		batch := l.takeQueued()
		if len(batch) > 0 {
			err := l.writeBatch(bw, batch)
			l.returnBatch(batch)
			if err != nil {
				l.closeWith(fmt.Errorf("write: %w", err))
				return
			}
			continue
		}
		if yield && !yielded {
			yielded = true
			runtime.Gosched()
			continue
		}
		if err := bw.Flush(); err != nil {
			l.closeWith(fmt.Errorf("write: %w", err))
			return
		}
		if l.writerDone() {
			return
		}
		yielded = false // frames came during the flush
	}
}

// writeBatch copies frames into bw, freeing their slots in the queue and
// releasing the requests they answer.
func (l *link) writeBatch(bw *bufio.Writer, frames []*frameBuf) error {
	for _, buf := range frames {
		_, err := bw.Write(buf.b)
		if buf.held > 0 && l.acct != nil {
			l.acct.finish(buf.held, true) // answered
		}
		l.putBuf(buf)
		<-l.slots
		if err != nil {
			return err
		}
	}
	return nil
}

// queueFrame appends fb, for which the caller holds a slot, to the queue and
// reports whether the caller must start the writer: none ran, and the
// link is not stopped (it is then marked as writing).
func (l *link) queueFrame(fb *frameBuf) (start bool) {
	l.queue.Lock()
	defer l.queue.Unlock()
	l.queue.frames = append(l.queue.frames, fb)
	start = !l.queue.writing && !l.queue.stopped
	if start {
		l.queue.writing = true
		l.writers.Add(1)
	}
	return start
}

// push appends fb, for which the caller holds a slot, to the queue, and
// starts a writer if none runs: with inline, the caller is that writer
// and returns once the queue is empty (drain); else a writeLoop goroutine.
func (l *link) push(fb *frameBuf, inline bool) {
	start := l.queueFrame(fb)
	switch {
	case !start:
	case inline:
		l.drain(false)
	default:
		go l.writeLoopFn()
	}
}

// takeQueued returns the queued frames, or nil if there are none; the
// writer hands the slice back with returnBatch.
func (l *link) takeQueued() []*frameBuf {
	l.queue.Lock()
	defer l.queue.Unlock()
	frames := l.queue.frames
	if len(frames) == 0 {
		return nil
	}
	l.queue.frames = l.queue.spare[:0]
	l.queue.spare = nil
	return frames
}

// returnBatch keeps the slice of a written batch, emptied, for the next
// takeQueued.
func (l *link) returnBatch(frames []*frameBuf) {
	clear(frames)
	l.queue.Lock()
	defer l.queue.Unlock()
	l.queue.spare = frames[:0]
}

// writerDone ends the writer if the queue is empty, dropping the queue's
// slice if it is larger than an idle connection keeps. It reports whether
// the writer is to return.
func (l *link) writerDone() bool {
	l.queue.Lock()
	defer l.queue.Unlock()
	if len(l.queue.frames) > 0 {
		return false
	}
	if cap(l.queue.frames) > maxIdleQueueCap {
		l.queue.frames = nil
	}
	if cap(l.queue.spare) > maxIdleQueueCap {
		l.queue.spare = nil
	}
	l.queue.writing = false
	return true
}

// stopWriter waits for the writer, if one runs, and starts no other. The
// link is closed, so a writer fails its next write and returns.
func (l *link) stopWriter() {
	l.queue.Lock()
	l.queue.stopped = true
	l.queue.Unlock()
	l.writers.Wait()
}

// queuedLen returns how many frames are queued and not yet written.
func (l *link) queuedLen() int { return len(l.slots) }

// frameBuf is an encoded frame on its way to the writer, with the scratch
// space its encoding used. Both are reused through link.pools.
type frameBuf struct {
	b      []byte
	fields []extField
	// held is the in-flight bytes of the request this frame answers,
	// released once it is written.
	held int64
}

// encode returns cmd's frame in a pooled buffer. Frames longer than
// maxFrame are refused, since the peer would drop the connection.
func (l *link) encode(cmd *Command) (*frameBuf, error) {
	fb, _ := l.pools.frames.Get().(*frameBuf)
	if fb == nil {
		fb = &frameBuf{}
	}
	b, fields, err := appendFrame(fb.b[:0], cmd, fb.fields)
	fb.b, fb.fields = b, fields
	if err != nil {
		l.putBuf(fb)
		return nil, err
	}
	if n := len(b) - lenPrefixSize; n > l.maxFrame {
		l.putBuf(fb)
		return nil, fmt.Errorf("remoting: frame of %d bytes (code %d) exceeds limit %d: %w",
			n, cmd.Code, l.maxFrame, ErrFrameTooLarge)
	}
	return fb, nil
}

func (l *link) putBuf(fb *frameBuf) {
	if cap(fb.b) > maxPooledFrame {
		fb.b = nil
	}
	fb.b = fb.b[:0]
	fb.held = 0
	l.pools.frames.Put(fb)
}

// enqueue hands an encoded frame to the writer, blocking while the queue is
// full. With inline, when no writer runs the caller writes the queue
// itself (push).
func (l *link) enqueue(fb *frameBuf, inline bool) error {
	if err := l.closedErr(); err != nil {
		return err
	}
	select {
	case l.slots <- struct{}{}:
		l.push(fb, inline)
		return nil
	case <-l.closed:
		return l.err
	}
}

// tryEnqueue hands an encoded frame to the writer if the queue has room,
// or drops it if the link is closed. It reports whether it took fb; if
// not (the queue is full), fb is still the caller's.
func (l *link) tryEnqueue(fb *frameBuf) bool {
	if l.closedErr() != nil {
		l.putBuf(fb)
		return true // dropped: nobody is left to answer
	}
	select {
	case l.slots <- struct{}{}:
		l.push(fb, false)
		return true
	default:
		return false
	}
}

// send encodes cmd as it is and queues it.
func (l *link) send(cmd *Command) error {
	fb, err := l.encode(cmd)
	if err != nil {
		return err
	}
	return l.enqueue(fb, false)
}

// reply sends resp as the response to req: it takes req's opaque and gets
// FlagResponse. Nothing is sent for a one-way req. If resp cannot be
// encoded, a SYSTEM_ERROR response goes out instead so the peer does not
// wait for a timeout. req stops counting as in flight once the response is
// written (or at once if none is sent). With inline, a caller that finds
// no writer running writes the response itself (a handler goroutine that
// ends with its answer), saving the writer goroutine's start and yield,
// if req is the connection's only request in flight: with others in
// flight, their answers may come at once (a consumer's batch acks of
// one entry), and the yielding writer sends them with one flush.
func (l *link) reply(req, resp *Command, inline bool) {
	if !stampReply(req, resp) {
		l.releaseReq(req)
		return
	}
	fb, err := l.encode(resp)
	if err != nil {
		l.log.Warn("remoting: cannot send response", "remote", l.addr, "code", req.Code, "err", err)
		fallback := NewResponse(req, SystemError, err.Error())
		if fb, err = l.encode(fallback); err != nil {
			l.log.Warn("remoting: cannot send error response", "remote", l.addr, "err", err)
			l.releaseReq(req)
			return
		}
	}
	fb.held = atomic.SwapInt64(&req.held, 0)
	inline = inline && (l.acct == nil || l.acct.alone())
	if err := l.enqueue(fb, inline); err != nil {
		l.putBuf(fb) // the connection is gone
	}
}

// stampReply makes resp the response to req (req's opaque, FlagResponse)
// and reports whether it is to be sent: not for a one-way req.
func stampReply(req, resp *Command) bool {
	if req.IsOneway() {
		return false
	}
	resp.Opaque = req.Opaque
	resp.Flag = (resp.Flag | FlagResponse) &^ FlagOneway
	return true
}

// oneway sets FlagOneway and an opaque on req and queues it.
func (l *link) oneway(req *Command) error {
	req.Opaque = l.nextOpaque.Add(1)
	req.Flag = (req.Flag | FlagOneway) &^ FlagResponse
	return l.send(req)
}

// invoke sends req with a fresh opaque and waits for its response, ctx, or
// the end of the link.
func (l *link) invoke(ctx context.Context, req *Command) (*Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("remoting: request code %d to %s: %w", req.Code, l.addr, err)
	}
	req.Flag &^= FlagResponse | FlagOneway
	c := &call{done: make(chan *Command, 1)}
	if err := l.startInvoke(ctx, req, c); err != nil {
		return nil, err
	}
	op := req.Opaque
	select {
	case resp, ok := <-c.done:
		return l.result(resp, ok)
	case <-ctx.Done():
		if l.pending.remove(op, c) {
			return nil, fmt.Errorf("remoting: request code %d to %s: %w", req.Code, l.addr, ctx.Err())
		}
	case <-l.closed:
		if l.pending.remove(op, c) {
			return nil, l.err
		}
	}
	// Someone else took the call out of the table, and is about to send
	// the response or close done.
	resp, ok := <-c.done
	return l.result(resp, ok)
}

func (l *link) result(resp *Command, ok bool) (*Command, error) {
	if !ok {
		return nil, l.err
	}
	return resp, nil
}

// invokeAsync sends req with a fresh opaque; cb gets the response, or an
// error on timeout (if timeout > 0) or when the link closes. If it returns
// an error, cb is not called.
func (l *link) invokeAsync(req *Command, timeout time.Duration, cb func(*Command, error)) error {
	if cb == nil {
		cb = func(*Command, error) {}
	}
	req.Flag &^= FlagResponse | FlagOneway
	return l.start(req, &call{cb: cb}, timeout)
}

// start registers c under a fresh opaque, which it sets on req, and queues
// req. If the send fails and c is still registered, it unregisters c and
// returns the error; if c was already completed (its timer fired, or the
// link closed and failed it), the callback has run and start returns nil.
func (l *link) start(req *Command, c *call, timeout time.Duration) error {
	if err := l.pending.add(l, req, c, timeout); err != nil {
		return err
	}
	fb, err := l.encode(req)
	if err == nil {
		err = l.enqueue(fb, false)
	}
	if err != nil && !l.pending.remove(req.Opaque, c) {
		return nil
	}
	return err
}

// startInvoke is start for invoke: registers c and queues req. If no
// writer runs, the caller writes and flushes req itself (writeInline)
// instead of starting a writeLoop goroutine, whose start and yield a
// client with one request at a time pays on every round (on a loaded
// client, 0.25-0.4 ms at p90 from invoke to flush). It does so only
// when the write cannot outlast ctx: ctx has a deadline, which bounds
// the write, or can never be cancelled. With a writer running, req
// joins its queue as before.
func (l *link) startInvoke(ctx context.Context, req *Command, c *call) error {
	deadline, ok := ctx.Deadline()
	if ok && time.Until(deadline) < minInlineWrite || !ok && ctx.Done() != nil {
		// Cancellable without a deadline, or about to expire: a write
		// cut short by the deadline would close the connection.
		return l.start(req, c, 0)
	}
	if err := l.pending.add(l, req, c, 0); err != nil {
		return err
	}
	fb, err := l.encode(req)
	if err == nil {
		err = l.closedErr()
	}
	if err == nil {
		select {
		case l.slots <- struct{}{}:
			l.pushInline(fb, deadline)
		case <-l.closed:
			err = l.err
		case <-ctx.Done():
			err = fmt.Errorf("remoting: request code %d to %s: %w", req.Code, l.addr, ctx.Err())
		}
		if err != nil {
			l.putBuf(fb)
		}
	}
	if err != nil && !l.pending.remove(req.Opaque, c) {
		return nil // failed by the reader; the waiter sees it
	}
	return err
}

// minInlineWrite is the least time to its deadline a request must have
// to be written by its caller.
const minInlineWrite = time.Millisecond

// pushInline is push for a caller that writes fb itself when no writer
// runs (writeInline), bounded by deadline (zero: none).
func (l *link) pushInline(fb *frameBuf, deadline time.Time) {
	if l.queueFrame(fb) {
		l.writeInline(deadline)
	}
}

// writeInline is the writer for one batch on the caller's goroutine: it
// writes what is queued (the caller's frame, and what came meanwhile) and
// flushes, with the connection's write deadline set to deadline, then
// clears the deadline, so that no later writer inherits it. The writer
// owns the write side while queue.writing is set, so nobody else sets or
// clears a write deadline meanwhile. A write past the deadline fails as
// any write error does: the link closes and its pending calls fail. If
// frames were queued during the write, a writeLoop goroutine takes over
// (the caller does not wait on writes of other requests).
func (l *link) writeInline(deadline time.Time) {
	bw := l.pools.getWriter(l.nc)
	var err error
	if !deadline.IsZero() {
		err = l.nc.SetWriteDeadline(deadline)
	}
	if err == nil {
		batch := l.takeQueued()
		err = l.writeBatch(bw, batch)
		l.returnBatch(batch)
	}
	if err == nil {
		err = bw.Flush()
	}
	if !deadline.IsZero() {
		if derr := l.nc.SetWriteDeadline(time.Time{}); err == nil {
			err = derr
		}
	}
	l.pools.putWriter(bw)
	if err != nil {
		l.closeWith(fmt.Errorf("write: %w", err))
		l.writers.Done()
		return
	}
	if l.writerDone() {
		l.writers.Done()
		return
	}
	go l.writeLoopFn() // still counted in writers, queue.writing still set
}

// complete hands a response to the call waiting for its opaque. It runs
// on the reader goroutine.
func (l *link) complete(resp *Command) {
	c := l.pending.take(resp.Opaque)
	if c == nil {
		// The Go client's "one-way" requests get answers nobody waits
		// for, and so do requests whose waiter gave up.
		l.log.Debug("remoting: response without a waiting request",
			"remote", l.addr, "opaque", resp.Opaque, "code", resp.Code)
		return
	}
	if c.done != nil {
		c.done <- resp
		return
	}
	c.cb(resp, nil)
}

// expire fails c with ErrTimeout if it is still waiting. It runs on the
// timer's goroutine.
func (l *link) expire(op int32, c *call, timeout time.Duration) {
	if l.pending.remove(op, c) {
		c.cb(nil, fmt.Errorf("remoting: request %d to %s: no response within %v: %w", op, l.addr, timeout, ErrTimeout))
	}
}

// call is one request waiting for its response. Exactly one of complete,
// expire, pendingTable.close and the waiter itself takes it out of the
// table, and only that one finishes it.
type call struct {
	done  chan *Command         // Invoke: gets the response, or is closed on failure
	cb    func(*Command, error) // InvokeAsync
	timer *time.Timer           // InvokeAsync with a timeout; guarded by pendingTable.mu
}

// fail finishes c with err.
func (c *call) fail(err error) {
	if c.done != nil {
		close(c.done)
		return
	}
	c.cb(nil, err)
}

// pendingTable maps opaques to waiting calls.
type pendingTable struct {
	mu struct {
		sync.Mutex
		calls map[int32]*call
		// err is set by close; after it no call is added.
		err error
	}
}

// add registers c under a fresh opaque of l, sets it on req, and arms c's
// timer if timeout > 0 and c has a callback.
func (p *pendingTable) add(l *link, req *Command, c *call, timeout time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.err != nil {
		return p.mu.err
	}
	if p.mu.calls == nil {
		p.mu.calls = make(map[int32]*call)
	}
	op := l.nextOpaque.Add(1)
	for p.mu.calls[op] != nil { // wrapped around onto a request still waiting
		op = l.nextOpaque.Add(1)
	}
	req.Opaque = op
	p.mu.calls[op] = c
	if timeout > 0 && c.cb != nil {
		// Armed under the lock, so that take and remove see the timer.
		c.timer = time.AfterFunc(timeout, func() { l.expire(op, c, timeout) })
	}
	return nil
}

// take removes and returns the call waiting for op, or nil.
func (p *pendingTable) take(op int32) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.mu.calls[op]
	if c != nil {
		p.takeLocked(op, c)
	}
	return c
}

// remove removes c if it is still registered under op, reporting whether
// it was.
func (p *pendingTable) remove(op int32, c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.calls[op] != c {
		return false
	}
	p.takeLocked(op, c)
	return true
}

func (p *pendingTable) takeLocked(op int32, c *call) {
	delete(p.mu.calls, op)
	if c.timer != nil {
		c.timer.Stop()
	}
}

// close refuses further calls with err and returns the waiting ones, now
// removed.
func (p *pendingTable) close(err error) []*call {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.err = err
	calls := make([]*call, 0, len(p.mu.calls))
	for op, c := range p.mu.calls {
		p.takeLocked(op, c)
		calls = append(calls, c)
	}
	return calls
}
