package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// brokerFlags are the settings of one node, shared by `broker` and the
// processes `cluster` starts.
type brokerFlags struct {
	id          uint64
	data        string
	peers       []string
	peerList    []string // --peers: the same, comma-separated
	join        bool
	httpAddr    string
	grpcAddr    string
	grpcTrans   string
	httpToken   string // --http-token-file
	flush       string
	segmentSize int64
	warmAhead   int64
	cacheWindow int64
	directIO    int
	cqOpenFiles int
	maxTimer    time.Duration
	aclFile     string
	aclKeyFile  string
	tls         serverTLSFlags // --tls-* (cert.go)
	clientRead  time.Duration
	clientIdle  time.Duration
	maxConns    int
	maxInflight int
	inflightB   int64
	inflightAll int64
	memLimit    string
	memLimitV   memoryLimit // parsed by config
	txnTimeout  time.Duration
	txnInterval time.Duration
	txnMax      int
	autoCreate  bool
	bindIP      string
	tick        time.Duration
	notifyDelay time.Duration
	leaderWait  time.Duration
	failover    bool
	failoverQs  int
	namesrv     string
	cluster     string
	clusterID   string
	broker      string
	preferred   uint64
	ret         retentionFlags // --file-reserved-time, --delete-when, --disk-*-ratio (config_broker.go)
	console     consoleFlags   // --console, --console-runs (console.go)
	// Chaos-testing settings, hidden from --help. --fault-endpoint and
	// --mutant work only in a binary built with -tags mutant.
	faultEndpoint bool
	powerLoss     bool
	mutants       string
	routes        []string
	lazy          *vfs.LazyFS // set in --power-loss mode
}

// httpAuto is --http's default: the HTTP port is the client port + 20
// (httpPortOffset) on the client address's host.
const (
	httpAuto       = "auto"
	httpPortOffset = 20
)

// autoHTTPAddr is --http auto's address for a node whose client address
// is client (port 0, any free port, gives port 0 too).
func autoHTTPAddr(client string) (string, error) {
	host, port, err := net.SplitHostPort(client)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err == nil && p == 0 {
		return net.JoinHostPort(host, "0"), nil
	}
	if err != nil || p < 0 || p+httpPortOffset > 65535 {
		return "", fmt.Errorf("client port %q + %d is not a port; give --http HOST:PORT or --http \"\"", port, httpPortOffset)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+httpPortOffset)), nil
}

// aclKeyName is the ACL key's file in a data directory, read when
// --acl-key-file is not given.
const aclKeyName = "acl.key"

// exitCorrupt is the exit status of a broker that refuses to start because
// its synced data is corrupt (the chaos harness tells it from a crash).
const exitCorrupt = 3

// exitOtherCluster is the exit status of a broker that refuses to start
// because its data directory belongs to another cluster
// (cluster.ErrOtherCluster): restarting it cannot help.
const exitOtherCluster = 4

