package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// defaultBasePort is the first client port of the group `raftmq cluster`
// starts, RocketMQ's broker port; the client commands' --addr defaults to
// that group.
const defaultBasePort = 10911

type clusterFlags struct {
	data     string
	basePort int
	nodes    int
	demo     int
	groups   int
	// namesrvPort is the name server's port when groups > 1.
	namesrvPort int
	// restart: the watch loop restarts a node that exited, with backoff.
	restart bool
	// tls: certificates in <data>/tls, TLS enforcing, mTLS between nodes.
	tls bool
	// brokerConfig is a broker config file every node reads (--config).
	brokerConfig string
	// node holds the broker's own flags that the cluster offers
	// (nodeFlags), registered by the broker's registration function, so
	// their names, defaults and help are the broker's.
	node      brokerFlags
	nodeFlags []*pflag.Flag
}

// clusterSetsBrokerFlags names the broker's flags that `raftmq cluster`
// does not offer, because it sets them itself for each node or group
// (identity, data, addresses, membership, TLS files with --tls, the
// group's names with --groups) or because they are the chaos harness's.
// Every other flag of `raftmq broker` is a flag of `raftmq cluster` too,
// passed to every node when given.
func clusterSetsBrokerFlags() []string {
	return []string{"id", "data", "peer", "peers", "join", "http", "http-token-file", "bind-ip", "route", "cluster-id",
		"broker-name", "namesrv", "tls-mode", "tls-cert", "tls-key", "tls-ca", "tls-client-auth",
		"fault-endpoint", "power-loss", "mutant"}
}

// register declares the cluster's flags: its own, then the broker's that
// it passes on.
func (f *clusterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "raftmq-data", "data directory (one subdirectory per node)")
	fl.IntVar(&f.basePort, "base-port", defaultBasePort, "first client port")
	fl.IntVar(&f.nodes, "nodes", 3, "number of nodes")
	fl.IntVar(&f.groups, "groups", 1, "number of groups (broker names raftmq-g1, raftmq-g2, ...; with more than one, a name server runs too and each group's ports start 100 above the previous)")
	fl.IntVar(&f.namesrvPort, "namesrv-port", 9876, "the name server's port (with --groups > 1)")
	fl.IntVar(&f.demo, "demo", 1000, "messages to send and read back once the group is up (0: none)")
	fl.BoolVar(&f.tls, "tls", false, "run the group with TLS: a CA and node certificates in <data>/tls (made once), client and HTTP ports enforcing TLS, mutual TLS between nodes")
	fl.BoolVar(&f.restart, "restart", true, "restart a node that exits (killed, crashed, or refusing to start), after 1 s, doubling to 30 s while it keeps failing")
	fl.StringVar(&f.brokerConfig, "broker-config", "", "a broker config `FILE` (YAML, as raftmq broker --print-config prints) every node reads; the broker's flags given to the cluster override it")
	f.addBrokerFlags(fl)
}

// addBrokerFlags registers on fs the broker's flags that the cluster
// passes on, with the broker's own registration function, and records
// them in f.
func (f *clusterFlags) addBrokerFlags(fs *pflag.FlagSet) {
	broker := &cobra.Command{Use: "broker"}
	f.node.register(broker)
	broker.Flags().VisitAll(func(fl *pflag.Flag) {
		if slices.Contains(clusterSetsBrokerFlags(), fl.Name) {
			return
		}
		fs.AddFlag(fl)
		f.nodeFlags = append(f.nodeFlags, fl)
	})
}

