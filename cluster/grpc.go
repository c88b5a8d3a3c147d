package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/grpc/h2"
	"github.com/raftmq/raftmq/protocol/grpc/rmqpb"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// RocketMQ 5's gRPC MessagingService (apache.rocketmq.v2), served on every
// node next to the remoting port (Config.GRPCAddr). It is a front end
// only: each request that changes state becomes the remoting request the
// node already serves (a send becomes SEND_MESSAGE_V2, a commit
// END_TRANSACTION) and goes through handle, so it takes the same path as a
// remoting client's: forwarded to the leader by a follower, one batcher,
// deduplicated by UNIQ_KEY, delays and half messages diverted, the same
// ACL. gRPC clients join the membership registry (producer groups named
// after their topics, as RocketMQ's proxy does; consumer groups), so that
// transaction check-backs reach them over their Telemetry stream and
// `admin consumer connection` lists them.

// DefaultGRPCMaxStreams is the default bound on concurrent gRPC streams
// (calls) per connection.
const DefaultGRPCMaxStreams = 256

// HTTP/2 flow-control windows of the gRPC server (what a client may send
// before the node reads it): grpc-go's defaults (64 KiB, grown by its
// bandwidth estimate) hold a pipelining client's 1 KiB sends back on a
// fast link, where the estimate stays small.
const (
	grpcStreamWindow = 1 << 20
	grpcConnWindow   = 16 << 20
)

// grpcStreamWorkers is how many goroutines the gRPC server keeps to run
// calls: a call waits for its commit on one, so a pipelining client keeps
// many busy; beyond them each call gets a goroutine of its own, whose
// stack grows again from scratch (runtime.copystack was an eighth of a
// leader's CPU during pipelined sends before).
const grpcStreamWorkers = 256

// Metadata keys RocketMQ 5 clients send with every call.
const (
	mdClientID      = "x-mq-client-id"
	mdDateTime      = "x-mq-date-time"
	mdAuthorization = "authorization"
	mdLanguage      = "x-mq-language"
	mdVersion       = "x-mq-client-version"
)

// grpcPrechecked marks a context whose request the gRPC front end already
// authorized (acl.Policy.CheckV2): handle skips the remoting ACL check of
// the request it built. A forward to the leader carries a signature.
type grpcPrechecked struct{}

// grpcBornHost carries a gRPC client's address (netip.AddrPort) to the
// send handler, for the message's born host.
type grpcBornHost struct{}

type grpcService struct {
	rmqpb.UnimplementedMessagingServiceServer
	b *Broker

	rr    atomic.Uint32 // round robin over write queues for unordered sends
	sends grpcSendQueue // a leader's sends waiting to be submitted (grpc_sendfast.go)

	mu       sync.Mutex
	sessions map[string]*grpcSession // client id -> its settings and streams

	active activeCache // a follower's copy of the leader's active nodes
	renew  *renewer    // auto renew of push consumers' messages
}

// startGRPC serves the MessagingService on ln.
func (b *Broker) startGRPC(ln net.Listener) {
	svc := &grpcService{b: b, sessions: map[string]*grpcSession{}, renew: newRenewer()}
	b.grpcSvc = svc
	idle := b.cfg.ClientIdleTimeout
	if idle == 0 {
		idle = remoting.DefaultIdleTimeout
	}
	handshake := b.cfg.ClientReadTimeout
	if handshake <= 0 {
		handshake = remoting.DefaultReadTimeout
	}
	streams := b.cfg.GRPCMaxStreams
	if streams == 0 {
		streams = DefaultGRPCMaxStreams
	}
	if b.cfg.GRPCTransport == GRPCTransportLean {
		srv := h2.NewServer(h2.Options{
			MaxRecvMsgSize: b.cfg.MaxFrame, MaxConcurrentStreams: streams, ConnectionTimeout: handshake,
			KeepaliveMinTime: 5 * time.Second, PermitWithoutStream: true, MaxConnectionIdle: max(idle, 0),
			InitialWindowSize: grpcStreamWindow, InitialConnWindowSize: grpcConnWindow,
			ReadBufferSize: 256 << 10, WriteBufferSize: 256 << 10, Workers: grpcStreamWorkers,
			Inline: svc.inline,
		})
		rmqpb.RegisterMessagingServiceServer(srv, svc)
		b.serveGRPC(srv, b.grpcListener(ln, handshake))
		return
	}
	opts := []grpc.ServerOption{
		// The remoting port's frame bound is the body bound here too.
		grpc.MaxRecvMsgSize(b.cfg.MaxFrame),
		grpc.MaxConcurrentStreams(streams),
		grpc.ConnectionTimeout(handshake),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.InitialWindowSize(grpcStreamWindow),
		grpc.InitialConnWindowSize(grpcConnWindow),
		grpc.NumStreamWorkers(grpcStreamWorkers),
		grpc.WriteBufferSize(256 << 10),
		grpc.ReadBufferSize(256 << 10),
	}
	if idle > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle}))
	}
	srv := grpc.NewServer(opts...)
	rmqpb.RegisterMessagingServiceServer(srv, svc)
	b.serveGRPC(srv, b.grpcListener(ln, handshake))
}

