package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClientOptions are a ClientConn's settings; the zero value is a
// plaintext connection with the defaults below.
type ClientOptions struct {
	// TLS, when set, makes the connection TLS (NextProtos h2 is added).
	TLS *tls.Config
	// Authority is the :authority of every call; the dialled address
	// when empty.
	Authority string
	// StreamWindow and ConnWindow are the receive windows this side
	// grants per stream and for the connection (1 MiB and 16 MiB).
	StreamWindow, ConnWindow uint32
	// MaxRecvMsgSize bounds one received message (4 MiB, as grpc-go's).
	MaxRecvMsgSize int
	// ReadBufferSize and WriteBufferSize size the socket's buffered
	// reader and writer (64 KiB each).
	ReadBufferSize, WriteBufferSize int
	// UserAgent is sent as user-agent when set.
	UserAgent string
}

const (
	clientDefaultStreamWindow = 1 << 20
	clientDefaultConnWindow   = 16 << 20
	clientDefaultMaxRecv      = 4 << 20
	clientDefaultBuffer       = 64 << 10
	clientInitialWindow       = 65535 // HTTP/2's initial window before SETTINGS
	clientMaxStreamID         = math.MaxInt32
	clientMaxHeaderList       = 16 << 20 // bytes of one header block, encoded or decoded
)

// ClientConn is one HTTP/2 connection carrying gRPC calls. It is safe for
// concurrent use. Call options other than grpc.Header, grpc.Trailer and
// grpc.MaxCallRecvMsgSize are ignored (they are about grpc-go's own
// machinery: retries, balancers, compressors, wait-for-ready).
type ClientConn struct {
	conn      net.Conn
	fr        *http2.Framer // read by the reader goroutine; written under wmu
	authority string
	scheme    string
	opts      ClientOptions

	// Writing: callers write their frames under wmu into bw. The last of
	// a run of writers (waiting reaching zero) flushes when it is the
	// connection's only call, else hands the flush to the flusher
	// goroutine, which lets the other runnable callers write first.
	waiting   atomic.Int32
	cmu       sync.Mutex
	ctrl      []clientCtrl // frames the reader queued, written by the next writer
	ctrlN     atomic.Int32 // len(ctrl)
	calls     atomic.Int32 // streams open
	flushSig  chan struct{}
	flushWant bool // under wmu: bw holds frames the flusher is to send
	wmu       sync.Mutex
	bw        *bufio.Writer
	henc      *hpack.Encoder
	hcache    clientHeaderCache
	mdCtx     context.Context     // the context mdFields are of, under wmu
	mdFields  []hpack.HeaderField // its outgoing metadata
	hbuf      clientHeaderBuf
	werr      error  // first write error; later writes fail with it
	nextID    uint32 // next stream id (odd), under wmu
	mfsOut    uint32 // peer's SETTINGS_MAX_FRAME_SIZE, under wmu
	tblSize   uint32 // peer's SETTINGS_HEADER_TABLE_SIZE to apply, under wmu

	// State: streams, windows, limits, under mu.
	mu          sync.Mutex
	streams     map[uint32]*clientStream
	connSendWin int64
	peerInitWin int64
	maxStreams  uint32
	active      uint32
	wake        chan struct{} // closed when a window or slot opens; nil when nobody waits
	goAway      bool
	goAwayID    uint32
	goAwaySeen  bool
	closeErr    error  // set once the connection is done: every call fails with it
	recvUnacked uint32 // connection-level bytes received and not yet credited (reader only)

	// Header blocks, decoded by the reader into fields (reused).
	hdec     *hpack.Decoder
	fields   []hpack.HeaderField
	fieldsSz int
	hblk     []byte // a block continued in CONTINUATION frames
	hblkID   uint32
	hblkEnd  bool

	settingsSeen chan struct{} // closed on the peer's first SETTINGS
	done         chan struct{} // closed when the connection is done
	readerDone   chan struct{}

	bufs sync.Pool // *[]byte request buffers
}

// clientHeaderBuf is the HPACK encoder's output, reset per header block.
type clientHeaderBuf struct{ b []byte }

func (h *clientHeaderBuf) Write(p []byte) (int, error) { h.b = append(h.b, p...); return len(p), nil }

