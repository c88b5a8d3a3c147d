package h2

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// clientStream is one call: a unary Invoke's (desc nil) or a stream's,
// which is then also its grpc.ClientStream.
type clientStream struct {
	c       *ClientConn
	id      uint32
	ctx     context.Context
	method  string
	desc    *grpc.StreamDesc
	opts    clientCallOpts
	sendWin int64 // under c.mu
	sentEnd atomic.Bool
	pending atomic.Bool // a server stream's HEADERS wait for its one SendMsg

	mu      sync.Mutex
	stop    func() bool // the context watch of a stream
	buf     []byte      // received DATA not yet consumed, from off
	off     int
	unacked uint32 // DATA bytes received and not yet credited back
	hdr     []hpack.HeaderField
	gotHdr  bool
	trl     []hpack.HeaderField
	st      *status.Status // the call's end, once known
	done    chan struct{}  // closed with st
	hdrCh   chan struct{}  // streams: closed on the response headers or the end
	notify  chan struct{}  // streams: a message may be there
}

// clientCallOpts are the call options this client honours.
type clientCallOpts struct {
	hdr, trl *metadata.MD
	maxRecv  int
}

func (c *ClientConn) callOpts(opts []grpc.CallOption) clientCallOpts {
	co := clientCallOpts{maxRecv: c.opts.MaxRecvMsgSize}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			co.hdr = o.HeaderAddr
		case grpc.TrailerCallOption:
			co.trl = o.TrailerAddr
		case grpc.MaxRecvMsgSizeCallOption:
			co.maxRecv = o.MaxRecvMsgSize
		}
	}
	return co
}

// ended reports whether s has its final status.
func (s *clientStream) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st != nil
}

// finish gives s its final status (the first one wins) and wakes its
// waiters.
func (s *clientStream) finish(st *status.Status, trl []hpack.HeaderField) {
	s.mu.Lock()
	if s.st != nil {
		s.mu.Unlock()
		return
	}
	s.st = st
	if trl != nil {
		s.trl = trl
	}
	close(s.done)
	if s.hdrCh != nil && !s.gotHdr {
		s.gotHdr = true
		close(s.hdrCh)
	}
	stop := s.stop
	s.mu.Unlock()
	if s.notify != nil {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
	if stop != nil {
		stop()
	}
}

// clientReserved are the headers a call's metadata may not set.
var clientReserved = map[string]bool{"content-type": true, "user-agent": true, "te": true, "grpc-timeout": true,
	"grpc-encoding": true, "grpc-message": true, "grpc-status": true, "grpc-status-details-bin": true,
	"grpc-message-type": true, "grpc-accept-encoding": true}

// clientHeaderCache is the last header block, valid while the HPACK
// encoder's dynamic table is as it was when the block was made.
type clientHeaderCache struct {
	ok     bool
	method string
	ctx    context.Context
	block  []byte
}

// headerBlock is s's request header block; under wmu. A call without a
// deadline, with the method and context of the one before, reuses that
// call's block when it was all indexed fields (one byte each): encoding
// it changed nothing in the dynamic table, so the same fields encode to
// the same bytes. Any block that adds to the table ends the reuse.
func (c *ClientConn) headerBlock(s *clientStream) []byte {
	_, hasDeadline := s.ctx.Deadline()
	comparable := reflect.TypeOf(s.ctx).Comparable()
	h := &c.hcache
	if h.ok && !hasDeadline && comparable && h.ctx == s.ctx && h.method == s.method {
		return h.block
	}
	c.hbuf.b = c.hbuf.b[:0]
	c.encodeHeaders(s)
	indexed := true
	for _, b := range c.hbuf.b {
		if b&0x80 == 0 {
			indexed = false
			break
		}
	}
	switch {
	case !indexed:
		h.ok, h.ctx = false, nil
	case !hasDeadline && comparable:
		h.ok, h.method, h.ctx, h.block = true, s.method, s.ctx, append(h.block[:0], c.hbuf.b...)
	}
	return c.hbuf.b
}

// encodeHeaders HPACK-encodes s's request headers into c.hbuf; under wmu.
func (c *ClientConn) encodeHeaders(s *clientStream) {
	e := c.henc
	e.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	e.WriteField(hpack.HeaderField{Name: ":scheme", Value: c.scheme})
	e.WriteField(hpack.HeaderField{Name: ":path", Value: s.method})
	e.WriteField(hpack.HeaderField{Name: ":authority", Value: c.authority})
	e.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	e.WriteField(hpack.HeaderField{Name: "te", Value: "trailers"})
	if c.opts.UserAgent != "" {
		e.WriteField(hpack.HeaderField{Name: "user-agent", Value: c.opts.UserAgent})
	}
	if dl, ok := s.ctx.Deadline(); ok {
		e.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: clientTimeout(time.Until(dl))})
	}
	for _, f := range c.outgoingMD(s.ctx) {
		e.WriteField(f)
	}
}

