// Package cluster runs a raftmq broker node: a Replica (store + raft) with
// the raft transport between nodes, the RocketMQ remoting server clients
// talk to, forwarding of leader-only requests, name-server route answers,
// an HTTP endpoint for metrics and status, and admin operations
// (leadership transfer, membership change). Every group has a cluster ID
// that its members record and check; clusterid.go says where it comes
// from and where it is carried.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/cluster/filter"
	"github.com/raftmq/raftmq/cluster/locks"
	"github.com/raftmq/raftmq/cluster/membership"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/raftlog/transport"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// Peer is a node's two addresses: the one clients use (RocketMQ remoting)
// and the raft one.
type Peer struct {
	Client string `json:"client"`
	Raft   string `json:"raft"`
	// GRPC, if known, is the address RocketMQ 5 clients reach the node's
	// gRPC service at (routes name the leader's).
	GRPC string `json:"grpc,omitempty"`
}

// ParsePeer parses "ID=CLIENT/RAFT[/GRPC]", e.g.
// "1=127.0.0.1:10911/127.0.0.1:10921/127.0.0.1:8081".
func ParsePeer(s string) (uint64, Peer, error) {
	idS, rest, ok := strings.Cut(s, "=")
	client, raftAddr, ok2 := strings.Cut(rest, "/")
	raftAddr, grpcAddr, hasGRPC := strings.Cut(raftAddr, "/")
	if !ok || !ok2 {
		return 0, Peer{}, fmt.Errorf("cluster: peer %q: want ID=CLIENTADDR/RAFTADDR[/GRPCADDR]", s)
	}
	id, err := strconv.ParseUint(idS, 10, 64)
	if err != nil || id == 0 {
		return 0, Peer{}, fmt.Errorf("cluster: peer %q: bad node id", s)
	}
	addrs := []string{client, raftAddr}
	if hasGRPC {
		addrs = append(addrs, grpcAddr)
	}
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return 0, Peer{}, fmt.Errorf("cluster: peer %q: %w", s, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return 0, Peer{}, fmt.Errorf("cluster: peer %q: port %q: want 0 to 65535", s, port)
		}
	}
	return id, Peer{Client: client, Raft: raftAddr, GRPC: grpcAddr}, nil
}

