package h2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
)

// Options are the server's settings; zero values take grpc-go's defaults.
type Options struct {
	// MaxRecvMsgSize bounds a received message (4 MiB when 0); a larger
	// one fails the call with RESOURCE_EXHAUSTED.
	MaxRecvMsgSize int
	// MaxConcurrentStreams bounds calls per connection (advertised in
	// SETTINGS; streams beyond it are refused). Unbounded when 0.
	MaxConcurrentStreams uint32
	// ConnectionTimeout bounds the wait for a client's preface and first
	// SETTINGS (120 s when 0).
	ConnectionTimeout time.Duration
	// KeepaliveMinTime is the shortest interval between a client's pings
	// (5 min when 0); a client pinging more often than that more than
	// twice gets GOAWAY ENHANCE_YOUR_CALM. PermitWithoutStream allows
	// pings while no call runs.
	KeepaliveMinTime    time.Duration
	PermitWithoutStream bool
	// MaxConnectionIdle closes (GOAWAY) a connection without calls for
	// that long; never when 0.
	MaxConnectionIdle time.Duration
	// InitialWindowSize and InitialConnWindowSize are the receive windows
	// per stream and per connection (64 KiB when below that).
	InitialWindowSize     int32
	InitialConnWindowSize int32
	// ReadBufferSize and WriteBufferSize size the connection's buffers
	// (32 KiB when 0).
	ReadBufferSize  int
	WriteBufferSize int
	// Workers is how many idle call goroutines are kept parked (256 when
	// 0); calls beyond run on goroutines of their own.
	Workers int
	// Inline, if set, is offered each unary call whose one request
	// message has arrived, on the connection's reader goroutine, before a
	// goroutine is taken for its handler. It returns false to leave the
	// call to its handler (having answered nothing), or true when it took
	// the call: then it calls reply exactly once, from any goroutine, with
	// the response (a proto.Message, or an Encoded) or an error (a status
	// error sets the call's status). It must not block: the connection's
	// later frames wait for it. req is the request message's bytes, valid
	// until reply is called. ctx holds the peer and the call's metadata
	// (made when first looked up), not its deadline: it is never done,
	// and it is no grpc.ServerTransportStream's (no grpc.SetHeader).
	Inline func(ctx context.Context, method string, req []byte, reply func(any, error)) bool
}

const (
	defaultMaxRecvMsgSize    = 4 << 20
	defaultConnectionTimeout = 120 * time.Second
	defaultKeepaliveMinTime  = 5 * time.Minute
	defaultWindow            = 65535
	defaultBufferSize        = 32 << 10
	defaultWorkers           = 256
	// maxPingStrikes is how many pings too soon a client may send before
	// the GOAWAY, as grpc-go counts them.
	maxPingStrikes = 2
	// defaultPingTimeout is how often a client without calls may ping
	// when PermitWithoutStream is off (grpc-go's).
	defaultPingTimeout = 2 * time.Hour
)

// ErrServerStopped is Serve's error on a server already stopped.
var ErrServerStopped = errors.New("h2: the server has been stopped")

// Server serves registered gRPC services over HTTP/2.
type Server struct {
	opts     Options
	services map[string]*service // by full service name
	pool     pool

	mu       sync.Mutex
	lns      map[net.Listener]bool
	conns    map[*conn]bool
	stopped  bool
	draining bool
	connWG   sync.WaitGroup // each connection's goroutines
	drained  *sync.Cond     // signalled when a connection ends
}

type service struct {
	impl    any
	unary   map[string]*grpc.MethodDesc
	streams map[string]*grpc.StreamDesc
}

// NewServer returns a server with opts; register services before Serve.
func NewServer(opts Options) *Server {
	if opts.MaxRecvMsgSize <= 0 {
		opts.MaxRecvMsgSize = defaultMaxRecvMsgSize
	}
	if opts.ConnectionTimeout <= 0 {
		opts.ConnectionTimeout = defaultConnectionTimeout
	}
	if opts.KeepaliveMinTime <= 0 {
		opts.KeepaliveMinTime = defaultKeepaliveMinTime
	}
	if opts.InitialWindowSize < defaultWindow {
		opts.InitialWindowSize = defaultWindow
	}
	if opts.InitialConnWindowSize < defaultWindow {
		opts.InitialConnWindowSize = defaultWindow
	}
	if opts.ReadBufferSize <= 0 {
		opts.ReadBufferSize = defaultBufferSize
	}
	if opts.WriteBufferSize <= 0 {
		opts.WriteBufferSize = defaultBufferSize
	}
	if opts.Workers <= 0 {
		opts.Workers = defaultWorkers
	}
	s := &Server{opts: opts, services: map[string]*service{}, lns: map[net.Listener]bool{}, conns: map[*conn]bool{}}
	s.pool = pool{max: int32(opts.Workers), work: make(chan *stream)}
	s.drained = sync.NewCond(&s.mu)
	return s
}

