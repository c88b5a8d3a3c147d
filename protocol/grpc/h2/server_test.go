package h2

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// testService is grpc-go's interop TestService, served by h2.
type testService struct {
	testpb.UnimplementedTestServiceServer
	entered  chan struct{} // EmptyCall: one per call entered
	release  chan struct{} // EmptyCall: returns when closed (or its context ends)
	ctxErr   chan error    // EmptyCall: its context's error when it ended so
	deadline chan time.Time
	running  atomic.Int32
	maxRun   atomic.Int32
	streamed chan error // StreamingOutputCall: how an endless stream ended
}

func newTestService() *testService {
	return &testService{entered: make(chan struct{}, 64), release: make(chan struct{}), ctxErr: make(chan error, 64),
		deadline: make(chan time.Time, 64), streamed: make(chan error, 4)}
}

func (t *testService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	n := t.running.Add(1)
	defer t.running.Add(-1)
	for {
		m := t.maxRun.Load()
		if n <= m || t.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	if d, ok := ctx.Deadline(); ok {
		t.deadline <- d
	}
	t.entered <- struct{}{}
	select {
	case <-t.release:
		return &testpb.Empty{}, nil
	case <-ctx.Done():
		t.ctxErr <- ctx.Err()
		return nil, ctx.Err()
	}
}

func (t *testService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if err := grpc.SetHeader(ctx, metadata.Pairs("echo-key", first(md["x-key"]), "echo-bin", first(md["x-data-bin"]))); err != nil {
		return nil, err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs("trailer-key", "t1")); err != nil {
		return nil, err
	}
	if p, ok := peer.FromContext(ctx); !ok || p.Addr == nil {
		return nil, status.Error(codes.Internal, "no peer")
	}
	if rs := req.ResponseStatus; rs != nil {
		st, err := status.New(codes.Code(rs.Code), rs.Message).WithDetails(durationpb.New(42 * time.Second))
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	method, _ := grpc.Method(ctx)
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: bytes.Repeat([]byte{'r'}, int(req.ResponseSize))}, Username: method}, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (t *testService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	if len(req.ResponseParameters) == 0 {
		// Endless: until the client goes.
		for i := 0; ; i++ {
			if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, 1024)}}); err != nil {
				t.streamed <- err
				return err
			}
		}
	}
	if err := stream.SendHeader(metadata.Pairs("stream-header", "h")); err != nil {
		return err
	}
	for i, p := range req.ResponseParameters {
		b := bytes.Repeat([]byte{byte(i)}, int(p.Size))
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: b}}); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("count", "done"))
	return nil
}

// StreamingInputCall reads nothing until the stream holds a window's
// worth of unread messages, then reads them all.
func (t *testService) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	st := stream.(*grpc.GenericServerStream[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]).ServerStream.(*serverStream).s
	for {
		st.mu.Lock()
		unread := st.unread
		st.mu.Unlock()
		if unread >= st.c.srv.opts.InitialWindowSize {
			break
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-time.After(time.Millisecond):
		}
	}
	t.entered <- struct{}{}
	<-t.release
	total := 0
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(req.Payload.Body)
	}
}

func (t *testService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if rs := req.ResponseStatus; rs != nil {
			return status.Error(codes.Code(rs.Code), rs.Message)
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.Payload}); err != nil {
			return err
		}
	}
}

// serve starts an h2 server with svc on a local port; the server stops
// at the test's end.
func serve(t testing.TB, opts Options, svc *testService) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := NewServer(opts)
	testpb.RegisterTestServiceServer(s, svc)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		require.NoError(t, <-served)
	})
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A unary call: metadata in (text and binary), headers and trailers out,
// the method name, and an error status with details.
func TestUnaryMetadataAndStatusDetails(t *testing.T) {
	_, addr := serve(t, Options{}, newTestService())
	c := dial(t, addr)
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-key", "v1", "x-data-bin", string([]byte{0, 1, 2, 0xff}))
	var hdr, trl metadata.MD
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 3000}, grpc.Header(&hdr), grpc.Trailer(&trl))
	require.NoError(t, err)
	require.Len(t, resp.Payload.Body, 3000)
	require.Equal(t, "/grpc.testing.TestService/UnaryCall", resp.Username)
	require.Equal(t, []string{"v1"}, hdr["echo-key"])
	require.Equal(t, []string{string([]byte{0, 1, 2, 0xff})}, hdr["echo-bin"])
	require.Equal(t, []string{"t1"}, trl["trailer-key"])

	_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.FailedPrecondition), Message: "nope: 100% ünïcode\n"}}, grpc.Trailer(&trl))
	st := status.Convert(err)
	require.Equal(t, codes.FailedPrecondition, st.Code(), "%v", err)
	require.Equal(t, "nope: 100% ünïcode\n", st.Message())
	require.Len(t, st.Details(), 1)
	d, ok := st.Details()[0].(*durationpb.Duration)
	require.True(t, ok, "%T", st.Details()[0])
	require.Equal(t, 42*time.Second, d.AsDuration())
	require.Equal(t, []string{"t1"}, trl["trailer-key"], "trailers of a trailers-only answer")
}