// Config configures a broker node.
type Config struct {
	ID  uint64
	Dir string
	// Peers is the initial membership, this node included (ignored for
	// nodes that already have state, except to learn addresses).
	Peers map[uint64]Peer
	// Join: this node is being added to a running group; it starts empty
	// and waits for the leader.
	Join bool
	// HTTPAddr serves /metrics and /status ("" disables); with an ACL, to
	// clients with credentials only (httpauth.go).
	HTTPAddr string
	// HTTPToken, if set, is a bearer token that opens /metrics, /status
	// and /debug/pprof/ on the HTTP port (Authorization: Bearer), which
	// then need a credential even without an ACL (httpauth.go).
	HTTPToken   string
	BrokerName  string // default DefaultBrokerName
	ClusterName string // default DefaultClusterName
	// ClusterID is the group's cluster ID (--cluster-id), the same on
	// every member, best chosen at random once (NewClusterID); 0: the one
	// recorded in Dir; required to bootstrap several members (see
	// clusterid.go for upgrades and joins). A node
	// whose Dir records another one refuses to start.
	ClusterID   uint64
	Flush       commitlog.FlushMode
	SegmentSize int64
	// AutoCreateTopics creates an unknown topic (4 queues) on first send.
	AutoCreateTopics bool
	// NameServers, if set, are the name servers this node registers with
	// (see namesrv.go).
	NameServers []string
	// FailoverRoutes lists each follower in routes as a write-only broker
	// name of its own, so that RocketMQ clients' send retries reach a live
	// node when the leader dies (see FailoverBrokerName).
	FailoverRoutes bool
	// FailoverWriteQueues is how many write queues each failover name
	// lists (0: the topic's count; an orderly topic always lists its
	// count, see failoverWriteQueues); see FailoverQueues. It must be the
	// same on every node of a group.
	FailoverWriteQueues int32
	// SendTimeout bounds the wait for commit (raftlog.DefaultWaitTimeout when
	// zero); the replica's WaitTimeout is this.
	SendTimeout time.Duration
	// LeaderWait bounds how long a request that needs the leader waits
	// for one to be elected (or reachable) before it is refused (default
	// 2 s; negative: no wait).
	LeaderWait time.Duration
	// Raft is raft's timing (tick, election and heartbeat ticks, the
	// commit-notify delay), passed to raftlog as it is; zero fields take
	// raftlog's defaults (raftlog.Default*).
	Raft raftlog.Timing
	// MaxFrame bounds remoting frames (default 16 MiB), and gRPC messages.
	MaxFrame int
	// GRPCAddr, if set, serves RocketMQ 5's gRPC MessagingService there
	// (grpc.go), with the client connection limits below (MaxClientConns,
	// ClientIdleTimeout, ClientReadTimeout for the handshake) and TLS as
	// the client port has it. The node's Peer.GRPC, if empty, is this.
	GRPCAddr string
	// GRPCOptional: GRPCAddr is a default, not asked for; if it cannot be
	// listened on, the node logs why and runs without the gRPC service.
	GRPCOptional bool
	// GRPCMaxStreams bounds concurrent calls per gRPC connection
	// (DefaultGRPCMaxStreams when 0).
	GRPCMaxStreams uint32
	// GRPCTransport is the gRPC server's HTTP/2 transport:
	// GRPCTransportLean (protocol/grpc/h2: one reader and one writer
	// goroutine per connection; the default when empty) or
	// GRPCTransportGo (grpc-go's server).
	GRPCTransport string
	// Client connection limits (protocol/remoting's Server fields of the
	// same names; 0: their defaults, negative: no limit): a frame must
	// arrive within ClientReadTimeout once started; a connection with no
	// request in flight is closed after ClientIdleTimeout; at most
	// MaxClientConns connections; per connection at most
	// MaxInflightRequests requests and MaxInflightBytes bytes read and
	// not yet answered; MaxInflightTotal bounds those bytes over every
	// client connection of the node.
	ClientReadTimeout, ClientIdleTimeout time.Duration
	MaxClientConns, MaxInflightRequests  int
	MaxInflightBytes, MaxInflightTotal   int64
	// PreferredLeader, if set, is the node that should lead whenever it is
	// up and caught up: the leader hands leadership to it.
	PreferredLeader uint64
	// BindIP, if set, is the source address for outgoing raft connections
	// and for sends forwarded to the leader.
	BindIP string
	// Routes, if set, are the addresses this node dials to reach the given
	// peers, overriding the addresses in the membership (which every node
	// shares and clients are told). The chaos harness routes each directed
	// link through its own proxy this way.
	Routes map[uint64]Peer
	// FaultEndpoint accepts FAULT (9005) requests: tick-rate and clock skew
	// for the chaos harness. Off by default; only builds with -tags mutant
	// (internal/failpoint) have it, and Start refuses it in others.
	FaultEndpoint bool
	// ACLFile, if set, is a plain_acl.yml: the group's ACL until the log
	// holds one, then proposed as the group's by the leader (see acl.go).
	ACLFile string
	// ACLKey is the group's ACL key (acl.KeySize bytes, the same on every
	// node): secret keys the node proposes are sealed with it, and it
	// opens those the log holds (see acl.go). Required with ACLFile.
	ACLKey []byte
	// TLS, if set, is the node's TLS on its client, raft and HTTP ports
	// and on its own client connections (see TLSConfig).
	TLS *TLSConfig
	// HTTPHandlers, if set, adds handlers to the HTTP port's mux (the web
	// console: package console, set up by cmd/raftmq).
	HTTPHandlers func(mux *http.ServeMux)
	// MaxTimerDelay is the longest delay a timer message may ask for
	// (default schedule.DefaultMaxDelay, 3 days).
	MaxTimerDelay time.Duration
	// Transactions (package txn): a half message older than TxnTimeout
	// is checked back with its producer, again every TxnCheckInterval, at
	// most TxnCheckMax times, then discarded (defaults 6 s, 60 s, 15, as
	// RocketMQ's transactionTimeOut, transactionCheckInterval and
	// transactionCheckMax).
	TxnTimeout       time.Duration
	TxnCheckInterval time.Duration
	TxnCheckMax      int
	// Store settings beyond the above (Dir, FS, Flush, SegmentSize are
	// taken from this Config).
	Store  store.Config
	FS     vfs.FS
	Logger *slog.Logger
	// LogLevel, if set, is Logger's level, which UPDATE_BROKER_CONFIG's
	// logLevel changes at runtime (nil: fixed).
	LogLevel *slog.LevelVar
}