func newClusterCmd(logger func() *slog.Logger) *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start a local three-node group as three broker processes, show it working, and watch it",
		Long: "cluster starts `raftmq broker` three times on 127.0.0.1 (data in <data>/n1..n3, one log file\n" +
			"per node), waits for a leader, sends --demo messages through the group and reads them back\n" +
			"from a follower, then prints a live status line (leader, term, commit index, each node's\n" +
			"applied index) until Ctrl-C, which stops all three cleanly. Ports: clients base-port+i-1,\n" +
			"raft base-port+10+i-1, HTTP (/metrics, /status) base-port+20+i-1, gRPC (RocketMQ 5 clients)\n" +
			"base-port+30+i-1.",
		RunE: func(c *cobra.Command, _ []string) error {
			if err := validateFlags(c.Flags(), flagRules()); err != nil {
				return err
			}
			if err := f.checkPorts(); err != nil {
				return err
			}
			return runCluster(c.Context(), logger(), f)
		},
	}
	f.register(cmd)
	addConfigFlags(cmd, clusterConfigOptions())
	return cmd
}

// clusterConfigOptions describe `raftmq cluster --config`'s file: the
// group's own keys, then the broker's keys it passes to every node,
// grouped as the broker's file groups them.
func clusterConfigOptions() configOptions {
	opts := configOptions{title: "raftmq cluster configuration: raftmq cluster --config FILE (YAML)",
		intro: []string{"The local group `raftmq cluster` starts. The broker's keys below are passed to",
			"every node when set; `raftmq broker --print-config` explains them for one node."},
		sections: []configSection{{"the local group", []string{"data", "nodes", "groups", "base-port", "namesrv-port",
			"demo", "restart", "tls", "broker-config"}}}}
	var scratch brokerFlags
	broker := &cobra.Command{Use: "broker"}
	scratch.register(broker)
	for _, sec := range brokerConfigOptions().sections {
		var keys []string // the broker's own flags: not the inherited --verbose
		for _, k := range sec.keys {
			if broker.Flags().Lookup(k) != nil {
				keys = append(keys, k)
			}
		}
		opts.sections = append(opts.sections, configSection{"every node: " + sec.title, keys})
	}
	opts.sections = append(opts.sections, configSection{"this command's log", []string{"verbose"}})
	return opts
}