// The gRPC server's transports (Config.GRPCTransport).
const (
	GRPCTransportGo   = "grpc-go"
	GRPCTransportLean = "lean"
)

// grpcServer is what the broker needs of a gRPC server, grpc-go's or
// protocol/grpc/h2's.
type grpcServer interface {
	Serve(net.Listener) error
	Stop()
}

// grpcListener wraps the gRPC port's listener in the connection limit
// and TLS, as the client port has them.
func (b *Broker) grpcListener(ln net.Listener, handshake time.Duration) net.Listener {
	conns := b.cfg.MaxClientConns
	if conns == 0 {
		conns = remoting.DefaultMaxConns
	}
	if conns > 0 {
		ln = &closingLimitListener{Listener: ln, max: int64(conns), log: b.log.With("port", "grpc")}
	}
	if b.tls != nil && b.tls.mode != remoting.TLSDisabled {
		// gRPC clients need HTTP/2 negotiated by ALPN.
		cfg := b.tls.server.Clone()
		cfg.NextProtos = []string{"h2"}
		ln = newSettledListener(remoting.TLSListener(ln, b.tls.mode, cfg, handshake, remoting.NewTLSRefusalLogger(b.log.With("port", "grpc"))), handshake)
	}
	return ln
}

func (b *Broker) serveGRPC(srv grpcServer, ln net.Listener) {
	b.grpc = srv
	b.wg.Add(1)
	go func() { defer b.wg.Done(); _ = srv.Serve(ln) }()
	b.wg.Add(1)
	go func() { defer b.wg.Done(); b.grpcSvc.renewLoop() }()
}

// GRPCAddr returns the address the gRPC service listens on ("" if off).
func (b *Broker) GRPCAddr() string {
	if b.grpcLn == nil {
		return ""
	}
	return b.grpcLn.Addr().String()
}