// outgoingMD is ctx's outgoing metadata as header fields, kept for the
// next call with the same context (metadata.FromOutgoingContext copies
// the metadata each time); under wmu.
func (c *ClientConn) outgoingMD(ctx context.Context) []hpack.HeaderField {
	if reflect.TypeOf(ctx).Comparable() && ctx == c.mdCtx {
		return c.mdFields
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	fields := c.mdFields[:0] // only this goroutine, under wmu, reads them
	for k, vs := range md {
		if k == "" || k[0] == ':' || clientReserved[k] {
			continue
		}
		bin := isBinKey(k)
		for _, v := range vs {
			if bin {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			fields = append(fields, hpack.HeaderField{Name: k, Value: v})
		}
	}
	c.mdFields, c.mdCtx = fields, nil
	if reflect.TypeOf(ctx).Comparable() {
		c.mdCtx = ctx
	}
	return fields
}

// marshal encodes m after a 5-byte gRPC prefix into a pooled buffer.
func (c *ClientConn) marshal(m any) (*[]byte, []byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %T is not a proto.Message", m)
	}
	bp, _ := c.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := append((*bp)[:0], 0, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, pm)
	if err != nil {
		c.bufs.Put(bp)
		return nil, nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	clientPrefix(b)
	return bp, b, nil
}

func (c *ClientConn) putBuf(bp *[]byte, b []byte) {
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		c.bufs.Put(bp)
	}
}

// Invoke runs a unary call: HEADERS and the request's DATA with
// END_STREAM in one write (when the windows allow), then the answer.
func (c *ClientConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	rm, isProto := reply.(proto.Message)
	dm, isDecoder := reply.(Decoder)
	if !isProto && !isDecoder {
		return status.Errorf(codes.Internal, "grpc: error while unmarshaling: %T is not a proto.Message", reply)
	}
	bp, b, err := c.marshal(args)
	if err != nil {
		return err
	}
	s := &clientStream{c: c, ctx: ctx, method: method, opts: c.callOpts(opts), done: make(chan struct{})}
	if err := c.acquire(ctx); err != nil {
		c.putBuf(bp, b)
		return err
	}
	var soft error
	var rest []byte
	err = c.write(func() (err error) {
		if soft, err = c.startLocked(s, false); soft != nil || err != nil {
			return err
		}
		rest, err = c.dataLocked(s, b, true)
		if err == errClientStreamDone {
			rest, err = nil, nil
		}
		return err
	})
	if soft != nil {
		c.putBuf(bp, b)
		c.mu.Lock()
		c.releaseLocked()
		c.mu.Unlock()
		return soft
	}
	if err == nil && len(rest) > 0 {
		err = c.sendData(ctx, s, rest, true)
	}
	c.putBuf(bp, b)
	if err != nil && err != errClientStreamDone {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			c.reset(s, st, http2.ErrCodeCancel)
		} else {
			c.reset(s, status.New(codes.Unavailable, err.Error()), http2.ErrCodeCancel)
		}
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		st := status.FromContextError(ctx.Err())
		c.reset(s, st, http2.ErrCodeCancel)
		return st.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.hdr != nil {
		*s.opts.hdr = clientMD(s.hdr)
	}
	if s.opts.trl != nil {
		*s.opts.trl = clientMD(s.trl)
	}
	if s.st.Code() != codes.OK {
		return s.st.Err()
	}
	msg, err := s.nextLocked()
	if err != nil {
		return err
	}
	if msg == nil {
		return status.Error(codes.Internal, "grpc: the server answered OK without a message")
	}
	if s.off != len(s.buf) {
		return status.Error(codes.Internal, "grpc: the server answered a unary call with more than one message")
	}
	if isDecoder {
		err = dm.UnmarshalProto(msg)
	} else {
		err = proto.Unmarshal(msg, rm)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the response: %v", err)
	}
	return nil
}

// Decoder is a unary call's reply that decodes itself: Invoke takes one
// instead of a proto.Message (an answer read without the generic
// protobuf path). UnmarshalProto decodes b, the response's protobuf
// bytes, valid only during the call.
type Decoder interface {
	UnmarshalProto(b []byte) error
}

// nextLocked takes the next complete message out of s.buf; nil when
// none is complete. Under s.mu.
func (s *clientStream) nextLocked() ([]byte, error) {
	b := s.buf[s.off:]
	if len(b) < 5 {
		return nil, nil
	}
	n := binary.BigEndian.Uint32(b[1:5])
	if int64(n) > int64(s.opts.maxRecv) {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, s.opts.maxRecv)
	}
	if uint32(len(b)-5) < n {
		return nil, nil
	}
	if b[0]&1 != 0 {
		return nil, status.Error(codes.Internal, "grpc: a compressed message, and this client accepts none")
	}
	s.off += 5 + int(n)
	return b[5 : 5+n], nil
}