// sizeText spells a default byte count in a flag's help: "64 MiB".
func sizeText(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.suffix)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// countText spells a default count in a flag's help with thousands
// separators: "10,000".
func countText(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (f *brokerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Uint64Var(&f.id, "id", 0, "this node's raft id (>0)")
	fl.StringVar(&f.data, "data", "", "data directory (default ./raftmq-data/n<ID>)")
	fl.StringArrayVar(&f.peers, "peer", nil, "a member as ID=CLIENTADDR/RAFTADDR[/GRPCADDR], repeated for every member including this one")
	fl.StringSliceVar(&f.peerList, "peers", nil, "every member at once, comma-separated: 1=C1/R1,2=C2/R2,3=C3/R3 (combines with --peer)")
	fl.BoolVar(&f.join, "join", false, "join a running group (after `raftmq admin node add` on it) instead of bootstrapping")
	fl.StringVar(&f.httpAddr, "http", httpAuto, "address for /metrics, /status and the console: auto is this node's client host and port + 20 (10931 for 10911, as raftmq cluster lays out its nodes); empty: off")
	fl.StringVar(&f.grpcTrans, "grpc-transport", cluster.GRPCTransportLean, "HTTP/2 transport of the gRPC service: lean (protocol/grpc/h2: one reader and one writer goroutine per connection) or grpc-go (grpc-go's server)")
	fl.StringVar(&f.grpcAddr, "grpc", "auto", "`ADDR` of the RocketMQ 5 gRPC service (apache.rocketmq.v2); auto: this node's third address in --peer (ID=CLIENT/RAFT/GRPC), else :8081 for a one-node group when free, else off; empty or off: off")
	fl.StringVar(&f.httpToken, "http-token-file", "", "a `FILE` holding a bearer token that opens /metrics and /status (Authorization: Bearer, as Prometheus sends it); with it they need a credential even without an ACL")
	fl.StringVar(&f.flush, "flush", "sync", "sync: acknowledge after a quorum fsynced; async: after a quorum has it in page cache")
	fl.Int64Var(&f.segmentSize, "segment-size", commitlog.DefaultSegmentSize, "commitlog segment size in bytes")
	fl.Int64Var(&f.warmAhead, "warm-ahead", 0, fmt.Sprintf("bytes of the commitlog segment zero-filled and synced ahead of the writer in sync mode (0: %s, -1: off)", sizeText(commitlog.DefaultWarmAhead)))
	fl.Int64Var(&f.cacheWindow, "cache-window", 0, fmt.Sprintf("bytes of the commitlog kept in the page cache behind its durable end; older pages are released (0: %s, -1: keep all)", sizeText(commitlog.DefaultCacheWindow)))
	fl.IntVar(&f.cqOpenFiles, "cq-max-open-files", 0, fmt.Sprintf("consume-queue files kept open at once; the least recently used close beyond it (0: half the process's file-descriptor limit, %s to %s; -1: no bound). Keep it above the number of queues written to within a second, within the descriptor limit", countText(consumequeue.DefaultMaxOpenFiles), countText(consumequeue.MaxDerivedOpenFiles)))
	fl.StringVar(&f.aclFile, "acl-file", "", "enable access control with this plain_acl.yml (RocketMQ's format): the group's ACL until it holds one, then proposed as the group's; requests must then be signed (AccessKey, Signature)")
	fl.StringVar(&f.aclKeyFile, "acl-key-file", "", "a `FILE` holding the group's ACL key (made by raftmq cert acl-key; the same file on every node), which seals the secret keys the log holds. Required with --acl-file (default: <data>/acl.key if it exists)")
	fl.DurationVar(&f.clientRead, "client-read-timeout", 0, fmt.Sprintf("a client frame must arrive within this once started, else the connection closes (0: %s, negative: none)", shortDuration(remoting.DefaultReadTimeout)))
	fl.DurationVar(&f.clientIdle, "client-idle-timeout", 0, fmt.Sprintf("close a client connection with no request in flight after this long without a frame (0: %s, negative: never)", shortDuration(remoting.DefaultIdleTimeout)))
	fl.IntVar(&f.maxConns, "max-client-conns", 0, fmt.Sprintf("most client connections at once; more are closed at once and logged (0: %s, negative: no limit)", countText(remoting.DefaultMaxConns)))
	fl.IntVar(&f.maxInflight, "max-inflight-requests", 0, fmt.Sprintf("requests read and not yet answered per connection before the node stops reading it (0: %s, negative: no limit)", countText(remoting.DefaultMaxInflightRequests)))
	fl.Int64Var(&f.inflightB, "max-inflight-bytes", 0, fmt.Sprintf("request bytes read and not yet answered per connection before the node stops reading it (0: %s, negative: no limit)", sizeText(remoting.DefaultMaxInflightBytes)))
	fl.Int64Var(&f.inflightAll, "max-inflight-total", 0, fmt.Sprintf("request bytes read and not yet answered over every client connection (0: %s, negative: no limit)", sizeText(remoting.DefaultMaxInflightTotal)))
	fl.StringVar(&f.memLimit, "memory-limit", "auto", memoryLimitUsage)
	fl.DurationVar(&f.maxTimer, "max-timer-delay", schedule.DefaultMaxDelay, "longest delay a timer message (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) may ask for; further is refused")
	fl.DurationVar(&f.txnTimeout, "transaction-timeout", txn.DefaultTimeout, "age at which an open transaction is first checked back with its producer (RocketMQ's transactionTimeOut)")
	fl.DurationVar(&f.txnInterval, "transaction-check-interval", txn.DefaultCheckInterval, "time between check-backs of an open transaction (transactionCheckInterval)")
	fl.IntVar(&f.txnMax, "transaction-check-max", txn.DefaultCheckMax, "check-backs of an open transaction before it is discarded (transactionCheckMax)")
	fl.IntVar(&f.directIO, "direct-io", 0, "1: write commitlog appends with O_DIRECT, past the page cache (0: buffered writes, the default)")
	fl.BoolVar(&f.autoCreate, "auto-create-topics", true, "create an unknown topic (4 queues) on first send")
	fl.StringVar(&f.bindIP, "bind-ip", "", "source IP for outgoing raft connections")
	fl.DurationVar(&f.tick, "tick", raftlog.DefaultTickInterval, fmt.Sprintf("raft tick (election timeout is %d ticks, heartbeat %d)", raftlog.DefaultElectionTick, raftlog.DefaultHeartbeatTick))
	fl.StringVar(&f.namesrv, "namesrv", "", "name servers to register with, ADDR;ADDR (default: $NAMESRV_ADDR; none: routes only from the nodes themselves)")
	fl.StringVar(&f.cluster, "cluster-name", cluster.DefaultClusterName, "cluster the group registers under with the name servers")
	fl.StringVar(&f.clusterID, "cluster-id", "", "the group's cluster ID, 16 hex digits, the same on every member (raftmq cluster-id prints a random one); a node refuses to start on a data directory recorded with another, and refuses raft traffic and forwarded requests of another (empty: the recorded one; required to bootstrap a group of several members; a single-member group picks its own; with --join, learnt from the group)")
	fl.BoolVar(&f.failover, "failover-routes", true, "list each follower in routes as a write-only broker name, so RocketMQ clients retry a failed send on a live node (see README)")
	fl.IntVar(&f.failoverQs, "failover-write-queues", 1, "write queues each follower's failover name lists in routes (0: the topic's count; orderly topics list their count); same on every node")
	fl.DurationVar(&f.leaderWait, "leader-wait", 0, fmt.Sprintf("how long a request that needs the leader waits for an election before it is refused (0: %s, negative: no wait)", shortDuration(cluster.DefaultLeaderWait)))
	fl.DurationVar(&f.notifyDelay, "commit-notify-delay", 0, fmt.Sprintf("how long the leader holds an append that only tells followers a new commit index, hoping the next append carries it (0: %v, negative: send at once)", raftlog.DefaultCommitNotifyDelay))
	fl.Uint64Var(&f.preferred, "preferred-leader", 0, "node that should lead whenever it is up and caught up (0: any)")
	fl.StringVar(&f.broker, "broker-name", cluster.DefaultBrokerName, "brokerName the group registers under")
	fl.BoolVar(&f.faultEndpoint, "fault-endpoint", false, "accept FAULT (9005) requests: tick-rate and clock skew (chaos testing; binaries built with -tags mutant only)")
	fl.BoolVar(&f.powerLoss, "power-loss", false, "keep unsynced writes in process memory, so kill -9 loses them as a power cut would (chaos testing)")
	fl.StringVar(&f.mutants, "mutant", "", mutantFlagHelp("known-bad behaviours for harness self-tests"))
	f.tls.register(cmd, brokerTLSHelp)
	fl.StringArrayVar(&f.routes, "route", nil, "dial a peer at other addresses than its membership ones, as ID=CLIENTADDR/RAFTADDR (proxies)")
	f.ret.register(fl)
	f.console.register(fl)
	for _, h := range []string{"fault-endpoint", "power-loss", "mutant", "route"} {
		_ = fl.MarkHidden(h)
	}
}

func (f *brokerFlags) config(log *slog.Logger) (cluster.Config, error) {
	if f.id == 0 {
		return cluster.Config{}, fmt.Errorf("--id is required")
	}
	peers := map[uint64]cluster.Peer{}
	for _, s := range append(slices.Clone(f.peers), f.peerList...) {
		id, p, err := cluster.ParsePeer(s)
		if err != nil {
			return cluster.Config{}, fmt.Errorf("--peer/--peers: %w", err)
		}
		if q, dup := peers[id]; dup && q != p {
			return cluster.Config{}, fmt.Errorf("member %d is listed twice, as %s/%s and %s/%s", id, q.Client, q.Raft, p.Client, p.Raft)
		}
		peers[id] = p
	}
	if _, ok := peers[f.id]; !ok {
		return cluster.Config{}, fmt.Errorf("--peer/--peers must list this node (%d) too", f.id)
	}
	var fm commitlog.FlushMode
	switch f.flush {
	case "sync":
		fm = commitlog.FlushSync
	case "async":
		fm = commitlog.FlushAsync
	default:
		return cluster.Config{}, fmt.Errorf("--flush must be sync or async, not %q", f.flush)
	}
	memLimit, err := parseMemoryLimit(f.memLimit)
	if err != nil {
		return cluster.Config{}, err
	}
	f.memLimitV = memLimit
	dir := f.data
	if dir == "" {
		dir = fmt.Sprintf("raftmq-data/n%d", f.id)
	}
	muts, err := failpoint.Parse(f.mutants)
	if err != nil {
		return cluster.Config{}, fmt.Errorf("--mutant: %w", err)
	}
	if !failpoint.Built && f.faultEndpoint {
		return cluster.Config{}, fmt.Errorf("--fault-endpoint: %w", failpoint.ErrNotBuilt)
	}
	grpcAddr, grpcOptional := f.grpcAddr, false
	switch grpcAddr {
	case "off":
		grpcAddr = ""
	case "auto":
		grpcAddr = peers[f.id].GRPC
		if grpcAddr == "" && len(peers) == 1 {
			grpcAddr, grpcOptional = ":8081", true
		}
	}
	var clusterID uint64
	if f.clusterID != "" {
		if clusterID, err = cluster.ParseClusterID(f.clusterID); err != nil {
			return cluster.Config{}, fmt.Errorf("--cluster-id: %w", err)
		}
	}
	if f.grpcTrans != cluster.GRPCTransportGo && f.grpcTrans != cluster.GRPCTransportLean {
		return cluster.Config{}, fmt.Errorf("--grpc-transport %q: want %s or %s", f.grpcTrans, cluster.GRPCTransportGo, cluster.GRPCTransportLean)
	}
	httpAddr := f.httpAddr
	if httpAddr == httpAuto {
		if httpAddr, err = autoHTTPAddr(peers[f.id].Client); err != nil {
			return cluster.Config{}, fmt.Errorf("--http auto: %w", err)
		}
	}
	cfg := cluster.Config{
		ID: f.id, Dir: dir, Peers: peers, Join: f.join, ClusterID: clusterID, HTTPAddr: httpAddr, GRPCAddr: grpcAddr, GRPCOptional: grpcOptional, GRPCTransport: f.grpcTrans, Flush: fm,
		SegmentSize: f.segmentSize, AutoCreateTopics: f.autoCreate, BindIP: f.bindIP,
		Raft: raftlog.Timing{TickInterval: f.tick, CommitNotifyDelay: f.notifyDelay}, LeaderWait: f.leaderWait, FailoverRoutes: f.failover, FailoverWriteQueues: int32(f.failoverQs), NameServers: namesrv.AddrsFromEnv(f.namesrv), ClusterName: f.cluster, BrokerName: f.broker, PreferredLeader: f.preferred, Logger: log,
		FaultEndpoint: f.faultEndpoint,
		MaxTimerDelay: f.maxTimer, TxnTimeout: f.txnTimeout, TxnCheckInterval: f.txnInterval, TxnCheckMax: f.txnMax,
		ACLFile: f.aclFile, ClientReadTimeout: f.clientRead, ClientIdleTimeout: f.clientIdle, MaxClientConns: f.maxConns,
		MaxInflightRequests: f.maxInflight, MaxInflightBytes: f.inflightB, MaxInflightTotal: f.inflightAll,
	}
	if cfg.TLS, err = f.tls.config(); err != nil {
		return cluster.Config{}, err
	}
	keyFile := f.aclKeyFile
	if keyFile == "" {
		if _, err := os.Stat(filepath.Join(dir, aclKeyName)); err == nil {
			keyFile = filepath.Join(dir, aclKeyName)
		}
	}
	if keyFile != "" {
		if cfg.ACLKey, err = acl.ReadKeyFile(keyFile); err != nil {
			return cluster.Config{}, fmt.Errorf("--acl-key-file: %w", err)
		}
	}
	if f.httpToken != "" {
		b, err := os.ReadFile(f.httpToken)
		if err != nil {
			return cluster.Config{}, fmt.Errorf("--http-token-file: %w", err)
		}
		if cfg.HTTPToken = strings.TrimSpace(string(b)); cfg.HTTPToken == "" {
			return cluster.Config{}, fmt.Errorf("--http-token-file: %s is empty", f.httpToken)
		}
	}
	cfg.Store.Failpoints = muts
	cfg.Store.WarmAhead = f.warmAhead
	cfg.Store.CacheWindow = f.cacheWindow
	cfg.Store.DirectIO = f.directIO
	cfg.Store.CQMaxOpenFiles = f.cqOpenFiles
	if cfg.Store.Retention, err = f.ret.config(); err != nil {
		return cluster.Config{}, err
	}
	for _, s := range f.routes {
		id, p, err := cluster.ParsePeer(s)
		if err != nil {
			return cluster.Config{}, fmt.Errorf("--route: %w", err)
		}
		if cfg.Routes == nil {
			cfg.Routes = map[uint64]cluster.Peer{}
		}
		cfg.Routes[id] = p
	}
	if f.powerLoss {
		f.lazy = vfs.NewLazy(vfs.Default())
		cfg.FS = f.lazy
		log.Warn("broker: power-loss mode: unsynced writes live in process memory until fsync")
	}
	return cfg, nil
}

func newClusterIDCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cluster-id",
		Short: "Print a new random cluster ID, for --cluster-id of every member of a new group",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintln(c.OutOrStdout(), cluster.FormatClusterID(cluster.NewClusterID()))
		},
	}
}