// Broker is a running node.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	rep  *Replica
	disk diskState // members' disks, for the disk-full hand-off (disk.go)
	tr   *transport.Transport
	srv  *remoting.Server
	http *http.Server
	grpc grpcServer // nil without Config.GRPCAddr
	met  *Metrics

	clientLn, raftLn, httpLn, grpcLn net.Listener
	tls                              *tlsSet // nil without TLS

	grpcSvc *grpcService // the gRPC front end; nil without Config.GRPCAddr

	mu    sync.Mutex
	peers map[uint64]Peer
	fwd   map[string]*remoting.Conn // leader client address -> conn

	offs *offsetCommitter
	reg  *namesrv.Registrar // nil without name servers

	members  *membership.Registry // clients and groups from heartbeats
	filters  *filter.Cache        // compiled subscription expressions
	locks    *locks.Manager       // orderly consumers' queue locks (leader)
	lockTerm atomic.Uint64        // the term locks was last used in
	watched  map[*remoting.ServerConn]struct{}
	refused  remoting.Refusals // refusals logged once
	traces   sendTraces        // sampled sends' stage times (sendtrace.go)
	// forwardMismatches counts forwarded requests of another cluster
	// refused (checkCluster).
	forwardMismatches atomic.Uint64

	// The failpoints (internal/failpoint) from Config.Store.Failpoints,
	// and the state of those failpoints and of the fault endpoint
	// (failpoints_mutant.go; an empty struct without -tags mutant).
	fp   failpoint.Set
	fps  fpState
	acl  aclState
	gset groupSettingsCache // the group-wide settings (brokerconfig.go)
	pop  *popState          // pop consumption (pop.go)

	// removed is closed once this node learns it was removed from the
	// group (members.go).
	removed     chan struct{}
	removedOnce sync.Once
	selfRemoved chan struct{} // onConfChange applied this node's removal

	stopc chan struct{}
	// life is cancelled when the node stops: the parent of the contexts
	// that carry out requests whose client may have gone (detach).
	life     context.Context
	stopLife context.CancelFunc
	drops    dropLog // one-way requests dropped, logged within a rate
	wg       sync.WaitGroup
}

const peersFile = "peers.json"

// DefaultLeaderWait is Config.LeaderWait's default: long enough for an
// election after a leader dies (about a second with the default ticks),
// shorter than the 3 s a RocketMQ client gives a send.
const DefaultLeaderWait = 2 * time.Second

// The names a group registers under with the name servers unless told
// otherwise: brokerName and RocketMQ's default cluster name.
const (
	DefaultBrokerName  = "raftmq"
	DefaultClusterName = "DefaultCluster"
)

