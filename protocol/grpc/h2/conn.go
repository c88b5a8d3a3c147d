package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// conn is one client connection: serve runs its reader; drain writes.
type conn struct {
	srv  *Server
	nc   net.Conn
	ctx  context.Context // the peer, for every call's context
	done chan struct{}   // closed by close
	once sync.Once

	// Writer's queue: items appended by anyone, taken by whoever holds
	// writing (drain); w is the writing state.
	qmu       sync.Mutex
	q         []item
	spare     []item
	writing   bool
	wstopped  bool
	w         *writer
	drainFn   func()      // drain(true), made once
	goingAway atomic.Bool // the reader queued a GOAWAY and stops
	wrote     atomic.Bool // HEADERS or DATA written since the last ping (ping strikes reset)

	// Outbound flow control: the peer's windows, added to by the reader,
	// spent by the writer.
	sendWin    atomic.Int64
	peerWindow atomic.Int32 // the peer's SETTINGS_INITIAL_WINDOW_SIZE

	mu       sync.Mutex
	streams  map[uint32]*stream // until the writer wrote their end
	active   int                // calls not answered yet
	lastID   uint32             // highest stream id the reader took
	draining bool               // GOAWAY sent: no new streams
	idleAt   time.Time
	idle     *time.Timer

	// Reader-only state.
	recvUnacked int32 // connection-level bytes received and not yet granted back
	hdec        *hpack.Decoder
	hblk        []byte // a header block spread over CONTINUATION frames
	hblkID      uint32
	hblkEnd     bool
	fields      []hpack.HeaderField // the block being decoded (reused)
	hdrRemain   uint32              // of maxHeaderList, for the block's fields
	hdrInvalid  error               // the block's first invalid field
	sawRegular  bool                // the block had a field that is not a pseudo-header
	lastPing    time.Time
	pingStrikes int
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, done: make(chan struct{}), streams: map[uint32]*stream{}}
	c.sendWin.Store(defaultWindow)
	c.peerWindow.Store(defaultWindow)
	c.w = newWriter(c)
	c.drainFn = func() { c.drain(true) }
	return c
}

// close ends the connection: the socket closed, the calls' contexts
// cancelled.
func (c *conn) close(error) {
	c.once.Do(func() {
		c.qmu.Lock()
		c.wstopped = true // a writer running fails on the closed socket
		c.qmu.Unlock()
		close(c.done)
		c.nc.Close()
		c.mu.Lock()
		streams := make([]*stream, 0, len(c.streams))
		for _, s := range c.streams {
			streams = append(streams, s)
		}
		if c.idle != nil {
			c.idle.Stop()
		}
		c.mu.Unlock()
		for _, s := range streams {
			s.cancel()
		}
	})
}

// serve reads frames until the connection fails or closes.
func (c *conn) serve() {
	defer c.srv.connDone(c)
	defer c.close(nil)
	defer c.awaitGoAway()
	o := &c.srv.opts

	_ = c.nc.SetDeadline(time.Now().Add(o.ConnectionTimeout))
	p := &peer.Peer{Addr: c.nc.RemoteAddr(), LocalAddr: c.nc.LocalAddr()}
	if tc, isTLS := c.nc.(*tls.Conn); isTLS {
		if err := tc.Handshake(); err != nil {
			return
		}
		p.AuthInfo = credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	c.ctx = peer.NewContext(background, p)

	br := bufio.NewReaderSize(c.nc, o.ReadBufferSize)
	var pre [len(clientPreface)]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || string(pre[:]) != clientPreface {
		return
	}
	fr := http2.NewFramer(nil, br)
	fr.SetReuseFrames()
	c.hdec = hpack.NewDecoder(4096, c.emitField)
	c.hdec.SetMaxStringLength(maxHeaderList)

	var settings []http2.Setting
	if o.MaxConcurrentStreams > 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: o.MaxConcurrentStreams})
	}
	if o.InitialWindowSize != defaultWindow {
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(o.InitialWindowSize)})
	}
	c.enqueue(item{kind: kSettings, settings: settings, incr: uint32(o.InitialConnWindowSize - defaultWindow)})

	// The client's first frame must be SETTINGS, within the timeout.
	f, err := fr.ReadFrame()
	if err != nil {
		return
	}
	sf, isSettings := f.(*http2.SettingsFrame)
	if !isSettings || sf.IsAck() {
		c.goAway(http2.ErrCodeProtocol, "the first frame was not SETTINGS")
		return
	}
	_ = c.nc.SetDeadline(time.Time{})
	if !c.onSettings(sf) {
		return
	}
	if o.MaxConnectionIdle > 0 {
		c.mu.Lock()
		c.idleAt = time.Now()
		c.idle = time.AfterFunc(o.MaxConnectionIdle, c.checkIdle)
		c.mu.Unlock()
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.goAway(http2.ErrCode(ce), err.Error())
			}
			return
		}
		if !c.onFrame(f) {
			return
		}
	}
}