func newBrokerCmd(logger func() *slog.Logger) *cobra.Command {
	return brokerCommand(logger, runBroker)
}

// brokerCommand is `raftmq broker`: its flags (and --config file) are
// validated and turned into the node's configuration, then handed to run.
func brokerCommand(logger func() *slog.Logger, run func(f *brokerFlags, cfg cluster.Config, log *slog.Logger) error) *cobra.Command {
	var f brokerFlags
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run one broker node of a group",
		Example: "  raftmq broker --id 1 --http 127.0.0.1:10931 --cluster-id 5be1c0a9e3d27f14 \\\n" +
			"    --peer 1=127.0.0.1:10911/127.0.0.1:10921 --peer 2=127.0.0.1:10912/127.0.0.1:10922 \\\n" +
			"    --peer 3=127.0.0.1:10913/127.0.0.1:10923",
		RunE: func(c *cobra.Command, _ []string) error {
			log := logger()
			if err := validateFlags(c.Flags(), flagRules()); err != nil {
				return err
			}
			cfg, err := f.config(log)
			if err != nil {
				return usageError(err)
			}
			if lv, ok := c.Context().Value(logLevelKey{}).(*slog.LevelVar); ok {
				cfg.LogLevel = lv
			}
			return run(&f, cfg, log)
		},
	}
	f.register(cmd)
	addConfigFlags(cmd, brokerConfigOptions())
	return cmd
}