// creditLocked is the stream-level WINDOW_UPDATE increment due now: the
// received bytes, once a quarter window has gathered, unless more than a
// window of complete messages waits for the reader. Under s.mu.
func (s *clientStream) creditLocked() uint32 {
	w := s.c.opts.StreamWindow
	if s.unacked < w/4 {
		return 0
	}
	b := s.buf[s.off:]
	complete := len(b) >= 5 && uint32(len(b)-5) >= binary.BigEndian.Uint32(b[1:5])
	if len(b) > int(w) && complete {
		return 0
	}
	n := s.unacked
	s.unacked = 0
	return n
}

// NewStream opens a stream: HEADERS now, DATA with each SendMsg. A
// stream whose client sends one message (server streaming) sends its
// HEADERS, that message and END_STREAM in one write with SendMsg (or
// HEADERS alone with CloseSend), and takes its stream slot then.
func (c *ClientConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	s := &clientStream{c: c, ctx: ctx, method: method, desc: desc, opts: c.callOpts(opts), done: make(chan struct{}),
		hdrCh: make(chan struct{}), notify: make(chan struct{}, 1)}
	if !desc.ClientStreams {
		s.pending.Store(true)
		return s, nil
	}
	if err := s.begin(nil, false); err != nil {
		return nil, err
	}
	return s, nil
}

// begin takes a stream slot and sends s's HEADERS, then data (END_STREAM
// with it when end; nothing when data is nil and end false).
func (s *clientStream) begin(data []byte, end bool) error {
	c := s.c
	s.pending.Store(false)
	if err := c.acquire(s.ctx); err != nil {
		s.finish(status.Convert(err), nil)
		return err
	}
	var soft error
	var rest []byte
	err := c.write(func() (err error) {
		if soft, err = c.startLocked(s, false); soft != nil || err != nil {
			return err
		}
		if data != nil || end {
			rest, err = c.dataLocked(s, data, end)
			if err == errClientStreamDone {
				rest, err = nil, nil
			}
		}
		return err
	})
	if soft != nil {
		c.mu.Lock()
		c.releaseLocked()
		c.mu.Unlock()
		s.finish(status.Convert(soft), nil)
		return soft
	}
	if err != nil {
		<-s.done
		return s.st.Err()
	}
	s.mu.Lock()
	if s.st == nil {
		ctx := s.ctx
		s.stop = context.AfterFunc(ctx, func() { c.reset(s, status.FromContextError(ctx.Err()), http2.ErrCodeCancel) })
	}
	s.mu.Unlock()
	if len(rest) > 0 {
		return c.sendData(s.ctx, s, rest, end)
	}
	return nil
}

// errClientNotSent is RecvMsg's or Header's answer on a stream whose
// request was not sent yet.
var errClientNotSent = status.Error(codes.Internal, "h2: the stream's request is not sent yet (SendMsg or CloseSend first)")

// Header waits for the response headers.
func (s *clientStream) Header() (metadata.MD, error) {
	if s.pending.Load() {
		return nil, errClientNotSent
	}
	select {
	case <-s.hdrCh:
	case <-s.ctx.Done():
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hdr == nil && s.st != nil && s.st.Code() != codes.OK {
		return nil, s.st.Err()
	}
	return clientMD(s.hdr), nil
}

// Trailer is the trailers, once RecvMsg returned an error or io.EOF.
func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clientMD(s.trl)
}