// Start opens the node's store and starts serving.
func Start(cfg Config) (*Broker, error) {
	if cfg.BrokerName == "" {
		cfg.BrokerName = DefaultBrokerName
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = DefaultClusterName
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = raftlog.DefaultWaitTimeout
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = remoting.DefaultMaxFrame
	}
	switch cfg.GRPCTransport {
	case "":
		cfg.GRPCTransport = GRPCTransportLean
	case GRPCTransportGo, GRPCTransportLean:
	default:
		return nil, fmt.Errorf("cluster: gRPC transport %q: want %q or %q", cfg.GRPCTransport, GRPCTransportGo, GRPCTransportLean)
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = DefaultLeaderWait
	}
	if cfg.MaxTimerDelay <= 0 {
		cfg.MaxTimerDelay = schedule.DefaultMaxDelay
	}
	if cfg.TxnTimeout <= 0 {
		cfg.TxnTimeout = txn.DefaultTimeout
	}
	if cfg.TxnCheckInterval <= 0 {
		cfg.TxnCheckInterval = txn.DefaultCheckInterval
	}
	if cfg.TxnCheckMax <= 0 {
		cfg.TxnCheckMax = txn.DefaultCheckMax
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default()
	}
	self, ok := cfg.Peers[cfg.ID]
	if !ok {
		return nil, fmt.Errorf("cluster: node %d is not in its own peer list", cfg.ID)
	}
	b := &Broker{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), peers: map[uint64]Peer{}, fwd: map[string]*remoting.Conn{}, stopc: make(chan struct{}), removed: make(chan struct{}), selfRemoved: make(chan struct{}, 1),
		fp: cfg.Store.Failpoints, members: membership.New(0), filters: filter.NewCache(0), locks: locks.New(0), watched: map[*remoting.ServerConn]struct{}{}, pop: newPopState()}
	b.life, b.stopLife = context.WithCancel(context.Background())
	b.pop.traces.checkpoints = func() (uint64, uint64) { return b.rep.Store().Checkpoints() }
	if !failpoint.Built && cfg.FaultEndpoint {
		return nil, fmt.Errorf("cluster: the fault endpoint: %w", failpoint.ErrNotBuilt)
	}
	if failpoint.Built {
		b.warnFailpoints()
	}
	if err := b.loadPeers(); err != nil {
		return nil, err
	}
	stored := maps.Clone(b.peers) // the address book of a node with state
	for id, p := range cfg.Peers {
		if _, ok := b.peers[id]; !ok || id == cfg.ID {
			b.peers[id] = p
		}
	}
	var err error
	if b.tls, err = cfg.TLS.load(); err != nil {
		return nil, err
	}
	fail := func(err error) (*Broker, error) {
		b.closeListeners()
		return nil, err
	}
	if b.clientLn, err = net.Listen("tcp", self.Client); err != nil {
		return fail(fmt.Errorf("cluster: listen for clients: %w", err))
	}
	if b.raftLn, err = net.Listen("tcp", self.Raft); err != nil {
		return fail(fmt.Errorf("cluster: listen for raft: %w", err))
	}
	if cfg.HTTPAddr != "" {
		if b.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return fail(fmt.Errorf("cluster: listen for http: %w", err))
		}
	}
	if cfg.GRPCAddr != "" {
		b.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr)
		switch {
		case err != nil && cfg.GRPCOptional:
			b.log.Warn("cluster: the default gRPC port is not free; RocketMQ 5 clients are not served (give --grpc ADDR)", "addr", cfg.GRPCAddr, "err", err)
			b.grpcLn = nil
		case err != nil:
			return fail(fmt.Errorf("cluster: listen for grpc: %w", err))
		}
		if p := b.peers[cfg.ID]; b.grpcLn != nil && p.GRPC == "" {
			p.GRPC = cfg.GRPCAddr
			if h, _, err := net.SplitHostPort(cfg.GRPCAddr); err == nil && h == "" {
				p.GRPC = b.grpcLn.Addr().String()
			}
			b.peers[cfg.ID] = p
		}
	}
	b.met = NewMetrics(b.scrapeFuncs())

	var bootstrap []raft.Peer
	if !cfg.Join {
		ids := make([]uint64, 0, len(cfg.Peers))
		for id := range cfg.Peers {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			ctx, _ := json.Marshal(cfg.Peers[id])
			bootstrap = append(bootstrap, raft.Peer{ID: id, Context: ctx})
		}
	}
	if cfg.ACLKey != nil {
		if b.acl.box, err = acl.NewBox(cfg.ACLKey); err != nil {
			return nil, fmt.Errorf("cluster: ACL key: %w", err)
		}
	}
	if cfg.ACLFile != "" && b.acl.box == nil {
		return nil, errors.New("cluster: --acl-file needs the group's ACL key (--acl-key-file), which seals the secret keys the log holds")
	}
	if cfg.ACLFile != "" {
		c, err := acl.LoadFile(cfg.ACLFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: --acl-file: %w", err)
		}
		if b.acl.file, err = acl.NewPolicy(c); err != nil {
			return nil, fmt.Errorf("cluster: --acl-file: %w", err)
		}
	}
	scfg := cfg.Store
	scfg.Dir, scfg.FS, scfg.Flush, scfg.SegmentSize = cfg.Dir, cfg.FS, cfg.Flush, cfg.SegmentSize
	scfg.ApplyACL = applyACL
	if failpoint.Built && cfg.FaultEndpoint {
		b.startFaultEndpoint(&scfg)
	}
	if ap, err := netip.ParseAddrPort(self.Client); err == nil {
		scfg.StoreHost = ap
	} else if ap, err := net.ResolveTCPAddr("tcp", self.Client); err == nil {
		scfg.StoreHost = ap.AddrPort()
	}
	b.rep, err = OpenReplica(ReplicaConfig{
		ID: cfg.ID, Store: scfg, Bootstrap: bootstrap,
		ClusterID: cfg.ClusterID, Names: cfg.ClusterName + "/" + cfg.BrokerName,
		Raft: cfg.Raft, WaitTimeout: cfg.SendTimeout,
		Metrics: b.met, OnConfChange: b.onConfChange, Logger: b.log,
	})
	if err != nil {
		return fail(err)
	}
	b.checkPeers(stored)
	raftPeers := map[uint64]string{}
	for id, p := range b.peers {
		if id != cfg.ID {
			raftPeers[id] = b.route(id, p).Raft
		}
	}
	var local net.Addr
	if cfg.BindIP != "" {
		local = &net.TCPAddr{IP: net.ParseIP(cfg.BindIP)}
	}
	b.tr, err = transport.New(transport.Config{
		ID: cfg.ID, ClusterID: b.rep.ClusterID(), LearnClusterID: b.rep.learnClusterID, Listener: b.raftLn, Peers: raftPeers,
		Handler:        b.rep.Step,
		Unreachable:    b.rep.Node().ReportUnreachable,
		SnapshotStatus: b.rep.Node().ReportSnapshot,
		LocalAddr:      local,
		Logger:         b.log,
		TLS:            b.tls.raftTLS(),
	})
	if err != nil {
		b.rep.Close()
		return fail(err)
	}
	b.offs = newOffsetCommitter(b)
	b.srv = &remoting.Server{Handler: b.handle, Inline: b.inline, MaxFrame: cfg.MaxFrame, Logger: b.log,
		ReadTimeout: cfg.ClientReadTimeout, IdleTimeout: cfg.ClientIdleTimeout, MaxConns: cfg.MaxClientConns,
		MaxInflightRequests: cfg.MaxInflightRequests, MaxInflightBytes: cfg.MaxInflightBytes}
	if cfg.MaxInflightTotal != 0 {
		b.srv.Budget = remoting.NewBudget(cfg.MaxInflightTotal)
	}
	if failpoint.On(b.fp, failpoint.NoClientDeadlines) {
		noClientDeadlines(b.srv)
	}
	b.tls.serveTLS(b.srv)
	if b.grpcLn != nil {
		b.startGRPC(b.grpcLn)
	}

	b.tr.Start()
	b.rep.Start(b.tr)
	b.wg.Add(3)
	go func() { defer b.wg.Done(); _ = b.srv.Serve(b.clientLn) }()
	go func() { defer b.wg.Done(); b.offs.run(b.stopc) }()
	go func() { defer b.wg.Done(); b.expireClients() }()
	if b.acl.file != nil {
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.seedACL() }()
	}
	b.wg.Add(4)
	go func() { defer b.wg.Done(); b.scheduleLoop() }()
	go func() { defer b.wg.Done(); b.txnCheckLoop() }()
	go func() { defer b.wg.Done(); b.popBatcher() }()
	go func() { defer b.wg.Done(); b.popReviveLoop() }()
	if len(cfg.NameServers) > 0 {
		b.reg = namesrv.NewRegistrar(namesrv.RegistrarConfig{Addrs: cfg.NameServers, State: b.registrations, Logger: b.log, Dial: b.tls.dialer(nil)})
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.watchRegistration(b.reg) }()
	}
	if cfg.PreferredLeader != 0 {
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.preferLeader() }()
	}
	b.wg.Add(4)
	go func() { defer b.wg.Done(); b.announceLevels() }()
	go func() { defer b.wg.Done(); b.diskHandoff() }()
	go func() { defer b.wg.Done(); b.promoteLearners() }()
	go func() { defer b.wg.Done(); b.watchRemoval() }()
	if b.httpLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(b.met.Reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", loopbackOnly(b.log, pprof.Index))
		mux.HandleFunc("/debug/pprof/profile", loopbackOnly(b.log, pprof.Profile))
		mux.HandleFunc("/debug/pprof/trace", loopbackOnly(b.log, pprof.Trace))
		mux.HandleFunc("/debug/sendtrace", loopbackOnly(b.log, b.serveSendTrace))
		mux.HandleFunc("/debug/poptrace", loopbackOnly(b.log, b.servePopTrace))
		mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(b.Status())
		})
		if cfg.HTTPHandlers != nil {
			cfg.HTTPHandlers(mux)
		}
		b.http = &http.Server{Handler: b.httpAuth(mux), ReadHeaderTimeout: 5 * time.Second,
			ConnState: func(_ net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					b.met.httpConns.Add(1)
				case http.StateClosed, http.StateHijacked:
					b.met.httpConns.Add(-1)
				}
			}}
		b.wg.Add(1)
		httpLn := b.tls.httpListener(b.httpLn, remoting.NewTLSRefusalLogger(b.log.With("port", "http")))
		go func() { defer b.wg.Done(); _ = b.http.Serve(httpLn) }()
	}
	b.log.Info("cluster: broker started", "client", b.clientLn.Addr().String(), "raft", b.raftLn.Addr().String(), "http", cfg.HTTPAddr, "grpc", b.GRPCAddr(), "dir", cfg.Dir)
	return b, nil
}