func runCluster(ctx context.Context, log *slog.Logger, f clusterFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cluster: find own binary: %w", err)
	}
	if f.groups < 1 {
		return usageError(fmt.Errorf("cluster: --groups must be at least 1"))
	}
	args, err := f.brokerArgs()
	if err != nil {
		return usageError(err)
	}
	var nodeArgs func(uint64) []string
	var groupTLS *tls.Config
	var nsArgs []string // the name server's TLS flags
	if f.tls {
		dir, targs, nargs, ctls, err := clusterTLS(f.data, f.nodes)
		if err != nil {
			return err
		}
		args, nodeArgs, groupTLS = append(args, targs...), nargs, ctls
		if f.groups > 1 {
			if nsArgs, err = namesrvTLSArgs(dir); err != nil {
				return err
			}
		}
		fmt.Printf("raftmq: TLS enforcing, certificates in %s; clients: raftmq produce --tls-ca %s ...\n", dir, filepath.Join(dir, "ca.pem"))
	}
	var nsAddr string
	if f.groups > 1 {
		nsAddr = fmt.Sprintf("127.0.0.1:%d", f.namesrvPort)
	}
	// Plan every group, check every node's arguments as its broker would
	// and every port, before starting anything: a bad value or a busy port
	// is one clear error, not nodes failing one by one.
	planned := make([]*localgroup.Group, 0, f.groups)
	names, dirs := make([]string, 0, f.groups), make([]string, 0, f.groups)
	for i := 1; i <= f.groups; i++ {
		dir, gargs, name := f.data, args, "raftmq"
		if f.groups > 1 {
			name = fmt.Sprintf("raftmq-g%d", i)
			dir = filepath.Join(f.data, fmt.Sprintf("g%d", i))
			gargs = append(append([]string{}, args...), "--broker-name", name, "--namesrv", nsAddr)
		}
		g := localgroup.New(localgroup.Config{Binary: self, Dir: dir, BasePort: f.basePort + 100*(i-1), GRPC: true, Nodes: f.nodes, Args: gargs,
			NodeArgs: nodeArgs, TLS: groupTLS})
		for _, n := range g.Nodes {
			if err := checkBrokerArgs(g.BrokerArgs(n.ID)); err != nil {
				return usageError(fmt.Errorf("cluster: node %d's broker arguments: %w", n.ID, err))
			}
		}
		planned, names, dirs = append(planned, g), append(names, name), append(dirs, dir)
	}
	if err := portsFree(planned, nsAddr); err != nil {
		return err
	}
	if nsAddr != "" {
		// Several groups share a name server, as RocketMQ's brokers do.
		ns, err := startNamesrv(self, nsAddr, filepath.Join(f.data, "namesrv.log"), nsArgs...)
		if err != nil {
			return err
		}
		defer ns.stop()
		fmt.Printf("raftmq: name server on %s (log %s)\n", nsAddr, filepath.Join(f.data, "namesrv.log"))
	}
	var groups []*localgroup.Group
	defer func() {
		for _, g := range groups {
			g.StopAll()
		}
	}()
	for i, g := range planned {
		name, dir := names[i], dirs[i]
		fmt.Printf("raftmq: starting %s, a %d-node group (flush %s), data in %s\n", name, f.nodes, f.node.flush, dir)
		fmt.Printf("  %-4s %-17s %-17s %-17s %-17s %s\n", "node", "client", "raft", "http", "grpc", "log")
		for _, n := range g.Nodes {
			fmt.Printf("  n%-3d %-17s %-17s %-17s %-17s %s\n", n.ID, n.Client, n.Raft, n.HTTP, n.GRPC, n.LogPath)
		}
		if err := g.Start(); err != nil {
			return err
		}
		if id := g.ClusterID(); id != "" {
			fmt.Printf("  cluster ID %s (%s)\n", id, filepath.Join(dir, "cluster-id"))
		}
		groups = append(groups, g)
	}
	sups := make([]*supervisor, len(groups))
	for i, g := range groups {
		sups[i] = newSupervisor(g, i+1, f.restart)
		// A node that refuses to start leaves the others running: the
		// supervisor says which and why, and the quorum elects a leader.
		var leader uint64
		for deadline := time.Now().Add(20 * time.Second); leader == 0; time.Sleep(50 * time.Millisecond) {
			sups[i].check()
			if leader = g.Leader(); leader == 0 && time.Now().After(deadline) {
				return fmt.Errorf("group %d: no leader within 20 s; see the nodes' logs", i+1)
			}
		}
		fmt.Printf("group %d: leader elected: n%d\n", i+1, leader)
	}
	if f.demo > 0 {
		for i, g := range groups {
			// A failed demo is reported, not fatal: the group stays up.
			if err := clusterDemo(ctx, log, g, f.demo); err != nil {
				fmt.Fprintf(os.Stderr, "group %d: demo: %v\n", i+1, err)
			}
		}
	}
	if nsAddr != "" {
		fmt.Printf("point RocketMQ clients at the name server %s; `raftmq admin cluster list --namesrv %s` shows the groups\n", nsAddr, nsAddr)
	}
	scheme := "http"
	if f.tls {
		scheme = "https"
	}
	for i, g := range groups {
		fmt.Printf("group %d: web console %s://%s/console/ (any node's HTTP port)\n", i+1, scheme, g.Nodes[0].HTTP)
	}
	fmt.Println("watching; Ctrl-C stops all nodes")
	fi, _ := os.Stdout.Stat()
	tty := fi != nil && fi.Mode()&os.ModeCharDevice != 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Println()
			}
			fmt.Println("stopping...")
			for _, g := range groups {
				if err := g.StopAll(); err != nil {
					return err
				}
			}
			groups = nil
			fmt.Println("all nodes stopped cleanly")
			return nil
		case <-tick.C:
		}
		var lines []string
		for i, g := range groups {
			sups[i].check()
			line := statusLine(g.Nodes, g.Statuses())
			if len(groups) > 1 {
				line = fmt.Sprintf("g%d %s", i+1, line)
			}
			lines = append(lines, line)
		}
		line := strings.Join(lines, " || ")
		if tty {
			fmt.Printf("\r\033[K%s", line)
		} else if time.Since(last) >= 5*time.Second {
			fmt.Println(line)
			last = time.Now()
		}
	}
}