// CloseSend ends the sending side (END_STREAM).
func (s *clientStream) CloseSend() error {
	if s.sentEnd.Load() {
		return nil
	}
	if s.pending.Load() {
		_ = s.begin(nil, true) // a failure is RecvMsg's to say
		return nil
	}
	err := s.c.write(func() error {
		_, err := s.c.dataLocked(s, nil, true)
		if err == errClientStreamDone {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil // the stream is over; RecvMsg says how
	}
	return nil
}

// Context is the stream's context.
func (s *clientStream) Context() context.Context { return s.ctx }

// SendMsg sends one message. A stream whose client does not stream
// (server streaming) ends its sending side with it. io.EOF when the
// stream is over: RecvMsg has its status.
func (s *clientStream) SendMsg(m any) error {
	if s.sentEnd.Load() {
		return status.Error(codes.Internal, "grpc: SendMsg called after CloseSend")
	}
	if s.ended() {
		return io.EOF
	}
	bp, b, err := s.c.marshal(m)
	if err != nil {
		return err
	}
	end := s.desc != nil && !s.desc.ClientStreams
	if s.pending.Load() {
		err = s.begin(b, end)
		s.c.putBuf(bp, b)
		if err != nil && !errors.Is(err, errClientStreamDone) {
			return err // what the generated client returns for the call
		}
		if err != nil {
			return io.EOF
		}
		return nil
	}
	err = s.c.sendData(s.ctx, s, b, end)
	s.c.putBuf(bp, b)
	if err != nil {
		if errors.Is(err, errClientStreamDone) || s.ended() {
			return io.EOF
		}
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return err
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	return nil
}

// RecvMsg receives the next message; io.EOF at the end of an OK stream.
func (s *clientStream) RecvMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: error while unmarshaling: %T is not a proto.Message", m)
	}
	if s.pending.Load() {
		return errClientNotSent
	}
	for {
		s.mu.Lock()
		if s.off == len(s.buf) {
			s.buf, s.off = s.buf[:0], 0
		} else if s.off > cap(s.buf)/2 {
			s.buf, s.off = append(s.buf[:0], s.buf[s.off:]...), 0
		}
		msg, err := s.nextLocked()
		if err != nil {
			s.mu.Unlock()
			s.c.reset(s, status.Convert(err), http2.ErrCodeCancel)
			return err
		}
		if msg != nil {
			credit := s.creditLocked()
			s.mu.Unlock()
			if credit > 0 {
				_ = s.c.write(func() error { return s.c.fr.WriteWindowUpdate(s.id, credit) })
			}
			if err := proto.Unmarshal(msg, pm); err != nil {
				return status.Errorf(codes.Internal, "grpc: failed to unmarshal the response: %v", err)
			}
			if s.desc != nil && !s.desc.ServerStreams {
				// One answer: its status says whether it stands.
				<-s.done
				if s.st.Code() != codes.OK {
					return s.st.Err()
				}
			}
			return nil
		}
		st := s.st
		s.mu.Unlock()
		if st != nil {
			if st.Code() != codes.OK {
				return st.Err()
			}
			return io.EOF
		}
		select {
		case <-s.notify:
		case <-s.done:
		}
	}
}

// clientMD is the metadata of header fields: no pseudo or reserved
// headers, -bin values decoded.
func clientMD(fields []hpack.HeaderField) metadata.MD {
	if len(fields) == 0 {
		return nil
	}
	md := make(metadata.MD, len(fields))
	for _, f := range fields {
		if f.IsPseudo() || (clientReserved[f.Name] && f.Name != "user-agent") {
			continue
		}
		v := f.Value
		if isBinKey(f.Name) {
			b, err := decodeBin(v)
			if err != nil {
				continue
			}
			v = string(b)
		}
		md[f.Name] = append(md[f.Name], v)
	}
	return md
}

// clientOK is every plain OK status (a Status is read-only).
var clientOK = status.New(codes.OK, "")

// clientStatusOf is a call's status from the fields that ended it (the
// trailers, or a trailers-only response's headers).
func clientStatusOf(fields []hpack.HeaderField) *status.Status {
	var code codes.Code
	var msg, details, httpStatus string
	has := false
	for _, f := range fields {
		switch f.Name {
		case "grpc-status":
			n, err := strconv.ParseUint(f.Value, 10, 32)
			if err != nil {
				return status.Newf(codes.Internal, "grpc: malformed grpc-status %q", f.Value)
			}
			code, has = codes.Code(n), true
		case "grpc-message":
			msg = clientDecodeMessage(f.Value)
		case "grpc-status-details-bin":
			details = f.Value
		case ":status":
			httpStatus = f.Value
		}
	}
	if !has {
		if httpStatus != "" && httpStatus != "200" {
			return clientHTTPStatus(httpStatus)
		}
		return status.New(codes.Unknown, "grpc: the server's trailers have no grpc-status")
	}
	if code == codes.OK && msg == "" && details == "" {
		return clientOK
	}
	if details != "" {
		if b, err := decodeBin(details); err == nil {
			p := new(spb.Status)
			if proto.Unmarshal(b, p) == nil && codes.Code(p.GetCode()) == code {
				return status.FromProto(p)
			}
		}
	}
	return status.New(code, msg)
}

// clientHTTPStatus maps a non-200 HTTP status without grpc-status to a
// code, as gRPC's HTTP mapping says.
func clientHTTPStatus(s string) *status.Status {
	code := codes.Unknown
	switch s {
	case "400":
		code = codes.Internal
	case "401":
		code = codes.Unauthenticated
	case "403":
		code = codes.PermissionDenied
	case "404":
		code = codes.Unimplemented
	case "429", "502", "503", "504":
		code = codes.Unavailable
	}
	return status.Newf(code, "grpc: unexpected HTTP status %s", s)
}

// clientDecodeMessage undoes grpc-message's percent-encoding.
func clientDecodeMessage(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
