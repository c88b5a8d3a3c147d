package h2

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// sendQuota is how many bytes of a stream's messages may wait for the
// writer before SendMsg blocks (grpc-go's default write quota).
const sendQuota = 64 << 10

// stream is one call.
type stream struct {
	c        *conn
	id       uint32
	method   string
	md       []hpack.HeaderField // the call's metadata (binary values decoded)
	deadline time.Time           // from grpc-timeout; zero: none
	svc      *service
	umd      *grpc.MethodDesc
	sd       *grpc.StreamDesc

	// The handler's context, made by start (a call Options.Inline takes
	// has none: it gets ictx). ctx is read by the handler's goroutine
	// only; cancelFn and canceled are under mu.
	ctx      context.Context
	cancelFn context.CancelFunc
	canceled bool
	ictx     inlineCtx
	mdctx    context.Context // ictx's metadata, made on its first lookup (under mu)

	// Reader side (the reader goroutine only).
	pfx        [5]byte
	pfxN       int
	msg        []byte // message being assembled (after its prefix)
	inMsg      bool
	dispatched bool
	recvDone   bool // receiving failed: later DATA is dropped

	// Received messages, for the handler.
	mu          sync.Mutex
	msgs        [][]byte
	msgs1       [1][]byte // msgs' first backing array (a unary call's one message)
	unread      int32     // bytes of msgs
	recvUnacked int32     // bytes received and not yet granted back (WINDOW_UPDATE)
	eof         bool      // END_STREAM received
	rerr        error     // a receive failure (status error)
	notify      chan struct{}
	hdr         metadata.MD // headers set, not sent
	trl         metadata.MD
	hdrSent     bool
	closed      bool // answered

	finished bool // counted out of the connection's active calls (conn.mu)

	// Send side: bytes queued for the writer, and the wait for them.
	queued  atomic.Int64
	sendOK  chan struct{}
	sendWin atomic.Int64 // the peer's window for this stream

	// Writer-only state.
	wpending  []item
	inBlocked bool
	wdead     bool
}

func newStream(c *conn, id uint32, method string, md []hpack.HeaderField, deadline time.Time) *stream {
	s := &stream{c: c, id: id, method: method, md: md, deadline: deadline}
	s.msgs = s.msgs1[:0]
	s.sendWin.Store(int64(c.peerWindow.Load()))
	s.ictx.s = s
	return s
}

// start makes the handler's context (the peer, the deadline, the
// metadata, s as its grpc.ServerTransportStream), before the handler
// runs; a call cancelled before is cancelled at once.
func (s *stream) start() {
	ctx := s.c.ctx
	var cancel context.CancelFunc
	if s.deadline.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadline(ctx, s.deadline)
	}
	ctx = metadata.NewIncomingContext(ctx, s.metadata())
	s.ctx = grpc.NewContextWithServerTransportStream(ctx, s)
	s.mu.Lock()
	s.cancelFn = cancel
	canceled := s.canceled
	s.mu.Unlock()
	if canceled {
		cancel()
	}
}