func ok() *rmqpb.Status { return &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"} }

func st(code rmqpb.Code, format string, args ...any) *rmqpb.Status {
	return &rmqpb.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

func mdValue(ctx context.Context, key string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// authorize checks a call against the ACL in force. It returns the access
// key the call was signed with ("" when there is no ACL or the client's
// address is white-listed), or the status to answer.
func (s *grpcService) authorize(ctx context.Context, rpc string, need []acl.Resource) (string, *rmqpb.Status) {
	p := s.b.policy()
	if p == nil {
		return "", nil
	}
	_, ak, err := p.CheckV2(acl.V2Request{RemoteAddr: peerAddr(ctx), Authorization: mdValue(ctx, mdAuthorization),
		DateTime: mdValue(ctx, mdDateTime), Need: need})
	if err == nil {
		return ak, nil
	}
	var de *acl.DeniedError
	msg := err.Error()
	code := rmqpb.Code_UNAUTHORIZED
	if errors.As(err, &de) {
		msg = de.Remark()
		if strings.HasPrefix(de.Msg, "No default permission") {
			code = rmqpb.Code_FORBIDDEN
		}
	}
	s.b.log.Warn("cluster: grpc request refused by the ACL", "rpc", rpc, "client", peerAddr(ctx), "client_id", mdValue(ctx, mdClientID), "reason", msg)
	return "", &rmqpb.Status{Code: code, Message: msg}
}

// exec carries out req, a remoting request built from a gRPC call that
// authorize let through, as handle does for a remoting client. It is
// signed with the caller's account (or the node's own, for a white-listed
// caller), so that a follower's forward passes the leader's ACL check.
func (s *grpcService) exec(ctx context.Context, ak string, req *remoting.Command) *remoting.Command {
	req.Language = "OTHER"
	if p := s.b.policy(); p != nil {
		if secret, found := p.SecretKey(ak); ak != "" && found {
			req.ExtFields = acl.Credentials{AccessKey: ak, SecretKey: secret}.SignFields(req.ExtFields, req.Body)
		} else {
			s.b.signInternal(req)
		}
	}
	ctx = context.WithValue(ctx, grpcPrechecked{}, true)
	if ap, err := netip.ParseAddrPort(peerAddr(ctx)); err == nil {
		ctx = context.WithValue(ctx, grpcBornHost{}, ap)
	}
	return s.b.handle(ctx, nil, req)
}

// remotingStatus maps a remoting answer to a RocketMQ 5 status, as
// RocketMQ's proxy does, keeping the broker's remark.
func remotingStatus(resp *remoting.Command) *rmqpb.Status {
	code := rmqpb.Code_INTERNAL_SERVER_ERROR
	switch resp.Code {
	case remoting.Success:
		return ok()
	case remoting.TopicNotExist:
		code = rmqpb.Code_TOPIC_NOT_FOUND
	case remoting.SubscriptionGroupNotExist:
		code = rmqpb.Code_CONSUMER_GROUP_NOT_FOUND
	case remoting.NoPermission:
		code = rmqpb.Code_FORBIDDEN
	case remoting.SystemBusy:
		code = rmqpb.Code_TOO_MANY_REQUESTS
	case remoting.MessageIllegal, remoting.InvalidParameter:
		code = rmqpb.Code_BAD_REQUEST
		if strings.Contains(resp.Remark, "too large") {
			code = rmqpb.Code_MESSAGE_BODY_TOO_LARGE
		}
	case remoting.ServiceNotAvailable:
		code = rmqpb.Code_HA_NOT_AVAILABLE
	case remoting.RequestCodeNotSupported:
		code = rmqpb.Code_NOT_IMPLEMENTED
	}
	return &rmqpb.Status{Code: code, Message: resp.Remark}
}

// unimplemented answers an RPC this node does not serve, naming it and why.
func unimplemented(rpc, why string) error {
	return status.Errorf(codes.Unimplemented, "%s is not served by raftmq: %s", rpc, why)
}

func (s *grpcService) PullMessage(*rmqpb.PullMessageRequest, rmqpb.MessagingService_PullMessageServer) error {
	return unimplemented("PullMessage", "offset-based gRPC consumption is not served; use a remoting pull consumer")
}

func (s *grpcService) UpdateOffset(context.Context, *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	return nil, unimplemented("UpdateOffset", "offset-based gRPC consumption is not served; use a remoting pull consumer")
}

func (s *grpcService) GetOffset(context.Context, *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	return nil, unimplemented("GetOffset", "offset-based gRPC consumption is not served; use a remoting pull consumer")
}

func (s *grpcService) QueryOffset(context.Context, *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	return nil, unimplemented("QueryOffset", "offset-based gRPC consumption is not served; use a remoting pull consumer")
}

func (s *grpcService) SyncLiteSubscription(context.Context, *rmqpb.SyncLiteSubscriptionRequest) (*rmqpb.SyncLiteSubscriptionResponse, error) {
	return nil, unimplemented("SyncLiteSubscription", "lite topics are not served")
}

// grpcEndpoint is the address a client dials for node id's gRPC service:
// its advertised one, with the host of the client's own access point when
// the node listens on all interfaces.
func (s *grpcService) endpoint(id uint64, access *rmqpb.Endpoints) *rmqpb.Endpoints {
	addr := ""
	if p, found := s.b.peer(id); found && id != 0 {
		addr = p.GRPC
	}
	if addr == "" {
		addr = s.b.advertisedGRPC()
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if access != nil && len(access.Addresses) > 0 && access.Addresses[0].Host != "" {
			host = access.Addresses[0].Host
		}
	}
	pn, _ := strconv.Atoi(port)
	scheme := rmqpb.AddressScheme_DOMAIN_NAME
	if ip := net.ParseIP(host); ip != nil {
		scheme = rmqpb.AddressScheme_IPv4
		if ip.To4() == nil {
			scheme = rmqpb.AddressScheme_IPv6
		}
	}
	return &rmqpb.Endpoints{Scheme: scheme, Addresses: []*rmqpb.Address{{Host: host, Port: int32(pn)}}}
}

// advertisedGRPC is the gRPC address of this node as peers list it, else
// the one it listens on.
func (b *Broker) advertisedGRPC() string {
	if p, found := b.peer(b.cfg.ID); found && p.GRPC != "" {
		return p.GRPC
	}
	return b.GRPCAddr()
}

// closingLimitListener serves at most max connections at once, as the
// remoting port does: one more is accepted and closed at once (logged once
// per burst), rather than left waiting in the kernel's backlog.
type closingLimitListener struct {
	net.Listener
	max     int64
	log     *slog.Logger
	open    atomic.Int64
	refused atomic.Bool // a refusal was logged and no connection closed since
}

func (l *closingLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if !l.refused.Swap(true) {
				l.log.Warn("cluster: grpc connection refused: too many connections", "client", c.RemoteAddr().String(), "max", l.max)
			}
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

type limitedConn struct {
	net.Conn
	l    *closingLimitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.refused.Store(false)
	})
	return err
}

// settledListener hands gRPC connections whose TLS sniff is over: an
// HTTP/2 server writes its preface before reading, and a sniffing
// connection (remoting.TLSListener) holds writes until its first byte has
// been read. Each accepted connection's first byte is awaited on a
// goroutine of its own, within timeout; one that does not settle is
// closed (the sniffer logged a refusal).
type settledListener struct {
	net.Listener
	timeout time.Duration
	ready   chan net.Conn
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	err     error // Accept's error once the inner listener failed
}

func newSettledListener(ln net.Listener, timeout time.Duration) *settledListener {
	l := &settledListener{Listener: ln, timeout: timeout, ready: make(chan net.Conn), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *settledListener) run() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.Close()
			return
		}
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(l.timeout))
			if _, err := c.Read(nil); err != nil {
				c.Close()
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			select {
			case l.ready <- c:
			case <-l.done:
				c.Close()
			}
		}()
	}
}

func (l *settledListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

func (l *settledListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}