// A client's deadline is the call's context deadline; past it the call
// ends DEADLINE_EXCEEDED on both sides.
func TestDeadline(t *testing.T) {
	svc := newTestService()
	_, addr := serve(t, Options{}, svc)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := c.EmptyCall(ctx, &testpb.Empty{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	got := <-svc.deadline
	require.WithinDuration(t, want, got, 200*time.Millisecond)
	// The server's timer or the client's RST_STREAM at its own deadline,
	// whichever comes first, ends the call's context.
	err = <-svc.ctxErr
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "%v", err)
}

// A server stream larger than the client's windows (fixed at 64 KiB):
// every message arrives, in order, after the header and before the
// trailer.
func TestServerStreamBeyondWindows(t *testing.T) {
	_, addr := serve(t, Options{}, newTestService())
	for _, tc := range []struct {
		name  string
		n     int
		size  int32
		opts  []grpc.DialOption
		total int
	}{
		{"32x1KiB", 32, 1024, []grpc.DialOption{grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535)}, 0},
		{"200x16KiB", 200, 16 << 10, []grpc.DialOption{grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535)}, 0},
		{"40x100KiB-default-client", 40, 100 << 10, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, tc.opts...)
			req := &testpb.StreamingOutputCallRequest{}
			for range tc.n {
				req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: tc.size})
			}
			rs, err := c.StreamingOutputCall(testCtx(t), req)
			require.NoError(t, err)
			hdr, err := rs.Header()
			require.NoError(t, err)
			require.Equal(t, []string{"h"}, hdr["stream-header"])
			for i := range tc.n {
				r, err := rs.Recv()
				require.NoError(t, err, "message %d", i)
				require.Len(t, r.Payload.Body, int(tc.size))
				require.Equal(t, byte(i), r.Payload.Body[0])
			}
			_, err = rs.Recv()
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, []string{"done"}, rs.Trailer()["count"])
		})
	}
}

// A bidirectional stream (Telemetry's shape): the client sends while it
// receives; the handler's status ends it.
func TestBidi(t *testing.T) {
	_, addr := serve(t, Options{}, newTestService())
	c := dial(t, addr)
	fd, err := c.FullDuplexCall(testCtx(t))
	require.NoError(t, err)
	const n = 300
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := fd.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: bytes.Repeat([]byte{byte(i)}, 1000+i*10)}}); err != nil {
				sent <- err
				return
			}
		}
		sent <- fd.CloseSend()
	}()
	for i := range n {
		r, err := fd.Recv()
		require.NoError(t, err, "message %d", i)
		require.Len(t, r.Payload.Body, 1000+i*10)
		require.Equal(t, byte(i), r.Payload.Body[0])
	}
	require.NoError(t, <-sent)
	_, err = fd.Recv()
	require.ErrorIs(t, err, io.EOF)

	fd, err = c.FullDuplexCall(testCtx(t))
	require.NoError(t, err)
	require.NoError(t, fd.Send(&testpb.StreamingOutputCallRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.Aborted), Message: "stop"}}))
	_, err = fd.Recv()
	require.Equal(t, codes.Aborted, status.Code(err), "%v", err)
}

// A client that cancels a stream mid-way: the handler's context is
// cancelled and its SendMsg fails.
func TestClientCancelMidStream(t *testing.T) {
	svc := newTestService()
	_, addr := serve(t, Options{}, svc)
	c := dial(t, addr)
	ctx, cancel := context.WithCancel(testCtx(t))
	rs, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	require.NoError(t, err)
	for range 10 {
		_, err := rs.Recv()
		require.NoError(t, err)
	}
	cancel()
	err = <-svc.streamed
	require.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	// The connection still serves.
	_, err = c.UnaryCall(testCtx(t), &testpb.SimpleRequest{ResponseSize: 1})
	require.NoError(t, err)
}