// checkPorts checks that the cluster's ports fit below 65536 and that the
// name server's port is not one of a group's.
func (f clusterFlags) checkPorts() error {
	top := f.basePort + 100*(f.groups-1) + 30 + f.nodes - 1
	if top > math.MaxUint16 {
		return usageError(fmt.Errorf("--base-port %d: want at most %d: with --nodes %d and --groups %d the ports run from base-port to base-port+%d",
			f.basePort, math.MaxUint16-(top-f.basePort), f.nodes, f.groups, top-f.basePort))
	}
	if f.groups > 1 {
		for i := range f.groups {
			base := f.basePort + 100*i
			if off := f.namesrvPort - base; off >= 0 && off <= 30+f.nodes-1 && off%10 < f.nodes {
				return usageError(fmt.Errorf("--namesrv-port %d is a port of group %d (--base-port %d); choose another", f.namesrvPort, i+1, f.basePort))
			}
		}
	}
	return nil
}

// portsFree checks that every port the groups' nodes and the name server
// (nsAddr, if any) would listen on is free, naming the first busy one.
func portsFree(groups []*localgroup.Group, nsAddr string) error {
	type use struct{ addr, what string }
	var uses []use
	for i, g := range groups {
		for _, n := range g.Nodes {
			who := fmt.Sprintf("node %d", n.ID)
			if len(groups) > 1 {
				who = fmt.Sprintf("group %d node %d", i+1, n.ID)
			}
			uses = append(uses, use{n.Client, who + "'s client port"}, use{n.Raft, who + "'s raft port"}, use{n.HTTP, who + "'s HTTP port"}, use{n.GRPC, who + "'s gRPC port"})
		}
	}
	if nsAddr != "" {
		uses = append(uses, use{nsAddr, "the name server's port"})
	}
	for _, u := range uses {
		l, err := net.Listen("tcp", u.addr)
		if err != nil {
			_, port, _ := net.SplitHostPort(u.addr)
			return fmt.Errorf("cluster: port %s (%s) is in use: %w; stop what holds it, or move the group with --base-port (clients base-port+i-1, raft +10, HTTP +20, gRPC +30)", port, u.what, err)
		}
		l.Close()
	}
	return nil
}

// brokerArgs are the arguments every node gets from the cluster's command
// line: --config with --broker-config, and each of the broker's flags
// given to the cluster (on the command line or in the cluster's --config
// file). A flag not given is left out, so the node takes the broker's
// default, which is the cluster's (one registration), or the file's.
func (f *clusterFlags) brokerArgs() ([]string, error) {
	var args []string
	if f.brokerConfig != "" {
		abs, err := filepath.Abs(f.brokerConfig)
		if err != nil {
			return nil, fmt.Errorf("cluster: --broker-config: %w", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("cluster: --broker-config: %w", err)
		}
		args = append(args, "--config", abs)
	}
	for _, fl := range f.nodeFlags {
		if !fl.Changed {
			continue
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fl.Name+"="+v)
			}
			continue
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	}
	return args, nil
}