// loopbackOnly serves h to clients on the same host only: profiles reveal
// memory contents and cost CPU, so they are not for whoever reaches the
// HTTP port, even with credentials (httpAuth).
func loopbackOnly(log *slog.Logger, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			log.Warn("cluster: /debug/pprof refused to a remote client", "client", r.RemoteAddr)
			http.Error(w, "/debug/pprof is served to loopback clients only", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func (b *Broker) closeListeners() {
	for _, l := range []net.Listener{b.clientLn, b.raftLn, b.httpLn, b.grpcLn} {
		if l != nil {
			l.Close()
		}
	}
}

// Close stops serving and closes the store.
func (b *Broker) Close() error {
	if b.reg != nil {
		b.reg.Close() // unregisters while this node still answers
	}
	close(b.stopc)
	b.stopLife()
	if b.srv != nil {
		b.srv.Close()
	}
	if b.http != nil {
		b.http.Close()
	}
	if b.grpc != nil {
		b.grpc.Stop()
	}
	b.wg.Wait()
	b.offs.flush()
	err := b.rep.Close()
	if b.tr != nil {
		b.tr.Close()
	}
	b.mu.Lock()
	for _, c := range b.fwd {
		c.Close()
	}
	b.mu.Unlock()
	return err
}

// Done is closed when the raft node stops (Close or a fatal error).
func (b *Broker) Done() <-chan struct{} { return b.rep.Node().Done() }

// Err is the fatal error that stopped the node, if any.
func (b *Broker) Err() error { return b.rep.Node().Err() }

// Replica returns the node's replica.
func (b *Broker) Replica() *Replica { return b.rep }

// ClientAddr is the address clients connect to.
func (b *Broker) ClientAddr() string { return b.clientLn.Addr().String() }

// NodeStatus is what /status and CLUSTER_STATUS answer.
type NodeStatus struct {
	Status       rlStatus        `json:"raft"`
	Peers        map[string]Peer `json:"peers"`
	Broker       string          `json:"broker"`
	ClusterID    string          `json:"clusterId"` // 16 hex digits; "" while a joining node has not learnt it
	LeaderReady  bool            `json:"leaderReady"`
	DiskFull     bool            `json:"diskFull"`
	DiskUsed     float64         `json:"diskUsedRatio"`
	DiskFree     int64           `json:"diskFreeBytes"`
	DiskStalled  bool            `json:"diskStalled,omitempty"` // the raft goroutine waits for space
	LogFirst     uint64          `json:"logFirstIndex"`
	LogBytes     int64           `json:"logBytes"`
	SegmentCount int             `json:"segments"`
	Retention    RetentionStatus `json:"retention"`
	// FormatLevel is the members' entry-format levels (level.go).
	FormatLevel FormatLevelStatus `json:"formatLevel"`
}

// Status returns this node's status.
func (b *Broker) Status() NodeStatus {
	st := b.rep.Node().Status()
	ns := NodeStatus{Status: rlStatus(st), Peers: map[string]Peer{}, Broker: b.cfg.BrokerName, ClusterID: b.clusterIDString(),
		LeaderReady: b.rep.Node().LeaderReady(), DiskFull: b.rep.DiskFull(), DiskUsed: b.rep.Store().DiskUsedRatio(),
		DiskFree: b.rep.Store().DiskFreeBytes(), DiskStalled: b.rep.Node().DiskStalled()}
	b.mu.Lock()
	for id, p := range b.peers {
		ns.Peers[strconv.FormatUint(id, 10)] = p
	}
	b.mu.Unlock()
	l := b.rep.Store().Log()
	ns.LogFirst = l.FirstIndex()
	ns.LogBytes = l.EndPosition() - l.MinPosition()
	ns.SegmentCount = len(l.Segments())
	ns.Retention = retentionStatus(b.rep.Store().Retention())
	ns.FormatLevel = b.formatLevelStatus(st)
	return ns
}

func (b *Broker) gauges() map[string]float64 {
	st := b.rep.Node().Status()
	isLeader := 0.0
	if st.Leader == b.cfg.ID {
		isLeader = 1
	}
	s := b.rep.Store()
	l, ret := s.Log(), s.Retention()
	full, ready, stalled := 0.0, 0.0, 0.0
	if b.rep.DiskFull() {
		full = 1
	}
	if b.rep.Node().DiskStalled() {
		stalled = 1
	}
	if b.rep.Node().LeaderReady() {
		ready = 1
	}
	_, inFlight := s.PopTotals()
	return map[string]float64{
		"raftmq_pop_in_flight":                   float64(inFlight),
		"raftmq_raft_term":                       float64(st.Term),
		"raftmq_raft_leader":                     float64(st.Leader),
		"raftmq_raft_is_leader":                  isLeader,
		"raftmq_raft_leader_ready":               ready,
		"raftmq_raft_commit_index":               float64(st.Commit),
		"raftmq_raft_voters":                     float64(len(st.Voters)),
		"raftmq_raft_followers_active":           float64(max(len(st.Active)-1, 0)),
		"raftmq_applied_index":                   float64(st.Applied),
		"raftmq_log_first_index":                 float64(l.FirstIndex()),
		"raftmq_log_last_index":                  float64(st.LastIndex),
		"raftmq_commitlog_bytes":                 float64(l.EndPosition() - l.MinPosition()),
		"raftmq_disk_used_ratio":                 s.DiskUsedRatio(),
		"raftmq_disk_full":                       full,
		"raftmq_disk_free_bytes":                 float64(s.DiskFreeBytes()),
		"raftmq_disk_stalled":                    stalled,
		"raftmq_disk_clean_ratio":                ret.CleanRatio,
		"raftmq_disk_force_clean_ratio":          ret.ForceRatio,
		"raftmq_disk_full_ratio":                 ret.FullRatio,
		"raftmq_retention_file_reserved_seconds": ret.FileReservedTime.Seconds(),
	}
}

// scrapeFuncs are the values /metrics reads at scrape time (metrics.go).
func (b *Broker) scrapeFuncs() scrapeFuncs {
	return scrapeFuncs{
		gauges: b.gauges,
		connections: func() map[string]int {
			m := map[string]int{"remoting": 0, "raft": 0, "http": int(b.met.httpConns.Load())}
			if b.srv != nil {
				m["remoting"] = b.srv.Conns()
			}
			if b.tr != nil {
				for _, ps := range b.tr.Stats() {
					if ps.Connected {
						m["raft"]++
					}
				}
			}
			return m
		},
		leaderChanges: func() uint64 { return b.rep.Node().LeaderChanges() },
		forcedUnconsumed: func() uint64 {
			return b.rep.Store().ForcedUnconsumedMessages()
		},
		clusterRefusals: func() (raft, forward uint64) {
			if b.tr != nil {
				raft = b.tr.ClusterMismatches()
			}
			return raft, b.forwardMismatches.Load()
		},
		groupLags: func() []store.GroupLag { return b.rep.Store().ConsumerLags() },
		followerLag: func() map[uint64]uint64 {
			st := b.rep.Node().Status()
			out := map[uint64]uint64{}
			for id, match := range st.Progress { // leader only
				if id != b.cfg.ID {
					out[id] = st.LastIndex - min(match, st.LastIndex)
				}
			}
			return out
		},
	}
}

// clusterIDString is the cluster ID as /status shows it ("" while a
// joining node has not learnt it).
func (b *Broker) clusterIDString() string {
	if id := b.rep.ClusterID(); id != 0 {
		return FormatClusterID(id)
	}
	return ""
}

// checkPeers logs, loudly, where the --peer list disagrees with what the
// node has recorded: the address book (raft/peers.json, stored) and the
// raft membership. The recorded membership wins (it changes only through
// raft, `raftmq admin node add|remove`); the flags only add addresses of
// members the address book lacks. A node started with another group's
// directory would show here, but its cluster ID refuses it first.
func (b *Broker) checkPeers(stored map[uint64]Peer) {
	for id, p := range b.cfg.Peers {
		if q, ok := stored[id]; ok && q != p && id != b.cfg.ID {
			b.log.Warn("cluster: --peer disagrees with the address book recorded in the data directory: using the recorded address (change it with admin node remove/add)",
				"member", id, "flag", p.Client+"/"+p.Raft, "recorded", q.Client+"/"+q.Raft, "file", filepath.Join(b.cfg.Dir, "raft", peersFile))
		}
	}
	_, cs, err := b.rep.rs.InitialState()
	if err != nil || len(cs.GetVoters())+len(cs.GetLearners()) == 0 {
		return // a new node: the flags are the membership
	}
	members := map[uint64]bool{}
	for _, id := range append(cs.GetVoters(), cs.GetLearners()...) {
		members[id] = true
	}
	var missing, extra []uint64
	for id := range members {
		if _, ok := b.cfg.Peers[id]; !ok {
			missing = append(missing, id)
		}
	}
	for id := range b.cfg.Peers {
		if !members[id] {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(extra) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
		b.log.Warn("cluster: --peer disagrees with the raft membership recorded in the data directory: the recorded membership holds (it changes only through admin node add/remove)",
			"members", cs.GetVoters(), "learners", cs.GetLearners(), "members_not_in_flags", missing, "flags_not_members", extra)
	}
}

// peer address book: learnt from the flags and from membership changes,
// kept in raft/peers.json so that a restarted node knows nodes added later.

func (b *Broker) loadPeers() error {
	data, err := vfs.ReadFile(b.cfg.FS, filepath.Join(b.cfg.Dir, "raft", peersFile))
	if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: read peers: %w", err)
	}
	m := map[string]Peer{}
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("cluster: %s: %w", peersFile, err)
	}
	for k, p := range m {
		id, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return fmt.Errorf("cluster: %s: bad id %q", peersFile, k)
		}
		b.peers[id] = p
	}
	return nil
}