// Unknown services and methods are UNIMPLEMENTED, named as grpc-go names
// them; the connection goes on.
func TestUnknownMethod(t *testing.T) {
	_, addr := serve(t, Options{}, newTestService())
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	err = cc.Invoke(testCtx(t), "/grpc.testing.TestService/NoSuchRPC", &testpb.Empty{}, &testpb.Empty{})
	require.Equal(t, codes.Unimplemented, status.Code(err))
	require.Equal(t, "unknown method NoSuchRPC for service grpc.testing.TestService", status.Convert(err).Message())
	err = cc.Invoke(testCtx(t), "/no.Such/Call", &testpb.Empty{}, &testpb.Empty{})
	require.Equal(t, codes.Unimplemented, status.Code(err))
	require.Equal(t, "unknown service no.Such", status.Convert(err).Message())
	// A method the service leaves unimplemented answers its own status.
	_, err = testpb.NewTestServiceClient(cc).UnimplementedCall(testCtx(t), &testpb.Empty{})
	require.Equal(t, codes.Unimplemented, status.Code(err))
	_, err = testpb.NewTestServiceClient(cc).UnaryCall(testCtx(t), &testpb.SimpleRequest{})
	require.NoError(t, err)
}

// A message over MaxRecvMsgSize is RESOURCE_EXHAUSTED, unread; the
// connection goes on.
func TestOversizedMessage(t *testing.T) {
	_, addr := serve(t, Options{MaxRecvMsgSize: 4096}, newTestService())
	c := dial(t, addr)
	_, err := c.UnaryCall(testCtx(t), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 200<<10)}})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "larger than max")
	_, err = c.UnaryCall(testCtx(t), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 4000)}})
	require.NoError(t, err)
}

// MaxConcurrentStreams reaches the client in SETTINGS (grpc-go's client
// holds its extra calls back), and a client that ignores it gets its
// extra streams refused.
func TestConcurrentStreamLimit(t *testing.T) {
	svc := newTestService()
	_, addr := serve(t, Options{MaxConcurrentStreams: 2}, svc)
	c := dial(t, addr)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			_, err := c.EmptyCall(testCtx(t), &testpb.Empty{})
			errs <- err
		})
	}
	<-svc.entered
	<-svc.entered
	close(svc.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(2), svc.maxRun.Load())

	// A raw client opening three calls at once: the third is refused.
	rc := rawDial(t, addr)
	for id := uint32(1); id <= 5; id += 2 {
		rc.headers(t, id, "/grpc.testing.TestService/EmptyCall", false)
	}
	for {
		f := rc.read(t)
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			require.Equal(t, uint32(5), rst.StreamID)
			require.Equal(t, http2.ErrCodeRefusedStream, rst.ErrCode)
			break
		}
	}
}

// GracefulStop sends GOAWAY, lets a running call finish and returns when
// it has.
func TestGracefulStopWithACallRunning(t *testing.T) {
	svc := newTestService()
	s, addr := serve(t, Options{}, svc)
	c := dial(t, addr)
	callErr := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(testCtx(t), &testpb.Empty{})
		callErr <- err
	}()
	<-svc.entered
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	// A raw connection opened before sees the GOAWAY too; the server
	// does not return while the call runs.
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call running")
	default:
	}
	close(svc.release)
	require.NoError(t, <-callErr)
	<-stopped
}

