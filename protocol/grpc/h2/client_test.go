package h2

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/internal/certs"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
)

// clientTestService is a MessagingService whose QueryRoute acts on the topic's
// name and whose ReceiveMessage streams BatchSize messages of the
// group's name in bytes; Telemetry echoes.
type clientTestService struct {
	rmqpb.UnimplementedMessagingServiceServer
	release  chan struct{} // "hold" calls wait for it
	inflight atomic.Int32
	peak     atomic.Int32
	ended    chan error // "slow" calls report their context's end
	deadline atomic.Bool
}

func (t *clientTestService) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	switch name := req.GetTopic().GetName(); name {
	case "fail":
		st, err := status.New(codes.NotFound, "no such topic: héllo 100%\n").WithDetails(&rmqpb.Resource{Name: "detail"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	case "slow":
		_, ok := ctx.Deadline()
		t.deadline.Store(ok)
		<-ctx.Done()
		t.ended <- ctx.Err()
		return nil, ctx.Err()
	case "hold":
		n := t.inflight.Add(1)
		for {
			p := t.peak.Load()
			if n <= p || t.peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-t.release
		t.inflight.Add(-1)
		return &rmqpb.QueryRouteResponse{Status: &rmqpb.Status{Message: name}}, nil
	default:
		_ = grpc.SetHeader(ctx, metadata.Pairs("h-key", "h-val", "h-bin", "\x00\x01\xff"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("t-key", "t-val"))
		return &rmqpb.QueryRouteResponse{Status: &rmqpb.Status{Code: rmqpb.Code_OK,
			Message: name + "|" + clientFirst(md["x-id"]) + "|" + hex.EncodeToString([]byte(clientFirst(md["x-bin"])))}}, nil
	}
}

func clientFirst(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (t *clientTestService) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, ss grpc.ServerStreamingServer[rmqpb.ReceiveMessageResponse]) error {
	size, err := strconv.Atoi(req.GetGroup().GetName())
	if err != nil {
		return status.Error(codes.InvalidArgument, "group: a size")
	}
	for i := range int(req.BatchSize) {
		body := make([]byte, size)
		body[0], body[size-1] = byte(i), byte(i)
		if err := ss.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{
			Message: &rmqpb.Message{Body: body}}}); err != nil {
			return err
		}
	}
	return status.Error(codes.OK, "")
}

func (t *clientTestService) Telemetry(ss grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand]) error {
	for {
		m, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.Send(m); err != nil {
			return err
		}
	}
}

// serve starts grpc-go's server with svc on a loopback port.
func clientServe(t *testing.T, svc *clientTestService, opts ...grpc.ServerOption) (*grpc.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	rmqpb.RegisterMessagingServiceServer(srv, svc)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return srv, ln.Addr().String()
}

func clientDial(t *testing.T, addr string) *ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := Dial(ctx, addr, ClientOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

func newClientTestService() *clientTestService {
	return &clientTestService{release: make(chan struct{}), ended: make(chan error, 1)}
}

// Unary calls: metadata out (binary too), headers and trailers back,
// an error status with its details and a percent-encoded message (a
// trailers-only answer), an unknown method.
func TestClientUnary(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-id", "abc", "x-bin", "\x00\xfe")
	var hdr, trl metadata.MD
	resp, err := mc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "t1"}}, grpc.Header(&hdr), grpc.Trailer(&trl))
	require.NoError(t, err)
	require.Equal(t, "t1|abc|00fe", resp.GetStatus().GetMessage())
	require.Equal(t, []string{"h-val"}, hdr["h-key"])
	require.Equal(t, []string{"\x00\x01\xff"}, hdr["h-bin"])
	require.Equal(t, []string{"t-val"}, trl["t-key"])

	_, err = mc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "fail"}})
	st, ok := status.FromError(err)
	require.True(t, ok, err)
	require.Equal(t, codes.NotFound, st.Code())
	require.Equal(t, "no such topic: héllo 100%\n", st.Message())
	require.Len(t, st.Details(), 1)
	require.Equal(t, "detail", st.Details()[0].(*rmqpb.Resource).GetName())

	_, err = mc.Heartbeat(ctx, &rmqpb.HeartbeatRequest{})
	require.Equal(t, codes.Unimplemented, status.Code(err), err)

	// Header blocks are reused for a context and method seen before:
	// each call still carries its own context's metadata.
	ctxs := []context.Context{metadata.AppendToOutgoingContext(context.Background(), "x-id", "a"),
		metadata.AppendToOutgoingContext(context.Background(), "x-id", "b"), context.Background()}
	for i := range 12 {
		j := i / 3 % 3
		if i >= 6 {
			j = i % 3
		}
		resp, err := mc.QueryRoute(ctxs[j], &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "r"}})
		require.NoError(t, err)
		require.Equal(t, "r|"+[]string{"a", "b", ""}[j]+"|", resp.GetStatus().GetMessage())
	}
}