func (c *conn) onFrame(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		if f.HeadersEnded() {
			// The block whole in one frame: decoded from the framer's
			// buffer.
			return c.onBlock(f.StreamID, f.StreamEnded(), f.HeaderBlockFragment())
		}
		c.hblk = append(c.hblk[:0], f.HeaderBlockFragment()...)
		c.hblkID, c.hblkEnd = f.StreamID, f.StreamEnded()
	case *http2.ContinuationFrame: // the Framer checks that they follow their HEADERS
		c.hblk = append(c.hblk, f.HeaderBlockFragment()...)
		if len(c.hblk) > 2*maxHeaderList {
			// As x/net's Framer: a block far over the bound closes the
			// connection.
			c.goAway(http2.ErrCodeProtocol, http2.ConnectionError(http2.ErrCodeProtocol).Error())
			return false
		}
		if f.HeadersEnded() {
			return c.onBlock(c.hblkID, c.hblkEnd, c.hblk)
		}
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return true
		}
		return c.onSettings(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		s := c.streams[f.StreamID]
		c.mu.Unlock()
		if s != nil {
			s.reset()
		}
	case *http2.GoAwayFrame:
		// The client leaves; it closes the connection when its calls end.
	}
	return true
}

// maxHeaderList bounds a header block's fields (their HPACK sizes, as
// SETTINGS_MAX_HEADER_LIST_SIZE counts): the fields beyond it are dropped.
const maxHeaderList = 16 << 20

// onBlock decodes a whole header block (HPACK's state needs every block,
// also a refused stream's) into c.fields, with the checks x/net's Framer
// makes of a MetaHeadersFrame (its ReadMetaHeaders), which allocates a
// frame and its fields for every block: a field that is invalid or a
// pseudo-header that is unknown, repeated, after a regular field or
// mixing request and response resets the stream (PROTOCOL_ERROR); a block
// that does not decode closes the connection (COMPRESSION_ERROR).
func (c *conn) onBlock(id uint32, ended bool, block []byte) bool {
	c.fields, c.hdrRemain, c.hdrInvalid, c.sawRegular = c.fields[:0], maxHeaderList, nil, false
	c.hdec.SetEmitEnabled(true)
	_, err := c.hdec.Write(block)
	if err == nil {
		err = c.hdec.Close()
	}
	if err != nil {
		c.goAway(http2.ErrCodeCompression, http2.ConnectionError(http2.ErrCodeCompression).Error())
		return false
	}
	if c.hdrInvalid == nil {
		c.hdrInvalid = checkPseudos(c.fields)
	}
	if c.hdrInvalid != nil {
		c.resetStream(id, http2.ErrCodeProtocol)
		return true
	}
	return c.onHeaders(id, ended, c.fields)
}