// cancel cancels the handler's context, now or when start makes it.
func (s *stream) cancel() {
	s.mu.Lock()
	s.canceled = true
	fn := s.cancelFn
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// metadata is the call's metadata as a handler's context holds it.
func (s *stream) metadata() metadata.MD {
	md := make(metadata.MD, len(s.md))
	// One backing array for the values: a key's first value is a slice
	// of it (capacity 1, so a second value copies).
	vals := make([]string, 0, len(s.md))
	for _, hf := range s.md {
		if prev, dup := md[hf.Name]; dup {
			md[hf.Name] = append(prev, hf.Value)
			continue
		}
		vals = append(vals, hf.Value)
		md[hf.Name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return md
}

// inlineCtx is the context Options.Inline gets: the connection's (the
// peer), and the call's metadata, made on the first lookup the
// connection's context does not answer; no deadline, never done.
type inlineCtx struct{ s *stream }

func (x *inlineCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (x *inlineCtx) Done() <-chan struct{}       { return nil }
func (x *inlineCtx) Err() error                  { return nil }

func (x *inlineCtx) Value(key any) any {
	s := x.s
	if v := s.c.ctx.Value(key); v != nil {
		return v
	}
	s.mu.Lock()
	if s.mdctx == nil {
		s.mdctx = metadata.NewIncomingContext(background, s.metadata())
	}
	mdctx := s.mdctx
	s.mu.Unlock()
	return mdctx.Value(key)
}

// feed takes a DATA frame's payload (copied: the framer reuses it).
func (s *stream) feed(p []byte) {
	max := s.c.srv.opts.MaxRecvMsgSize
	for len(p) > 0 {
		if !s.inMsg {
			n := copy(s.pfx[s.pfxN:], p)
			s.pfxN += n
			p = p[n:]
			if s.pfxN < 5 {
				return
			}
			s.pfxN = 0
			if s.pfx[0] != 0 {
				s.fail(status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding"))
				return
			}
			size := int(binary.BigEndian.Uint32(s.pfx[1:]))
			if size > max {
				s.fail(status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, max))
				return
			}
			s.msg = make([]byte, 0, size)
			s.inMsg = true
		}
		n := min(cap(s.msg)-len(s.msg), len(p))
		s.msg = append(s.msg, p[:n]...)
		p = p[n:]
		if len(s.msg) == cap(s.msg) {
			s.inMsg = false
			s.deliver(s.msg)
			s.msg = nil
		}
	}
}

func (s *stream) deliver(m []byte) {
	s.mu.Lock()
	if s.rerr == nil {
		s.msgs = append(s.msgs, m)
		s.unread += int32(len(m))
	}
	s.mu.Unlock()
	s.wakeRecv()
	if !s.dispatched {
		s.dispatch()
	}
}

func (s *stream) wakeRecv() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// endRecv marks the client's half-close.
func (s *stream) endRecv() {
	s.mu.Lock()
	if s.inMsg || s.pfxN > 0 {
		if s.rerr == nil {
			s.rerr = status.Error(codes.Internal, "grpc: the client ended the stream within a message")
		}
	}
	s.eof = true
	s.mu.Unlock()
	s.wakeRecv()
	if !s.dispatched {
		s.dispatch()
	}
}

// fail ends receiving with st: a call not started yet is answered with
// it at once; a running one sees it from RecvMsg.
func (s *stream) fail(st *status.Status) {
	s.inMsg, s.msg, s.recvDone = false, nil, true
	if !s.dispatched {
		s.dispatched = true
		s.answer(st, true)
		return
	}
	s.mu.Lock()
	if s.rerr == nil {
		s.rerr = st.Err()
	}
	s.mu.Unlock()
	s.wakeRecv()
}

// grantLocked returns how much of the stream's window to give back now:
// the bytes received since the last grant once they are a quarter of
// the window, unless the handler has a window's worth of messages unread
// (then RecvMsg gives it back as it reads), so that a client cannot
// queue more than that ahead of a slow handler.
func (s *stream) grantLocked(window int32) int32 {
	if s.recvUnacked < window/4 || s.unread >= window {
		return 0
	}
	incr := s.recvUnacked
	s.recvUnacked = 0
	return incr
}

// reset is the client's RST_STREAM: the call's context is cancelled and
// what it still has queued is dropped.
func (s *stream) reset() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.c.enqueue(item{kind: kDrop, st: s})
	s.c.finish(s, nil, false)
}

// dispatch starts the handler on the pool, unless Options.Inline takes
// the call (a unary call's one request, on the reader goroutine).
func (s *stream) dispatch() {
	s.dispatched = true
	if in := s.c.srv.opts.Inline; in != nil && s.umd != nil && s.rerr == nil && len(s.msgs) == 1 &&
		in(&s.ictx, s.method, s.msgs[0], s.replyMsg) {
		return
	}
	s.start()
	s.c.srv.pool.run(s)
}

// run is the call, on a pool goroutine.
func (s *stream) run() {
	if s.umd != nil {
		s.runUnary()
	} else {
		s.runStream()
	}
}

func (s *stream) runUnary() {
	resp, err := s.umd.Handler(s.svc.impl, s.ctx, s.decUnary, nil)
	s.reply(resp, err)
}

func (s *stream) replyMsg(m any, err error) { s.reply(m, err) }

// reply answers a unary call with its handler's (or Options.Inline's)
// result.
func (s *stream) reply(resp any, err error) {
	if err != nil {
		s.answer(errStatus(err), false)
		return
	}
	buf, err := marshal(resp)
	if err != nil {
		s.answer(status.Newf(codes.Internal, "grpc: error while marshaling: %v", err), false)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		putBuf(buf)
		return
	}
	s.closed = true
	var hdr []hpack.HeaderField
	if !s.hdrSent {
		s.hdrSent = true
		hdr = responseHeaders(s.hdr)
	}
	trl := trailers(statusOK, s.trl)
	rst := !s.eof
	s.mu.Unlock()
	s.queued.Add(int64(len(*buf)))
	s.cancel()
	s.c.finish(s, &item{kind: kWrite, sid: s.id, st: s, hdr: hdr, data: *buf, buf: buf, trl: trl, rst: rst}, true)
}

func (s *stream) decUnary(m any) error {
	s.mu.Lock()
	var b []byte
	if len(s.msgs) > 0 {
		b = s.msgs[0]
		s.msgs = s.msgs[1:]
	}
	rerr := s.rerr
	s.mu.Unlock()
	if b == nil {
		if rerr != nil {
			return rerr
		}
		return status.Error(codes.Internal, "grpc: the client sent no request message")
	}
	return unmarshal(b, m)
}

func (s *stream) runStream() {
	err := s.sd.Handler(s.svc.impl, &serverStream{s})
	if err != nil {
		s.answer(errStatus(err), false)
		return
	}
	s.answer(statusOK, false)
}

// statusOK is a call's plain OK status (read-only, shared).
var statusOK = status.New(codes.OK, "")

// answer ends the call with st: the trailers (with the headers first
// when none went yet).
func (s *stream) answer(st *status.Status, fromReader bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	rst := !s.eof
	var trl []hpack.HeaderField
	if s.hdrSent {
		trl = trailers(st, s.trl)
	} else {
		s.hdrSent = true
		trl = trailersOnly(200, st, s.hdr)
		// The call's metadata set by SetTrailer goes too.
		trl = appendMD(trl, s.trl)
	}
	s.mu.Unlock()
	s.cancel()
	s.c.finish(s, &item{kind: kWrite, sid: s.id, st: s, trl: trl, rst: rst}, !fromReader)
}

// send queues one message (with the headers first when they have not
// gone), waiting while too much of this stream's data waits.
func (s *stream) send(m any) error {
	for s.queued.Load() >= sendQuota {
		select {
		case <-s.sendOK:
		case <-s.ctx.Done():
			return status.FromContextError(s.ctx.Err()).Err()
		}
	}
	buf, err := marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if len(*buf)-5 > defaultMaxSendMsgSize {
		putBuf(buf)
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", len(*buf)-5, defaultMaxSendMsgSize)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		putBuf(buf)
		if err := s.ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		return status.Error(codes.Internal, "grpc: the stream is done")
	}
	var hdr []hpack.HeaderField
	if !s.hdrSent {
		s.hdrSent = true
		hdr = responseHeaders(s.hdr)
	}
	s.mu.Unlock()
	s.queued.Add(int64(len(*buf)))
	s.c.enqueue(item{kind: kWrite, sid: s.id, st: s, hdr: hdr, data: *buf, buf: buf})
	return nil
}

// sent is the writer's note that n bytes of s went out.
func (s *stream) sent(n int) {
	if q := s.queued.Add(-int64(n)); q < sendQuota && q+int64(n) >= sendQuota {
		select {
		case s.sendOK <- struct{}{}:
		default:
		}
	}
}

func (s *stream) recv(m any) error {
	for {
		s.mu.Lock()
		if len(s.msgs) > 0 {
			b := s.msgs[0]
			s.msgs[0] = nil
			s.msgs = s.msgs[1:]
			s.unread -= int32(len(b))
			incr := int32(0)
			if !s.eof {
				incr = s.grantLocked(s.c.srv.opts.InitialWindowSize)
			}
			s.mu.Unlock()
			if incr > 0 {
				s.c.enqueue(item{kind: kWindow, sid: s.id, incr: uint32(incr)})
			}
			return unmarshal(b, m)
		}
		rerr, eof := s.rerr, s.eof
		s.mu.Unlock()
		if rerr != nil {
			return rerr
		}
		if eof {
			return io.EOF
		}
		select {
		case <-s.notify:
		case <-s.ctx.Done():
			return status.FromContextError(s.ctx.Err()).Err()
		}
	}
}

// Method, SetHeader, SendHeader and SetTrailer make s the call's
// grpc.ServerTransportStream (grpc.SetHeader and friends).
func (s *stream) Method() string { return s.method }

func (s *stream) SetHeader(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hdrSent || s.closed {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.hdr = metadata.Join(s.hdr, md)
	return nil
}

func (s *stream) SendHeader(md metadata.MD) error {
	s.mu.Lock()
	if s.hdrSent || s.closed {
		s.mu.Unlock()
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.hdrSent = true
	hdr := responseHeaders(metadata.Join(s.hdr, md))
	s.mu.Unlock()
	s.c.enqueue(item{kind: kWrite, sid: s.id, st: s, hdr: hdr})
	return nil
}

func (s *stream) SetTrailer(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return status.Error(codes.Internal, "transport: the stream is done")
	}
	s.trl = metadata.Join(s.trl, md)
	return nil
}

// serverStream is a streaming call's grpc.ServerStream.
type serverStream struct{ s *stream }

func (ss *serverStream) SetHeader(md metadata.MD) error  { return ss.s.SetHeader(md) }
func (ss *serverStream) SendHeader(md metadata.MD) error { return ss.s.SendHeader(md) }
func (ss *serverStream) SetTrailer(md metadata.MD)       { _ = ss.s.SetTrailer(md) }
func (ss *serverStream) Context() context.Context        { return ss.s.ctx }
func (ss *serverStream) SendMsg(m any) error             { return ss.s.send(m) }
func (ss *serverStream) RecvMsg(m any) error             { return ss.s.recv(m) }

// defaultMaxSendMsgSize is grpc-go's bound on a sent message.
const defaultMaxSendMsgSize = 1<<31 - 1

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// Encoded is a message that encodes itself: Options.Inline's reply takes
// one instead of a proto.Message (a response built without the generic
// protobuf path). AppendProto appends its protobuf encoding to b.
type Encoded interface {
	AppendProto(b []byte) []byte
}

// marshal encodes m (a proto.Message or Encoded) after a 5-byte gRPC
// message prefix.
func marshal(m any) (*[]byte, error) {
	var pm proto.Message
	switch m := m.(type) {
	case proto.Message:
		pm = m
	case Encoded:
		bp := bufPool.Get().(*[]byte)
		b := m.AppendProto(append((*bp)[:0], 0, 0, 0, 0, 0))
		binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
		*bp = b
		return bp, nil
	default:
		return nil, fmt.Errorf("message is %T, not a proto.Message", m)
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], 0, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, pm)
	if err != nil {
		putBuf(bp)
		return nil, err
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	*bp = b
	return bp, nil
}

func unmarshal(b []byte, m any) error {
	pm, isProto := m.(proto.Message)
	if !isProto {
		return status.Errorf(codes.Internal, "grpc: message is %T, not a proto.Message", m)
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// errStatus is a handler's error as a status, as grpc-go reads it.
func errStatus(err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}

var (
	hfStatus200   = hpack.HeaderField{Name: ":status", Value: "200"}
	hfContentType = hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	hfGRPCStatus0 = hpack.HeaderField{Name: "grpc-status", Value: "0"}
)

func responseHeaders(md metadata.MD) []hpack.HeaderField {
	if len(md) == 0 {
		return okHeaders
	}
	return appendMD([]hpack.HeaderField{hfStatus200, hfContentType}, md)
}

var okHeaders = []hpack.HeaderField{hfStatus200, hfContentType}

var okTrailers = []hpack.HeaderField{hfGRPCStatus0}

// trailers are the call's closing fields.
func trailers(st *status.Status, md metadata.MD) []hpack.HeaderField {
	if st.Code() == codes.OK && st.Message() == "" && len(md) == 0 {
		return okTrailers
	}
	f := make([]hpack.HeaderField, 0, 3+len(md))
	return appendMD(appendStatus(f, st), md)
}

// trailersOnly is an answer without messages: one HEADERS frame.
func trailersOnly(httpStatus int, st *status.Status, md metadata.MD) []hpack.HeaderField {
	f := make([]hpack.HeaderField, 0, 5+len(md))
	f = append(f, hpack.HeaderField{Name: ":status", Value: strconv.Itoa(httpStatus)}, hfContentType)
	f = appendMD(f, md)
	return appendStatus(f, st)
}

func appendStatus(f []hpack.HeaderField, st *status.Status) []hpack.HeaderField {
	f = append(f, hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))})
	if m := st.Message(); m != "" {
		f = append(f, hpack.HeaderField{Name: "grpc-message", Value: encodeGrpcMessage(m)})
	}
	if p := st.Proto(); p != nil && len(p.Details) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			f = append(f, hpack.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(b)})
		}
	}
	return f
}

// appendMD adds md's entries (binary ones base64), leaving out reserved
// and pseudo headers.
func appendMD(f []hpack.HeaderField, md metadata.MD) []hpack.HeaderField {
	for k, vs := range md {
		if isReserved(k) {
			continue
		}
		for _, v := range vs {
			if isBinKey(k) {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			f = append(f, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return f
}

func isReserved(k string) bool {
	if strings.HasPrefix(k, ":") {
		return true
	}
	switch k {
	case "content-type", "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status", "grpc-timeout", "grpc-status-details-bin", "te":
		return true
	}
	return false
}

func isBinKey(k string) bool { return strings.HasSuffix(k, "-bin") }

func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// encodeGrpcMessage percent-encodes what is not printable ASCII, and '%'.
func encodeGrpcMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