// A call past its deadline ends DeadlineExceeded, the server saw the
// deadline (grpc-timeout), and its handler's context ends; a cancelled
// call ends Canceled and the server's handler sees it (RST_STREAM).
func TestClientDeadlineAndCancel(t *testing.T) {
	svc := newClientTestService()
	_, addr := clientServe(t, svc)
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := mc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "slow"}})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), err)
	require.Error(t, <-svc.ended)
	require.True(t, svc.deadline.Load(), "the server saw no deadline")

	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := mc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "slow"}})
		errc <- err
	}()
	// Cancel once the server runs the call (its handler clears the
	// deadline flag the first call set).
	require.Eventually(t, func() bool { return !svc.deadline.Load() }, 10*time.Second, time.Millisecond)
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-errc))
	require.ErrorIs(t, <-svc.ended, context.Canceled)
	_, err = mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "after"}})
	require.NoError(t, err, "the connection serves on")
}

// A server stream of 24 MiB in 256 KiB messages, past both receive
// windows (1 MiB per stream, 16 MiB per connection), arrives whole and
// in order, twice on one connection; a message over the call's bound
// fails the call ResourceExhausted.
func TestClientServerStreaming(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	cc := clientDial(t, addr)
	mc := rmqpb.NewMessagingServiceClient(cc)
	for range 2 {
		st, err := mc.ReceiveMessage(context.Background(), &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "262144"}, BatchSize: 96})
		require.NoError(t, err)
		n := 0
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			b := m.GetMessage().GetBody()
			require.Len(t, b, 262144)
			require.Equal(t, byte(n), b[0])
			require.Equal(t, byte(n), b[len(b)-1])
			n++
		}
		require.Equal(t, 96, n)
	}
	st, err := mc.ReceiveMessage(context.Background(), &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "1000"}, BatchSize: 3},
		grpc.MaxCallRecvMsgSize(500))
	require.NoError(t, err)
	_, err = st.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err), err)

	st, err = mc.ReceiveMessage(context.Background(), &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "x"}})
	require.NoError(t, err)
	_, err = st.Recv()
	require.Equal(t, codes.InvalidArgument, status.Code(err), err)

	// A server stream sends its HEADERS with its one message: receiving
	// before it is an error; closing it without a message sends them
	// alone, and the server rejects the stream without a request.
	cs, err := cc.NewStream(context.Background(),
		&grpc.StreamDesc{ServerStreams: true}, rmqpb.MessagingService_ReceiveMessage_FullMethodName)
	require.NoError(t, err)
	var resp rmqpb.ReceiveMessageResponse
	require.ErrorIs(t, cs.RecvMsg(&resp), errClientNotSent)
	require.NoError(t, cs.CloseSend())
	err = cs.RecvMsg(&resp)
	require.Error(t, err)
	require.NotEqual(t, codes.OK, status.Code(err), err)
}

// A 3 MiB request and its 3 MiB echo, past grpc-go's server's 64 KiB
// windows and this client's 1 MiB stream window (flow control both
// ways in a unary call); an answer over the call's bound fails
// ResourceExhausted and leaves the connection serving.
func TestClientLargeUnary(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	name := strings.Repeat("x", 3<<20)
	for range 2 {
		resp, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: name}})
		require.NoError(t, err)
		require.Equal(t, name+"||", resp.GetStatus().GetMessage())
	}
	_, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: name}}, grpc.MaxCallRecvMsgSize(1<<20))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), err)
	resp, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "small"}})
	require.NoError(t, err)
	require.Equal(t, "small||", resp.GetStatus().GetMessage())
}

// Telemetry echoes over a bidirectional stream.
func TestClientBidi(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	st, err := mc.Telemetry(context.Background())
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, st.Send(&rmqpb.TelemetryCommand{Status: &rmqpb.Status{Message: strconv.Itoa(i)}}))
		m, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(i), m.GetStatus().GetMessage())
	}
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF)
}

// With the server's limit of 2 concurrent streams, 10 held calls run at
// most 2 at a time and all succeed (grpc-go refuses a stream over its
// limit, which would fail a call Unavailable).
func TestClientMaxConcurrentStreams(t *testing.T) {
	svc := newClientTestService()
	_, addr := clientServe(t, svc, grpc.MaxConcurrentStreams(2))
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			_, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "hold"}})
			errs <- err
		})
	}
	require.Eventually(t, func() bool { return svc.inflight.Load() == 2 }, 10*time.Second, time.Millisecond)
	close(svc.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(2), svc.peak.Load())
}