// Dial connects to addr, exchanges the HTTP/2 preface and SETTINGS and
// returns once the server's SETTINGS arrived (so that its stream limit
// holds from the first call). ctx bounds the dial only.
func Dial(ctx context.Context, addr string, opts ClientOptions) (*ClientConn, error) {
	if opts.StreamWindow == 0 {
		opts.StreamWindow = clientDefaultStreamWindow
	}
	if opts.ConnWindow == 0 {
		opts.ConnWindow = clientDefaultConnWindow
	}
	if opts.StreamWindow < clientInitialWindow || opts.ConnWindow < clientInitialWindow ||
		opts.StreamWindow > math.MaxInt32 || opts.ConnWindow > math.MaxInt32 {
		return nil, fmt.Errorf("h2: dial %s: windows must be in [65535, 2^31-1]", addr)
	}
	if opts.MaxRecvMsgSize <= 0 {
		opts.MaxRecvMsgSize = clientDefaultMaxRecv
	}
	if opts.ReadBufferSize <= 0 {
		opts.ReadBufferSize = clientDefaultBuffer
	}
	if opts.WriteBufferSize <= 0 {
		opts.WriteBufferSize = clientDefaultBuffer
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("h2: dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	scheme := "http"
	if opts.TLS != nil {
		cfg := opts.TLS.Clone()
		cfg.NextProtos = []string{"h2"}
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("h2: dial %s: tls: %w", addr, err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			return nil, fmt.Errorf("h2: dial %s: the server negotiated %q, not h2", addr, p)
		}
		nc, scheme = tc, "https"
	}
	c := &ClientConn{conn: nc, authority: opts.Authority, scheme: scheme, opts: opts,
		nextID: 1, mfsOut: 16384, streams: map[uint32]*clientStream{},
		connSendWin: clientInitialWindow, peerInitWin: clientInitialWindow, maxStreams: math.MaxUint32,
		settingsSeen: make(chan struct{}), flushSig: make(chan struct{}, 1), done: make(chan struct{}), readerDone: make(chan struct{})}
	if c.authority == "" {
		c.authority = addr
	}
	c.bw = bufio.NewWriterSize(nc, opts.WriteBufferSize)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, opts.ReadBufferSize))
	c.fr.SetReuseFrames()
	c.hdec = hpack.NewDecoder(4096, c.emitField)
	c.hdec.SetMaxStringLength(clientMaxHeaderList)
	c.henc = hpack.NewEncoder(&c.hbuf)

	// The preface, our SETTINGS and the connection window, in one write.
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: opts.StreamWindow})
	}
	if err == nil && opts.ConnWindow > clientInitialWindow {
		err = c.fr.WriteWindowUpdate(0, opts.ConnWindow-clientInitialWindow)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2: dial %s: preface: %w", addr, err)
	}
	go c.reader()
	go c.flusher()
	select {
	case <-c.settingsSeen:
		return c, nil
	case <-c.done:
		err = c.closeErr
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.shut(status.Error(codes.Unavailable, "h2: dial abandoned"))
	<-c.readerDone
	return nil, fmt.Errorf("h2: dial %s: waiting for the server's SETTINGS: %w", addr, err)
}

// Close closes the connection; calls still running fail with Canceled.
func (c *ClientConn) Close() error {
	c.shut(status.Error(codes.Canceled, "grpc: the client connection is closing"))
	<-c.readerDone
	return nil
}

// shut ends the connection once, failing every stream with err.
func (c *ClientConn) shut(err error) {
	c.mu.Lock()
	if c.closeErr != nil {
		c.mu.Unlock()
		return
	}
	c.closeErr = err
	streams := c.streams
	c.streams = map[uint32]*clientStream{}
	c.wakeLocked()
	c.mu.Unlock()
	close(c.done)
	c.conn.Close()
	st, _ := status.FromError(err)
	for _, s := range streams {
		s.finish(st, nil)
	}
}

// wakeLocked wakes everyone waiting for a window or a stream slot.
func (c *ClientConn) wakeLocked() {
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}

// waitChLocked is the channel closed at the next window or slot change.
func (c *ClientConn) waitChLocked() chan struct{} {
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	return c.wake
}