// RegisterService registers a generated service (grpc.ServiceRegistrar):
// impl must implement desc.HandlerType. It panics on a mismatch or a
// service registered twice, as grpc-go does.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if st := reflect.TypeOf(impl); !st.Implements(ht) {
			panic(fmt.Sprintf("h2: RegisterService found the handler of type %v that does not satisfy %v", st, ht))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.services[desc.ServiceName]; dup {
		panic(fmt.Sprintf("h2: RegisterService found duplicate service registration for %q", desc.ServiceName))
	}
	svc := &service{impl: impl, unary: map[string]*grpc.MethodDesc{}, streams: map[string]*grpc.StreamDesc{}}
	for i := range desc.Methods {
		svc.unary[desc.Methods[i].MethodName] = &desc.Methods[i]
	}
	for i := range desc.Streams {
		svc.streams[desc.Streams[i].StreamName] = &desc.Streams[i]
	}
	s.services[desc.ServiceName] = svc
}

// method finds the handler of path ("/service/method"), or the status
// message grpc-go answers when there is none.
func (s *Server) method(path string) (svc *service, md *grpc.MethodDesc, sd *grpc.StreamDesc, errMsg string) {
	if !strings.HasPrefix(path, "/") {
		return nil, nil, nil, fmt.Sprintf("malformed method name: %q", path)
	}
	name := path[1:]
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return nil, nil, nil, fmt.Sprintf("malformed method name: %q", path)
	}
	service, method := name[:i], name[i+1:]
	svc = s.services[service]
	if svc == nil {
		return nil, nil, nil, fmt.Sprintf("unknown service %v", service)
	}
	if md = svc.unary[method]; md != nil {
		return svc, md, nil, ""
	}
	if sd = svc.streams[method]; sd != nil {
		return svc, nil, sd, ""
	}
	return nil, nil, nil, fmt.Sprintf("unknown method %v for service %v", method, service)
}

// Serve accepts connections on ln until Stop or GracefulStop (then it
// returns nil) or an accept error that is not temporary.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		ln.Close()
		return ErrServerStopped
	}
	s.lns[ln] = true
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.stopped || s.draining
			s.mu.Unlock()
			if done {
				return nil
			}
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.mu.Lock()
			delete(s.lns, ln)
			s.mu.Unlock()
			return err
		}
		delay = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.stopped || s.draining {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = true
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// connDone forgets c once its goroutines end.
func (s *Server) connDone(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.drained.Broadcast()
	s.mu.Unlock()
	s.connWG.Done()
}

// Stop closes the listeners and every connection (after a GOAWAY):
// running calls see their contexts cancelled.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	for ln := range s.lns {
		ln.Close()
	}
	clear(s.lns)
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	// GOAWAY first, so that clients know not to retry here; the sockets
	// close when it is written, or after a short wait for a writer that
	// cannot write.
	for _, c := range conns {
		c.goAway(http2.ErrCodeNo, "server stopped")
	}
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	expired := false
	for _, c := range conns {
		if !expired {
			select {
			case <-c.done:
			case <-t.C:
				expired = true
			}
		}
		c.close(errors.New("server stopped"))
	}
	s.connWG.Wait()
	s.pool.stop()
}

// GracefulStop closes the listeners, sends every connection GOAWAY and
// waits for the running calls to finish.
func (s *Server) GracefulStop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.draining = true
	for ln := range s.lns {
		ln.Close()
	}
	clear(s.lns)
	for c := range s.conns {
		c.shutdown()
	}
	for len(s.conns) > 0 {
		s.drained.Wait()
	}
	s.mu.Unlock()
	s.connWG.Wait()
	s.pool.stop()
}

// pool runs calls (stream.run) on goroutines that park between calls, up to max of
// them idle; a call with none idle gets a new goroutine.
type pool struct {
	max  int32
	idle atomic.Int32
	work chan *stream
	once sync.Once
	quit chan struct{}
	qmu  sync.Mutex
}

func (p *pool) quitc() chan struct{} {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.quit == nil {
		p.quit = make(chan struct{})
	}
	return p.quit
}

func (p *pool) run(s *stream) {
	select {
	case p.work <- s:
	default:
		go p.worker(s, p.quitc())
	}
}

func (p *pool) worker(s *stream, quit chan struct{}) {
	for {
		s.run()
		if p.idle.Add(1) > p.max {
			p.idle.Add(-1)
			return
		}
		select {
		case s = <-p.work:
			p.idle.Add(-1)
		case <-quit:
			p.idle.Add(-1)
			return
		}
	}
}

func (p *pool) stop() {
	q := p.quitc()
	p.once.Do(func() { close(q) })
}

var errConnClosed = errors.New("h2: connection closed")

// background is the root of every connection's context.
var background = context.Background()