// GracefulStop mid-call: the running call finishes, a new one fails
// Unavailable once the client has the GOAWAY.
func TestClientGoAway(t *testing.T) {
	svc := newClientTestService()
	srv, addr := clientServe(t, svc)
	cc := clientDial(t, addr)
	mc := rmqpb.NewMessagingServiceClient(cc)
	errc := make(chan error, 1)
	go func() {
		resp, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "hold"}})
		if err == nil && resp.GetStatus().GetMessage() != "hold" {
			err = errors.New("wrong answer " + resp.String())
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return svc.inflight.Load() == 1 }, 10*time.Second, time.Millisecond)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	require.Eventually(t, func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return cc.goAway }, 10*time.Second, time.Millisecond)
	_, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "new"}})
	require.Equal(t, codes.Unavailable, status.Code(err), err)
	close(svc.release)
	require.NoError(t, <-errc)
	<-stopped
	_, err = mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "new"}})
	require.Equal(t, codes.Unavailable, status.Code(err), err)
}

// Many concurrent calls on one connection (run with -race), each
// answered with its own request.
func TestClientConcurrent(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	mc := rmqpb.NewMessagingServiceClient(clientDial(t, addr))
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range 64 {
		wg.Go(func() {
			for i := range 50 {
				name := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				resp, err := mc.QueryRoute(context.Background(), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: name}})
				if err != nil || resp.GetStatus().GetMessage() != name+"||" {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, bad.Load())
}

// Over TLS (ALPN h2) against grpc-go's server with a certificate of a
// local CA.
func TestClientTLS(t *testing.T) {
	ca, err := certs.NewCA("h2-test")
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue("node", []string{"127.0.0.1"})
	require.NoError(t, err)
	pair, err := certs.KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	_, addr := clientServe(t, newClientTestService(), grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}})))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := Dial(ctx, addr, ClientOptions{TLS: &tls.Config{RootCAs: ca.Pool()}})
	require.NoError(t, err)
	defer cc.Close()
	resp, err := rmqpb.NewMessagingServiceClient(cc).QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "tls"}})
	require.NoError(t, err)
	require.Equal(t, "tls||", resp.GetStatus().GetMessage())

	_, err = Dial(ctx, addr, ClientOptions{TLS: &tls.Config{}})
	require.Error(t, err, "a server certificate of an unknown CA")
}

func TestClientTimeoutEncoding(t *testing.T) {
	require.Equal(t, "0n", clientTimeout(0))
	require.Equal(t, "1500000u", clientTimeout(1500*time.Millisecond))
	require.Equal(t, "99999999n", clientTimeout(99999999))
	require.Equal(t, "100000u", clientTimeout(100*time.Millisecond))
	require.Equal(t, "a%b", clientDecodeMessage("a%25b"))
}

// BenchmarkClientUnary is parallel unary calls against grpc-go's server
// in this process: -benchmem gives the allocations per call (both ends).
func BenchmarkClientUnary(b *testing.B) {
	for _, kind := range []string{"lean", "grpc-go"} {
		b.Run(kind, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(b, err)
			srv := grpc.NewServer()
			rmqpb.RegisterMessagingServiceServer(srv, newClientTestService())
			go func() { _ = srv.Serve(ln) }()
			defer srv.Stop()
			var cc grpc.ClientConnInterface
			if kind == "lean" {
				c, err := Dial(context.Background(), ln.Addr().String(), ClientOptions{})
				require.NoError(b, err)
				defer c.Close()
				cc = c
			} else {
				c, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				require.NoError(b, err)
				defer c.Close()
				cc = c
			}
			mc := rmqpb.NewMessagingServiceClient(cc)
			ctx := metadata.NewOutgoingContext(context.Background(), metadata.MD{"x-id": []string{"bench"}})
			req := &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "b"}}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := mc.QueryRoute(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// A reply that decodes itself (Decoder) gets the response's bytes, which
// decode as the generated response; one that is neither a Decoder nor a
// proto.Message is refused.
func TestClientDecoderReply(t *testing.T) {
	_, addr := clientServe(t, newClientTestService())
	cc := clientDial(t, addr)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-id", "abc")
	var raw rawReply
	require.NoError(t, cc.Invoke(ctx, rmqpb.MessagingService_QueryRoute_FullMethodName, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "t1"}}, &raw))
	var resp rmqpb.QueryRouteResponse
	require.NoError(t, proto.Unmarshal(raw.b, &resp))
	require.Equal(t, "t1|abc|", resp.GetStatus().GetMessage())
	err := cc.Invoke(ctx, rmqpb.MessagingService_QueryRoute_FullMethodName, &rmqpb.QueryRouteRequest{}, new(int))
	require.Equal(t, codes.Internal, status.Code(err))
}

// rawReply keeps a copy of the bytes it is given.
type rawReply struct{ b []byte }

func (r *rawReply) UnmarshalProto(b []byte) error {
	r.b = append(r.b[:0], b...)
	return nil
}