// write runs fn (which writes frames with c.fr) under the write lock,
// after the reader's queued frames. The last of a burst of writers (none
// waiting for the lock) flushes when its call is the connection's only
// one, else leaves the flush to the flusher.
func (c *ClientConn) write(fn func() error) error {
	c.waiting.Add(1)
	c.wmu.Lock()
	err := c.werr
	if err == nil {
		err = c.drainLocked()
	}
	if err == nil {
		err = fn()
	}
	if c.waiting.Add(-1) == 0 && err == nil && c.bw.Buffered() > 0 {
		if c.calls.Load() <= 1 {
			err = c.bw.Flush()
			c.flushWant = false
		} else if !c.flushWant {
			c.flushWant = true
			select {
			case c.flushSig <- struct{}{}:
			default:
			}
		}
	}
	if err != nil && c.werr == nil {
		c.werr = err
	}
	c.wmu.Unlock()
	if err != nil {
		c.shut(status.Errorf(codes.Unavailable, "h2: write: %v", err))
	}
	return err
}

// flusher flushes what callers wrote when they leave it to it, after
// letting the goroutines ready to run (callers about to write) go first.
func (c *ClientConn) flusher() {
	for {
		select {
		case <-c.flushSig:
		case <-c.done:
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		err := c.werr
		if err == nil {
			err = c.drainLocked()
		}
		if err == nil && c.bw.Buffered() > 0 {
			c.flushWant = false
			err = c.bw.Flush()
		}
		if err != nil && c.werr == nil {
			c.werr = err
		}
		c.wmu.Unlock()
		if err != nil {
			c.shut(status.Errorf(codes.Unavailable, "h2: write: %v", err))
		}
	}
}

// clientCtrl is a frame the reader has to send: it never writes itself,
// so that it keeps reading while a caller's write waits for the server
// (which may wait for its own writes to be read).
type clientCtrl struct {
	kind     byte // 'w' WINDOW_UPDATE, 'r' RST_STREAM, 'p' PING ack, 's' SETTINGS ack
	id, val  uint32
	ping     [8]byte
	mfs, tbl uint32 // with 's': the server's new SETTINGS_MAX_FRAME_SIZE and table size, 0 when unchanged
}

// queue has the next writer (or the flusher) send f.
func (c *ClientConn) queue(f clientCtrl) {
	c.cmu.Lock()
	c.ctrl = append(c.ctrl, f)
	c.ctrlN.Store(int32(len(c.ctrl)))
	c.cmu.Unlock()
	select {
	case c.flushSig <- struct{}{}:
	default:
	}
}

// drainLocked writes the queued control frames; under wmu.
func (c *ClientConn) drainLocked() error {
	if c.ctrlN.Load() == 0 {
		return nil
	}
	c.cmu.Lock()
	q := c.ctrl
	c.ctrl = nil
	c.ctrlN.Store(0)
	c.cmu.Unlock()
	for _, f := range q {
		var err error
		switch f.kind {
		case 'w':
			err = c.fr.WriteWindowUpdate(f.id, f.val)
		case 'r':
			err = c.fr.WriteRSTStream(f.id, http2.ErrCode(f.val))
		case 'p':
			err = c.fr.WritePing(true, f.ping)
		case 's':
			if f.mfs != 0 {
				c.mfsOut = f.mfs
			}
			if f.tbl != 0 {
				c.tblSize = f.tbl
			}
			err = c.fr.WriteSettingsAck()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// acquire takes a stream slot under the server's concurrent-stream limit.
func (c *ClientConn) acquire(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return err
		}
		if c.goAway {
			c.mu.Unlock()
			return status.Error(codes.Unavailable, "h2: the server sent GOAWAY")
		}
		if c.active < c.maxStreams {
			c.active++
			c.calls.Add(1)
			c.mu.Unlock()
			return nil
		}
		ch := c.waitChLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// release gives a stream slot back.
func (c *ClientConn) releaseLocked() {
	c.active--
	c.calls.Add(-1)
	c.wakeLocked()
}

// startLocked registers s, gives it an id and writes its HEADERS; under
// wmu. The caller holds a slot. soft is an error before anything was
// registered or written (the caller gives the slot back), err a write's.
func (c *ClientConn) startLocked(s *clientStream, endStream bool) (soft, err error) {
	if c.nextID > clientMaxStreamID {
		return status.Error(codes.Unavailable, "h2: stream ids exhausted"), nil
	}
	s.id = c.nextID
	c.mu.Lock()
	if c.closeErr != nil {
		err := c.closeErr
		c.mu.Unlock()
		return err, nil
	}
	if c.goAway {
		c.mu.Unlock()
		return status.Error(codes.Unavailable, "h2: the server sent GOAWAY"), nil
	}
	s.sendWin = c.peerInitWin
	c.streams[s.id] = s
	c.mu.Unlock()
	c.nextID += 2
	if c.tblSize != 0 {
		c.henc.SetMaxDynamicTableSizeLimit(c.tblSize)
		c.tblSize = 0
		c.hcache.ok = false
	}
	block := c.headerBlock(s)
	first := true
	for first || len(block) > 0 {
		n := min(len(block), int(c.mfsOut))
		frag, last := block[:n], n == len(block)
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: frag, EndStream: endStream, EndHeaders: last})
		} else {
			err = c.fr.WriteContinuation(s.id, last, frag)
		}
		if err != nil {
			return nil, err
		}
		block, first = block[n:], false
	}
	return nil, nil
}

// dataLocked writes as much of data as the windows allow as DATA frames
// of s (END_STREAM with the last when end), under wmu, and returns the
// rest. Empty data with end is one empty frame.
func (c *ClientConn) dataLocked(s *clientStream, data []byte, end bool) ([]byte, error) {
	if s.ended() {
		return nil, errClientStreamDone // after its RST_STREAM: nothing more
	}
	if len(data) == 0 {
		if end {
			s.sentEnd.Store(true)
			return nil, c.fr.WriteData(s.id, true, nil)
		}
		return nil, nil
	}
	c.mu.Lock()
	n := int64(len(data))
	n = min(n, c.connSendWin, s.sendWin)
	if n > 0 {
		c.connSendWin -= n
		s.sendWin -= n
	}
	c.mu.Unlock()
	for n > 0 {
		k := min(n, int64(c.mfsOut))
		last := int64(len(data)) == k
		if end && last {
			s.sentEnd.Store(true)
		}
		if err := c.fr.WriteData(s.id, end && last, data[:k]); err != nil {
			return nil, err
		}
		data, n = data[k:], n-k
	}
	return data, nil
}

// sendData writes data as s's DATA frames, waiting for window as needed.
func (c *ClientConn) sendData(ctx context.Context, s *clientStream, data []byte, end bool) error {
	for {
		var rest []byte
		var done bool
		err := c.write(func() (err error) {
			rest, err = c.dataLocked(s, data, end)
			if err == errClientStreamDone {
				done, err = true, nil
			}
			return err
		})
		if done {
			return errClientStreamDone
		}
		if err != nil {
			return err
		}
		if len(rest) == 0 {
			return nil
		}
		data = rest
		if err := c.waitWindow(ctx, s); err != nil {
			return err
		}
	}
}

// waitWindow waits until both windows are open for s.
func (c *ClientConn) waitWindow(ctx context.Context, s *clientStream) error {
	for {
		c.mu.Lock()
		if c.closeErr != nil {
			err := c.closeErr
			c.mu.Unlock()
			return err
		}
		if c.connSendWin > 0 && s.sendWin > 0 {
			c.mu.Unlock()
			return nil
		}
		ch := c.waitChLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-s.done:
			return errClientStreamDone
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

var errClientStreamDone = errors.New("h2: stream done")

// reset ends s with st and sends RST_STREAM(code) unless it is done.
func (c *ClientConn) reset(s *clientStream, st *status.Status, code http2.ErrCode) {
	if !c.detach(s) {
		return
	}
	s.finish(st, nil)
	c.queue(clientCtrl{kind: 'r', id: s.id, val: uint32(code)})
}

// detach removes s from the connection, giving its slot back; false when
// it was removed already.
func (c *ClientConn) detach(s *clientStream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams[s.id] != s {
		return false
	}
	delete(c.streams, s.id)
	c.releaseLocked()
	return true
}

// clientTimeout is d as a grpc-timeout value: at most 8 digits, in the
// finest unit that fits.
func clientTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range []struct {
		d time.Duration
		s string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if v := (d + u.d - 1) / u.d; v <= 99999999 {
			return strconv.FormatInt(int64(v), 10) + u.s
		}
	}
	return strconv.FormatInt(int64((d+time.Hour-1)/time.Hour), 10) + "H"
}

// clientPrefix puts the 5-byte gRPC message prefix in front of a proto
// message of n bytes at b[5:].
func clientPrefix(b []byte) {
	b[0] = 0
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
}

// The grpc.ClientConnInterface this type implements.
var _ grpc.ClientConnInterface = (*ClientConn)(nil)