// emitField is the HPACK decoder's output (onBlock).
func (c *conn) emitField(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		c.hdrInvalid = fmt.Errorf("invalid header field value for %q", hf.Name)
	}
	if strings.HasPrefix(hf.Name, ":") {
		if c.sawRegular {
			c.hdrInvalid = errors.New("pseudo header field after regular")
		}
	} else {
		c.sawRegular = true
		if !validWireHeaderFieldName(hf.Name) {
			c.hdrInvalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if c.hdrInvalid != nil {
		c.hdec.SetEmitEnabled(false)
		return
	}
	size := hf.Size()
	if size > c.hdrRemain {
		c.hdec.SetEmitEnabled(false)
		c.hdrRemain = 0
		return
	}
	c.hdrRemain -= size
	c.fields = append(c.fields, hf)
}

// validWireHeaderFieldName is x/net's: a token, in lower case.
func validWireHeaderFieldName(v string) bool {
	if len(v) == 0 {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || ('A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// checkPseudos is x/net's MetaHeadersFrame.checkPseudos: known
// pseudo-headers, each once, of a request or of a response.
func checkPseudos(fields []hpack.HeaderField) error {
	var isRequest, isResponse bool
	for i, hf := range fields {
		if !strings.HasPrefix(hf.Name, ":") {
			break // pseudo-headers come first (emitField)
		}
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			isRequest = true
		case ":status":
			isResponse = true
		default:
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, hf2 := range fields[:i] {
			if hf.Name == hf2.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	if isRequest && isResponse {
		return errors.New("mix of request and response pseudo headers")
	}
	return nil
}

func (c *conn) onSettings(f *http2.SettingsFrame) bool {
	it := item{kind: kSettingsAck}
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			if s.Val > 1<<31-1 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			delta := int64(s.Val) - int64(c.peerWindow.Swap(int32(s.Val)))
			c.mu.Lock()
			for _, st := range c.streams {
				st.sendWin.Add(delta)
			}
			c.mu.Unlock()
		case http2.SettingMaxFrameSize:
			it.maxFrame = s.Val
		case http2.SettingHeaderTableSize:
			it.tableSize, it.hasTable = s.Val, true
		}
		return nil
	})
	if err != nil {
		c.goAway(http2.ErrCodeFlowControl, "bad initial window size")
		return false
	}
	c.enqueue(it)
	return true
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) bool {
	if f.StreamID == 0 {
		c.sendWin.Add(int64(f.Increment))
	} else {
		c.mu.Lock()
		s := c.streams[f.StreamID]
		c.mu.Unlock()
		if s == nil {
			return true
		}
		s.sendWin.Add(int64(f.Increment))
	}
	c.enqueue(item{kind: kKick})
	return true
}

func (c *conn) onPing(f *http2.PingFrame) bool {
	if f.IsAck() {
		return true
	}
	c.enqueue(item{kind: kPingAck, ping: f.Data})
	now := time.Now()
	defer func() { c.lastPing = now }()
	if c.wrote.Swap(false) {
		c.pingStrikes = 0
		return true
	}
	c.mu.Lock()
	n := c.active
	c.mu.Unlock()
	o := &c.srv.opts
	if n < 1 && !o.PermitWithoutStream {
		if c.lastPing.Add(defaultPingTimeout).After(now) {
			c.pingStrikes++
		}
	} else if c.lastPing.Add(o.KeepaliveMinTime).After(now) {
		c.pingStrikes++
	}
	if c.pingStrikes > maxPingStrikes {
		c.goAway(http2.ErrCodeEnhanceYourCalm, "too_many_pings")
		return false
	}
	return true
}

// onHeaders opens a call, or half-closes one (a client's trailers):
// stream id's header block, decoded into fields (the reader's, reused for
// the next block); ended is END_STREAM.
func (c *conn) onHeaders(id uint32, ended bool, fields []hpack.HeaderField) bool {
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		c.mu.Unlock()
		if ended {
			s.endRecv()
		}
		return true
	}
	if id%2 == 0 {
		c.mu.Unlock()
		c.goAway(http2.ErrCodeProtocol, "bad stream id")
		return false
	}
	if id <= c.lastID {
		// A stream this side already ended (trailers after our answer).
		c.mu.Unlock()
		return true
	}
	c.lastID = id
	o := &c.srv.opts
	if c.draining || (o.MaxConcurrentStreams > 0 && uint32(c.active) >= o.MaxConcurrentStreams) {
		c.mu.Unlock()
		c.enqueue(item{kind: kRST, sid: id, code: http2.ErrCodeRefusedStream})
		return true
	}
	c.mu.Unlock()

	var path, method, ctype, enc, timeout string
	// The call's metadata, kept as fields (binary values decoded): the
	// map a handler's context holds is built from them only when a
	// context is (stream.metadata).
	var md []hpack.HeaderField
	for _, hf := range fields {
		switch hf.Name {
		case ":path":
			path = hf.Value
		case ":method":
			method = hf.Value
		case "content-type":
			ctype = hf.Value
			md = appendField(md, hf, len(fields))
		case "grpc-encoding":
			enc = hf.Value
		case "grpc-timeout":
			timeout = hf.Value
		case "te", "grpc-accept-encoding", "grpc-message-type", "grpc-status", "grpc-message", "grpc-status-details-bin", "connection":
		default:
			if len(hf.Name) > 0 && hf.Name[0] == ':' {
				continue
			}
			if isBinKey(hf.Name) {
				b, err := decodeBin(hf.Value)
				if err != nil {
					c.refuse(id, ended, 200, status.Newf(codes.Internal, "malformed binary metadata %q in header %q: %v", hf.Value, hf.Name, err))
					return true
				}
				hf.Value = string(b)
			}
			md = appendField(md, hf, len(fields))
		}
	}
	if method != "POST" {
		c.enqueue(item{kind: kRST, sid: id, code: http2.ErrCodeProtocol})
		return true
	}
	if !isGRPCContentType(ctype) {
		c.refuse(id, ended, 415, status.Newf(codes.InvalidArgument, "invalid gRPC request content-type %q", ctype))
		return true
	}
	if enc != "" && enc != "identity" {
		c.refuse(id, ended, 200, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", enc))
		return true
	}
	svc, umd, sd, errMsg := c.srv.method(path)
	if errMsg != "" {
		c.refuse(id, ended, 200, status.New(codes.Unimplemented, errMsg))
		return true
	}
	var deadline time.Time
	if timeout != "" {
		if d, err := parseTimeout(timeout); err == nil {
			deadline = time.Now().Add(d)
		}
	}
	s := newStream(c, id, path, md, deadline)
	s.svc, s.umd, s.sd = svc, umd, sd
	if sd != nil {
		// Only a streaming call waits for messages or for its sends.
		s.notify, s.sendOK = make(chan struct{}, 1), make(chan struct{}, 1)
	}
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		c.enqueue(item{kind: kRST, sid: id, code: http2.ErrCodeRefusedStream})
		return true
	}
	c.streams[id] = s
	c.active++
	c.mu.Unlock()
	if ended {
		s.endRecv()
	}
	if sd != nil {
		s.dispatch()
	}
	return true
}

// appendField appends hf to md, which it makes with room for n fields
// the first time.
func appendField(md []hpack.HeaderField, hf hpack.HeaderField, n int) []hpack.HeaderField {
	if md == nil {
		md = make([]hpack.HeaderField, 0, n)
	}
	return append(md, hf)
}

// refuse answers a call that is not served with st alone (no handler).
func (c *conn) refuse(id uint32, ended bool, httpStatus int, st *status.Status) {
	c.enqueue(item{kind: kWrite, sid: id, trl: trailersOnly(httpStatus, st, nil), rst: !ended})
}

func (c *conn) onData(f *http2.DataFrame) bool {
	n := int32(f.Length)
	if n > 0 {
		c.recvUnacked += n
		if c.recvUnacked >= c.srv.opts.InitialConnWindowSize/4 {
			c.enqueue(item{kind: kWindow, sid: 0, incr: uint32(c.recvUnacked)})
			c.recvUnacked = 0
		}
	}
	c.mu.Lock()
	s := c.streams[f.StreamID]
	c.mu.Unlock()
	if s == nil || s.recvDone {
		return true
	}
	s.feed(f.Data())
	if n > 0 && !f.StreamEnded() {
		s.mu.Lock()
		s.recvUnacked += n
		incr := s.grantLocked(c.srv.opts.InitialWindowSize)
		s.mu.Unlock()
		if incr > 0 {
			c.enqueue(item{kind: kWindow, sid: f.StreamID, incr: uint32(incr)})
		}
	}
	if f.StreamEnded() {
		s.endRecv()
	}
	return true
}

// resetStream answers a stream-level protocol error.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()
	if s != nil {
		s.reset()
	}
	c.enqueue(item{kind: kRST, sid: id, code: code})
}

// goAway sends GOAWAY with code and closes the connection once it is
// written.
func (c *conn) goAway(code http2.ErrCode, debug string) {
	c.mu.Lock()
	last := c.lastID
	c.draining = true
	c.mu.Unlock()
	c.goingAway.Store(true)
	c.enqueue(item{kind: kGoAway, sid: last, code: code, debug: debug, closeAfter: true})
}

// awaitGoAway lets the writer send a GOAWAY the reader queued before the
// connection closes (for a second at most).
func (c *conn) awaitGoAway() {
	if !c.goingAway.Load() {
		return
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
}

// shutdown sends GOAWAY (no error) and closes the connection when its
// running calls end. Called with the server's mutex held.
func (c *conn) shutdown() {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	last, n := c.lastID, c.active
	c.mu.Unlock()
	c.enqueue(item{kind: kGoAway, sid: last, code: http2.ErrCodeNo, closeAfter: n == 0})
}

// checkIdle closes a connection without calls for MaxConnectionIdle.
func (c *conn) checkIdle() {
	idle := c.srv.opts.MaxConnectionIdle
	c.mu.Lock()
	n, since := c.active, time.Since(c.idleAt)
	if n > 0 || since < idle {
		wait := idle
		if n == 0 {
			wait = idle - since
		}
		c.idle.Reset(wait)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.drainIdle()
}

func (c *conn) drainIdle() {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	last := c.lastID
	c.mu.Unlock()
	c.enqueue(item{kind: kGoAway, sid: last, code: http2.ErrCodeNo, debug: "max_idle", closeAfter: true})
}

// finish counts s out of the running calls and queues its answer it
// (if any): inline, when s was the connection's only call and the caller
// may write (a handler, not the reader). A draining connection closes
// after its last call.
func (c *conn) finish(s *stream, it *item, mayInline bool) {
	c.mu.Lock()
	if s.finished {
		c.mu.Unlock()
		return
	}
	s.finished = true
	c.active--
	n := c.active
	if n == 0 && c.srv.opts.MaxConnectionIdle > 0 {
		c.idleAt = time.Now()
	}
	closeNow := n == 0 && c.draining
	c.mu.Unlock()
	if it != nil {
		c.push(*it, mayInline && n == 0)
	}
	if closeNow {
		c.enqueue(item{kind: kClose})
	}
}

func isGRPCContentType(ct string) bool {
	const base = "application/grpc"
	if len(ct) < len(base) || ct[:len(base)] != base {
		return false
	}
	return len(ct) == len(base) || ct[len(base)] == '+' || ct[len(base)] == ';'
}

// parseTimeout reads grpc-timeout ("<digits><unit>").
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("bad timeout %q", v)
	}
	var n int64
	for _, ch := range v[:len(v)-1] {
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("bad timeout %q", v)
		}
		n = n*10 + int64(ch-'0')
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("bad timeout unit in %q", v)
	}
	const maxHours = int64(1<<63-1) / int64(time.Hour)
	if unit == time.Hour && n > maxHours {
		return 1<<63 - 1, nil
	}
	return time.Duration(n) * unit, nil
}

// forget drops s from the connection's streams once the writer wrote its
// end (or dropped it): WINDOW_UPDATEs reach it until then.
func (c *conn) forget(s *stream) {
	c.mu.Lock()
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	c.mu.Unlock()
}