func (b *Broker) savePeersLocked() error {
	m := map[string]Peer{}
	for id, p := range b.peers {
		m[strconv.FormatUint(id, 10)] = p
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	dir := filepath.Join(b.cfg.Dir, "raft")
	if err := b.cfg.FS.MkdirAll(dir, vfs.DirMode); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(b.cfg.FS, dir, peersFile, data)
}

// onConfChange runs on the raft goroutine once a membership change is
// applied: it updates the address book and the transport.
func (b *Broker) onConfChange(cc *pb.ConfChangeV2, cs *pb.ConfState) {
	var p Peer
	if len(cc.GetContext()) > 0 {
		_ = json.Unmarshal(cc.GetContext(), &p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		switch c.GetType() {
		case pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeAddLearnerNode:
			if p.Raft != "" {
				b.peers[id] = p
				if id != b.cfg.ID && b.tr != nil {
					b.tr.AddPeer(id, b.route(id, p).Raft)
				}
			}
		case pb.ConfChangeType_ConfChangeRemoveNode:
			delete(b.peers, id)
			if b.tr != nil {
				b.tr.RemovePeer(id)
			}
		}
	}
	if err := b.savePeersLocked(); err != nil {
		b.log.Error("cluster: save peers", "err", err)
	}
	b.log.Info("cluster: membership changed", "voters", cs.GetVoters(), "learners", cs.GetLearners())
	for _, c := range cc.GetChanges() {
		if c.GetType() == pb.ConfChangeType_ConfChangeRemoveNode && c.GetNodeId() == b.cfg.ID {
			// Confirmed with the others first (watchRemoval): a node
			// re-added under its id replays its old removal too.
			select {
			case b.selfRemoved <- struct{}{}:
			default:
			}
		}
	}
}

// route returns the addresses to dial for peer id: Config.Routes' entry if
// there is one, else p (its membership addresses).
func (b *Broker) route(id uint64, p Peer) Peer {
	if r, ok := b.cfg.Routes[id]; ok {
		return r
	}
	return p
}

func (b *Broker) peer(id uint64) (Peer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.peers[id]
	return p, ok
}

// preferLeader hands leadership to the preferred node when this node leads
// and the preferred one is a voter whose log has caught up.
func (b *Broker) preferLeader() {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		to := b.cfg.PreferredLeader
		n := b.rep.Node()
		st := n.Status()
		if to == b.cfg.ID || !n.LeaderReady() || st.Transferee != 0 || b.peerDiskFull(to) {
			continue
		}
		if match, ok := st.Progress[to]; !ok || match < st.Commit {
			continue
		}
		b.log.Info("cluster: handing leadership to the preferred leader", "to", to)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.TransferLeader(ctx, to)
		cancel()
	}
}