// Many concurrent unary calls on one connection and on several.
func TestManyConcurrentCalls(t *testing.T) {
	_, addr := serve(t, Options{Workers: 8}, newTestService())
	clients := []testpb.TestServiceClient{dial(t, addr), dial(t, addr), dial(t, addr)}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := range 48 {
		wg.Go(func() {
			c := clients[g%len(clients)]
			for i := range 40 {
				size := int32((g*40 + i) % 5000)
				r, err := c.UnaryCall(testCtx(t), &testpb.SimpleRequest{ResponseSize: size, Payload: &testpb.Payload{Body: make([]byte, i*100)}})
				if err != nil || len(r.Payload.Body) != int(size) {
					t.Errorf("call %d/%d: %v", g, i, err)
					failed.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load())
}

// A client pinging more often than KeepaliveMinTime gets GOAWAY
// ENHANCE_YOUR_CALM after the strikes grpc-go allows.
func TestKeepaliveEnforcement(t *testing.T) {
	_, addr := serve(t, Options{KeepaliveMinTime: time.Hour, PermitWithoutStream: true}, newTestService())
	rc := rawDial(t, addr)
	for i := range 4 {
		require.NoError(t, rc.fr.WritePing(false, [8]byte{byte(i)}))
	}
	require.NoError(t, rc.bw.Flush())
	acks := 0
	for {
		switch f := rc.read(t).(type) {
		case *http2.PingFrame:
			require.True(t, f.IsAck())
			acks++
		case *http2.GoAwayFrame:
			require.Equal(t, http2.ErrCodeEnhanceYourCalm, f.ErrCode)
			require.Equal(t, "too_many_pings", string(f.DebugData()))
			require.Equal(t, 4, acks)
			return
		}
	}
}

// A connection without calls for MaxConnectionIdle gets GOAWAY and is
// closed.
func TestMaxConnectionIdle(t *testing.T) {
	_, addr := serve(t, Options{MaxConnectionIdle: 100 * time.Millisecond}, newTestService())
	rc := rawDial(t, addr)
	for {
		f, err := rc.fr.ReadFrame()
		require.NoError(t, err)
		if g, ok := f.(*http2.GoAwayFrame); ok {
			require.Equal(t, http2.ErrCodeNo, g.ErrCode)
			break
		}
	}
	_, err := rc.fr.ReadFrame()
	require.Error(t, err, "the connection is closed after the GOAWAY")
}

// rawConn is a hand-driven HTTP/2 client.
type rawConn struct {
	nc   net.Conn
	bw   *bufioWriter
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

type bufioWriter struct {
	bytes.Buffer
	nc net.Conn
}

func (w *bufioWriter) Flush() error {
	_, err := w.nc.Write(w.Bytes())
	w.Reset()
	return err
}

func rawDial(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(20*time.Second)))
	rc := &rawConn{nc: nc, bw: &bufioWriter{nc: nc}}
	rc.fr = http2.NewFramer(rc.bw, nc)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.hbuf)
	_, err = rc.bw.WriteString(clientPreface)
	require.NoError(t, err)
	require.NoError(t, rc.fr.WriteSettings())
	require.NoError(t, rc.bw.Flush())
	return rc
}

func (rc *rawConn) headers(t *testing.T, id uint32, path string, end bool) {
	t.Helper()
	rc.hbuf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
		{Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		require.NoError(t, rc.enc.WriteField(f))
	}
	require.NoError(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: end, EndHeaders: true}))
	require.NoError(t, rc.bw.Flush())
}

func (rc *rawConn) read(t *testing.T) http2.Frame {
	t.Helper()
	f, err := rc.fr.ReadFrame()
	require.NoError(t, err)
	return f
}

// Stop sends GOAWAY before it closes a connection, and cancels the
// running calls.
func TestStopSendsGoAway(t *testing.T) {
	svc := newTestService()
	s, addr := serve(t, Options{}, svc)
	rc := rawDial(t, addr)
	rc.headers(t, 1, "/grpc.testing.TestService/EmptyCall", false)
	require.NoError(t, rc.fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}))
	require.NoError(t, rc.bw.Flush())
	<-svc.entered
	go s.Stop()
	for {
		f, err := rc.fr.ReadFrame()
		require.NoError(t, err, "no GOAWAY before the close")
		if g, ok := f.(*http2.GoAwayFrame); ok {
			require.Equal(t, http2.ErrCodeNo, g.ErrCode)
			require.Equal(t, uint32(1), g.LastStreamID)
			break
		}
	}
	require.ErrorIs(t, <-svc.ctxErr, context.Canceled)
}

// A handler that does not read holds its client back: the stream's
// window is not given back while a window's worth of messages waits
// unread, and all of them arrive once it reads.
func TestSlowReaderHoldsClientBack(t *testing.T) {
	svc := newTestService()
	_, addr := serve(t, Options{}, svc)
	c := dial(t, addr, grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535))
	sc, err := c.StreamingInputCall(testCtx(t))
	require.NoError(t, err)
	const n, size = 40, 16 << 10
	var sent atomic.Int32
	done := make(chan error, 1)
	go func() {
		for range n {
			if err := sc.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, size)}}); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- nil
	}()
	<-svc.entered
	// The server holds 64 KiB unread, the client's window and write
	// buffer another 64 KiB each: far from all 640 KiB.
	require.Less(t, sent.Load(), int32(n/2), "the client was not held back")
	close(svc.release)
	require.NoError(t, <-done)
	resp, err := sc.CloseAndRecv()
	require.NoError(t, err)
	require.Equal(t, int32(n*size), resp.AggregatedPayloadSize)
}