// checkBrokerArgs validates a broker's command line (args after
// "broker") as `raftmq broker` would, config file included, without
// starting it.
func checkBrokerArgs(args []string) error {
	root := newRoot()
	for _, c := range root.Commands() {
		if c.Name() == "broker" {
			root.RemoveCommand(c)
		}
	}
	quiet := func() *slog.Logger { return slog.New(slog.DiscardHandler) }
	root.AddCommand(brokerCommand(quiet, func(*brokerFlags, cluster.Config, *slog.Logger) error { return nil }))
	root.SetArgs(append([]string{"broker"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	return root.Execute()
}

// runBroker runs the node until a signal or a fatal error.
func runBroker(f *brokerFlags, cfg cluster.Config, log *slog.Logger) error {
	tuneGC(log)
	applyMemoryLimit(f.memLimitV, os.Getenv("GOMEMLIMIT"), systemCgroupMemoryLimit(), log)
	con, err := f.console.setup(&cfg, log)
	if err != nil {
		return err
	}
	if con != nil {
		defer con.Close()
	}
	var crash <-chan error // an error the node exits with (readded-node-crash)
	if failpoint.On(cfg.Store.Failpoints, failpoint.ReaddedNodeCrash) {
		crash = readdedNodeCrash(cfg)
	}
	b, err := cluster.Start(cfg)
	if errors.Is(err, commitlog.ErrCorrupt) || errors.Is(err, raftlog.ErrStateCorrupt) {
		return &exitError{code: exitCorrupt, err: err}
	}
	if errors.Is(err, cluster.ErrOtherCluster) {
		return &exitError{code: exitOtherCluster, err: err}
	}
	if err != nil {
		return err
	}
	if f.console.broker != nil {
		f.console.broker.Store(b)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var mutErr error
	select {
	case s := <-sig:
		log.Info("broker: stopping", "signal", s.String())
	case <-b.Done():
	case <-b.Removed(): // the broker said why
	case mutErr = <-crash:
	}
	ferr := b.Err()
	if ferr == nil {
		ferr = mutErr
	}
	if err := b.Close(); err != nil && ferr == nil {
		ferr = err
	}
	if f.lazy != nil {
		// A clean stop is not a power cut: keep what was written.
		if err := f.lazy.SyncAll(); err != nil && ferr == nil {
			ferr = err
		}
	}
	if ferr != nil {
		return fmt.Errorf("broker %d: %w", f.id, ferr)
	}
	log.Info("broker: stopped cleanly")
	return nil
}

// brokerGCPercent is the broker's GOGC unless the environment sets one. A
// broker's live heap is small (indexes live in files, not the heap) while
// it allocates per request, so collecting at 4x the live heap instead of
// 2x halves the collector's CPU for a few MiB more memory.
const brokerGCPercent = 400

func tuneGC(log *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(brokerGCPercent)
	log.Debug("broker: GC percent set", "gogc", brokerGCPercent)
}