// namesrvProc is a name server run as a process of its own.
type namesrvProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startNamesrv runs `raftmq namesrv` on addr and waits until it answers.
func startNamesrv(binary, addr, logPath string, args ...string) (*namesrvProc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, append([]string{"namesrv", "--listen", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("cluster: start name server: %w", err)
	}
	p := &namesrvProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("cluster: name server exited; see %s", logPath)
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("cluster: name server not answering on %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *namesrvProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func statusLine(nodes []*localgroup.Node, sts []*cluster.NodeStatus) string {
	var leader, term, commit uint64
	var parts []string
	for i, st := range sts {
		if st == nil {
			parts = append(parts, fmt.Sprintf("n%d down", nodes[i].ID))
			continue
		}
		if st.Status.Term >= term {
			term = st.Status.Term
			if st.Status.Leader != 0 {
				leader = st.Status.Leader
			}
		}
		commit = max(commit, st.Status.Commit)
		role := strings.ToLower(strings.TrimPrefix(st.Status.Role, "State"))
		parts = append(parts, fmt.Sprintf("n%d %s applied %d", nodes[i].ID, role, st.Status.Applied))
	}
	return fmt.Sprintf("%s leader n%d term %d commit %d | %s", time.Now().Format("15:04:05"), leader, term, commit, strings.Join(parts, " | "))
}

// supervisor watches one group's nodes for the cluster command: it reports
// a node that exited (why, and the last lines of its log) and, with
// restart on, starts it again after a backoff that doubles, up to
// maxRestartBackoff, while the node keeps exiting within
// restartStableAfter of its start.
type supervisor struct {
	g       *localgroup.Group
	group   int
	restart bool
	nodes   map[uint64]*supervised
}

type supervised struct {
	started  time.Time
	backoff  time.Duration
	due      time.Time // when to restart it; zero while it runs
	reported bool
}

const (
	minRestartBackoff  = time.Second
	maxRestartBackoff  = 30 * time.Second
	restartStableAfter = time.Minute
)

func newSupervisor(g *localgroup.Group, group int, restart bool) *supervisor {
	s := &supervisor{g: g, group: group, restart: restart, nodes: map[uint64]*supervised{}}
	now := time.Now()
	for _, n := range g.Nodes {
		s.nodes[n.ID] = &supervised{started: now, backoff: minRestartBackoff}
	}
	return s
}

// check reports nodes that exited and restarts those whose backoff ran out.
func (s *supervisor) check() {
	now := time.Now()
	for _, n := range s.g.Nodes {
		st := s.nodes[n.ID]
		why := n.Exited()
		if why == "" {
			if now.Sub(st.started) >= restartStableAfter {
				st.backoff = minRestartBackoff
			}
			continue
		}
		corrupt := n.ExitCode() == exitCorrupt
		// A node exits 0 only when asked to or when it was removed from
		// the group: it would only stop again.
		clean := n.ExitCode() == 0
		other := n.ExitCode() == exitOtherCluster
		if !st.reported {
			st.reported = true
			what := "not restarted (--restart=false)"
			switch {
			case clean:
				what = "not restarted: it stopped cleanly (removed from the group, or stopped on purpose)"
			case corrupt:
				what = fmt.Sprintf("not restarted: its data is corrupt (`raftmq store inspect %s` says where); the others go on without it", n.Dir)
			case other:
				what = fmt.Sprintf("not restarted: %s holds another group's data (its cluster ID differs); the others go on without it", n.Dir)
			case s.restart:
				st.due = now.Add(st.backoff)
				what = fmt.Sprintf("restarting it in %v", st.backoff)
			}
			fmt.Fprintf(os.Stderr, "\ngroup %d node %d exited (%s); %s; last lines of %s:\n%s\n", s.group, n.ID, why, what, n.LogPath, localgroup.Tail(n.LogPath, 10))
		}
		if !s.restart || corrupt || clean || other || now.Before(st.due) {
			continue
		}
		if err := s.g.StartNode(n.ID); err != nil {
			fmt.Fprintf(os.Stderr, "\ngroup %d node %d: restart failed: %v\n", s.group, n.ID, err)
			st.due = now.Add(st.backoff)
			continue
		}
		fmt.Fprintf(os.Stderr, "\ngroup %d node %d restarted\n", s.group, n.ID)
		if now.Sub(st.started) < restartStableAfter {
			st.backoff = min(2*st.backoff, maxRestartBackoff)
		}
		st.started, st.reported = now, false
	}
}