// Header blocks are checked as x/net's Framer checks them: a call whose
// block has an invalid field or a bad pseudo-header is reset
// (PROTOCOL_ERROR) and the connection serves on (HPACK's state intact); a
// block split over CONTINUATION frames opens its call; a block that does
// not decode closes the connection (COMPRESSION_ERROR).
func TestHeaderBlocks(t *testing.T) {
	_, addr := serve(t, Options{}, newTestService())
	rc := rawDial(t, addr)
	call := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/grpc.testing.TestService/UnaryCall"}, {Name: ":authority", Value: "x"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}
	block := func(fields ...hpack.HeaderField) []byte {
		rc.hbuf.Reset()
		for _, f := range fields {
			require.NoError(t, rc.enc.WriteField(f))
		}
		return bytes.Clone(rc.hbuf.Bytes())
	}
	// readUntil reads frames until one of stream id's (the server's
	// SETTINGS and their ACK may come first).
	readUntil := func(id uint32) http2.Frame {
		for {
			f := rc.read(t)
			if f.Header().StreamID == id {
				return f
			}
		}
	}
	id := uint32(1)
	for name, fields := range map[string][]hpack.HeaderField{
		"upper-case name":      append(slices.Clone(call), hpack.HeaderField{Name: "X-Up", Value: "v"}),
		"value with a NUL":     append(slices.Clone(call), hpack.HeaderField{Name: "x-bad", Value: "a\x00b"}),
		"pseudo after regular": append(slices.Clone(call), hpack.HeaderField{Name: ":authority", Value: "y"}),
		"repeated pseudo":      append([]hpack.HeaderField{{Name: ":path", Value: "/a/b"}}, call...),
		"unknown pseudo":       append([]hpack.HeaderField{{Name: ":foo", Value: "v"}}, call...),
		"request and response": append([]hpack.HeaderField{{Name: ":status", Value: "200"}}, call...),
	} {
		require.NoError(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(fields...), EndStream: true, EndHeaders: true}))
		require.NoError(t, rc.bw.Flush())
		rst, isRST := readUntil(id).(*http2.RSTStreamFrame)
		require.True(t, isRST, name)
		require.Equal(t, http2.ErrCodeProtocol, rst.ErrCode, name)
		id += 2
	}

	// A valid call, its block in three frames: answered.
	b := block(call...)
	require.NoError(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:3], EndHeaders: false}))
	require.NoError(t, rc.fr.WriteContinuation(id, false, b[3:6]))
	require.NoError(t, rc.fr.WriteContinuation(id, true, b[6:]))
	require.NoError(t, rc.fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}))
	require.NoError(t, rc.bw.Flush())
	for {
		f := readUntil(id)
		if h, isHeaders := f.(*http2.MetaHeadersFrame); isHeaders && h.StreamEnded() {
			require.Equal(t, "0", fieldValue(h.Fields, "grpc-status"))
			break
		}
	}

	// An index beyond HPACK's tables: the connection ends.
	id += 2
	require.NoError(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0xff, 0x7f}, EndStream: true, EndHeaders: true}))
	require.NoError(t, rc.bw.Flush())
	for {
		f, err := rc.fr.ReadFrame()
		require.NoError(t, err, "no GOAWAY before the close")
		if g, isGoAway := f.(*http2.GoAwayFrame); isGoAway {
			require.Equal(t, http2.ErrCodeCompression, g.ErrCode)
			break
		}
	}
}

func fieldValue(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// BenchmarkServerUnary is parallel unary calls of this package's client
// to its server in this process, each with metadata, handled by a handler
// or taken by Options.Inline (answered from another goroutine):
// -benchmem gives the allocations per call (both ends).
//
//	go test ./protocol/grpc/h2 -run '^$' -bench ServerUnary -benchmem
func BenchmarkServerUnary(b *testing.B) {
	for _, inline := range []bool{false, true} {
		name := "handler"
		var opts Options
		if inline {
			name = "inline"
			answers := make(chan func(any, error), 1024)
			go func() {
				for reply := range answers {
					reply(&testpb.SimpleResponse{Username: "inline"}, nil)
				}
			}()
			b.Cleanup(func() { close(answers) })
			opts.Inline = func(ctx context.Context, method string, req []byte, reply func(any, error)) bool {
				answers <- reply
				return true
			}
		}
		b.Run(name, func(b *testing.B) {
			_, addr := serve(b, opts, newTestService())
			c, err := Dial(context.Background(), addr, ClientOptions{})
			require.NoError(b, err)
			defer c.Close()
			tc := testpb.NewTestServiceClient(c)
			ctx := metadata.NewOutgoingContext(context.Background(), metadata.MD{"x-id": []string{"bench"}})
			req := &testpb.SimpleRequest{ResponseSize: 16}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tc.UnaryCall(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
