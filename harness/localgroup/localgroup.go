// Package localgroup runs a broker group on this machine as real
// `raftmq broker` processes: start, SIGTERM, kill -9, pause, restart, and
// read each node's /status. `raftmq cluster`, the failover benchmark and
// the process-level tests use it.
package localgroup

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/cluster"
)

// Config describes a group.
type Config struct {
	// Binary runs the broker: Binary Prefix... broker --id N ... .
	Binary string
	Prefix []string
	// Env is added to this process's environment for every node. Unless
	// one of them sets GOMAXPROCS, each node gets GOMAXPROCS =
	// ceil(NumCPU / Nodes): the nodes share this machine's CPUs, and a
	// node that believes it owns all of them keeps idle threads spinning
	// that the others need (see shareCPUs).
	Env []string
	Dir string // node i lives in Dir/n<i>
	// BasePort: clients BasePort+i-1, raft +10, HTTP +20, gRPC +30.
	BasePort int
	// GRPC gives every node RocketMQ 5's gRPC service (--grpc), at
	// BasePort+30+i-1.
	GRPC  bool
	Nodes int
	// Args are extra broker flags (e.g. --flush async, --segment-size).
	Args []string
	// Host, if set, gives node id's listening IP (default 127.0.0.1); the
	// node also gets --bind-ip with it.
	Host func(id uint64) string
	// NodeArgs, if set, gives extra flags for node id (after Args).
	NodeArgs func(id uint64) []string
	// Stderr receives a node's output when its broker.log cannot be
	// written (a full disk), each line prefixed "nN| " (default os.Stderr).
	Stderr io.Writer
	// ClusterID, if set, is the group's --cluster-id (16 hex digits).
	// Otherwise the group's first start takes the one in Dir/cluster-id,
	// or, when no node has raft state yet, makes a random one and writes
	// it there, so that a group started again on the same Dir keeps it. A
	// group whose nodes have state but no such file (made by an older
	// version) passes none: its nodes keep the ID they recorded.
	ClusterID string
	// TLS, if set, is the client side of TLS for a group whose nodes
	// serve it (their --tls-* flags come in Args or NodeArgs): Status
	// asks for /status over HTTPS with it, and clients of the group
	// should use it (Group.TLS).
	TLS *tls.Config
	// HTTPToken, if set, is given to every node as its HTTP bearer token
	// (--http-token-file, a file written 0600 into its directory), and Status
	// presents it: what a group with an ACL needs for its /status to
	// answer.
	HTTPToken string
}

// Node is one broker process.
type Node struct {
	ID                 uint64
	Client, Raft, HTTP string
	GRPC               string // RocketMQ 5's gRPC service; "" without Config.GRPC
	Dir, LogPath       string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	exits  []Exit // every process of this node that ended, in order
}

// Exit is a node's process that ended.
type Exit struct {
	PID int
	At  time.Time
	// How describes the end as Exited does ("exit status 1", "signal:
	// killed").
	How string
}

// Exits returns the node's processes that ended, from the from-th
// (counting from 0) on, in the order they ended.
func (n *Node) Exits(from int) []Exit {
	n.mu.Lock()
	defer n.mu.Unlock()
	if from >= len(n.exits) {
		return nil
	}
	return append([]Exit(nil), n.exits[from:]...)
}

// Group is a running group.
type Group struct {
	cfg   Config
	Nodes []*Node
	peers []string
	// idOnce settles cfg.ClusterID (clusterID) before the first node starts.
	idOnce sync.Once
	idErr  error
	// http fetches /status; https when cfg.TLS is set.
	http   *http.Client
	scheme string
}

// New plans a group without starting it.
func New(cfg Config) *Group {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	g := &Group{cfg: cfg, http: httpClient, scheme: "http"}
	if cfg.TLS != nil {
		g.http = &http.Client{Timeout: httpClient.Timeout, Transport: &http.Transport{TLSClientConfig: cfg.TLS}}
		g.scheme = "https"
	}
	for i := 1; i <= cfg.Nodes; i++ {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i))
		host := "127.0.0.1"
		if cfg.Host != nil {
			host = cfg.Host(uint64(i))
		}
		n := &Node{
			ID:      uint64(i),
			Client:  net.JoinHostPort(host, fmt.Sprint(cfg.BasePort+i-1)),
			Raft:    net.JoinHostPort(host, fmt.Sprint(cfg.BasePort+10+i-1)),
			HTTP:    net.JoinHostPort(host, fmt.Sprint(cfg.BasePort+20+i-1)),
			Dir:     dir,
			LogPath: filepath.Join(dir, "broker.log"),
		}
		peer := fmt.Sprintf("%d=%s/%s", n.ID, n.Client, n.Raft)
		if cfg.GRPC {
			n.GRPC = net.JoinHostPort(host, fmt.Sprint(cfg.BasePort+30+i-1))
			peer += "/" + n.GRPC
		}
		g.Nodes = append(g.Nodes, n)
		g.peers = append(g.peers, "--peer", peer)
	}
	return g
}

// clusterIDFile holds a group's cluster ID in its Dir.
const clusterIDFile = "cluster-id"

// settleClusterID fills in cfg.ClusterID (see Config.ClusterID).
func (g *Group) settleClusterID() error {
	if g.cfg.ClusterID != "" {
		return nil
	}
	path := filepath.Join(g.cfg.Dir, clusterIDFile)
	if b, err := os.ReadFile(path); err == nil {
		id, err := cluster.ParseClusterID(string(b))
		if err != nil {
			return fmt.Errorf("localgroup: %s: %w", path, err)
		}
		g.cfg.ClusterID = cluster.FormatClusterID(id)
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("localgroup: %w", err)
	}
	for _, n := range g.Nodes {
		if _, err := os.Stat(filepath.Join(n.Dir, "raft", "raftstate")); err == nil {
			return nil // made before cluster IDs: the nodes keep theirs
		}
	}
	id := cluster.FormatClusterID(cluster.NewClusterID())
	if err := os.MkdirAll(g.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("localgroup: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("localgroup: %w", err)
	}
	g.cfg.ClusterID = id
	return nil
}

// ClusterID returns the group's cluster ID as passed to its nodes ("" if
// none is: see Config.ClusterID), once a node was started.
func (g *Group) ClusterID() string { return g.cfg.ClusterID }

// TLS returns the client TLS configuration of the group, nil for
// plaintext.
func (g *Group) TLS() *tls.Config { return g.cfg.TLS }

// Addrs returns the client addresses.
func (g *Group) Addrs() []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Client)
	}
	return out
}

// Node returns node id.
func (g *Group) Node(id uint64) *Node { return g.Nodes[id-1] }

// Start starts every node.
func (g *Group) Start() error {
	for _, n := range g.Nodes {
		if err := g.StartNode(n.ID); err != nil {
			g.StopAll()
			return err
		}
	}
	return nil
}

// BrokerArgs are the arguments node id is started with, after "broker".
func (g *Group) BrokerArgs(id uint64) []string {
	n := g.Node(id)
	args := []string{"--id", fmt.Sprint(id), "--data", n.Dir, "--http", n.HTTP}
	args = append(append(args, g.cfg.Args...), g.peers...)
	if g.cfg.ClusterID != "" {
		args = append(args, "--cluster-id", g.cfg.ClusterID)
	}
	if g.cfg.HTTPToken != "" {
		args = append(args, "--http-token-file", g.tokenFile(id))
	}
	if g.cfg.Host != nil {
		args = append(args, "--bind-ip", g.cfg.Host(id))
	}
	if g.cfg.NodeArgs != nil {
		args = append(args, g.cfg.NodeArgs(id)...)
	}
	return args
}

// tokenFile is where node id's HTTP bearer token is written (Config.HTTPToken).
func (g *Group) tokenFile(id uint64) string { return filepath.Join(g.Node(id).Dir, "http-token") }

// StartNode starts (or restarts) one node; its output is appended to its
// log file.
func (g *Group) StartNode(id uint64) error {
	g.idOnce.Do(func() { g.idErr = g.settleClusterID() })
	if g.idErr != nil {
		return g.idErr
	}
	n := g.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.exitedLocked() {
		return fmt.Errorf("localgroup: node %d is running", id)
	}
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if g.cfg.HTTPToken != "" {
		// The node's own token file, written while it is down.
		if err := os.WriteFile(g.tokenFile(id), []byte(g.cfg.HTTPToken+"\n"), 0o600); err != nil {
			lf.Close()
			return fmt.Errorf("localgroup: %w", err)
		}
	}
	args := append(append([]string{}, g.cfg.Prefix...), "broker")
	cmd := exec.Command(g.cfg.Binary, append(args, g.BrokerArgs(id)...)...)
	cmd.Env = shareCPUs(append(os.Environ(), g.cfg.Env...), len(g.Nodes), runtime.NumCPU())
	fallback := g.cfg.Stderr
	if fallback == nil {
		fallback = os.Stderr
	}
	lw := newLogWriter(lf, fallback, id) // broker.log, or stderr when its disk is full
	cmd.Stdout, cmd.Stderr = lw, lw
	// Own process group: a terminal's Ctrl-C reaches the supervisor, which
	// stops the nodes itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("localgroup: start node %d: %w", id, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.err = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		lf.Close()
		how := "exit status 0"
		if err != nil {
			how = err.Error()
		}
		n.mu.Lock()
		n.err = err
		n.exits = append(n.exits, Exit{PID: cmd.Process.Pid, At: time.Now(), How: how})
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (n *Node) exitedLocked() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.exitedLocked()
}

// Exited returns a description of how the process ended, or "" while it
// runs.
func (n *Node) Exited() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || !n.exitedLocked() {
		return ""
	}
	if n.err != nil {
		return n.err.Error()
	}
	return "exit status 0"
}

// ExitCode returns the exit status of a process that has exited (-1 when
// it runs, was never started, or was killed by a signal).
func (n *Node) ExitCode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || !n.exitedLocked() || n.cmd.ProcessState == nil {
		return -1
	}
	return n.cmd.ProcessState.ExitCode()
}

// LastPID returns the process id of the latest start, running or not (0
// if never started).
func (n *Node) LastPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// PID returns the process id (0 when not running).
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || n.exitedLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) signal(s syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || n.exitedLocked() {
		return fmt.Errorf("localgroup: node %d is not running", n.ID)
	}
	return n.cmd.Process.Signal(s)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (g *Group) Kill(id uint64) error {
	n := g.Node(id)
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.wait(10 * time.Second)
}

// Pause and Resume send SIGSTOP and SIGCONT.
func (g *Group) Pause(id uint64) error  { return g.Node(id).signal(syscall.SIGSTOP) }
func (g *Group) Resume(id uint64) error { return g.Node(id).signal(syscall.SIGCONT) }

// Stop sends SIGTERM and waits (SIGKILL after timeout). It returns the
// process's error if it did not stop cleanly.
func (g *Group) Stop(id uint64, timeout time.Duration) error {
	n := g.Node(id)
	if !n.Running() {
		return nil
	}
	_ = n.signal(syscall.SIGCONT)
	if err := n.signal(syscall.SIGTERM); err != nil {
		return nil
	}
	if err := n.wait(timeout); err != nil {
		_ = n.signal(syscall.SIGKILL)
		_ = n.wait(5 * time.Second)
		return fmt.Errorf("localgroup: node %d did not stop within %v; killed", id, timeout)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil && !diedOf(n.err, syscall.SIGTERM) {
		return fmt.Errorf("localgroup: node %d: %w", id, n.err)
	}
	return nil
}

// diedOf reports whether a process's wait error says it was ended by sig
// (a node still starting has no handler yet: SIGTERM's default action
// ends it, which is the stop that was asked for).
func diedOf(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func (n *Node) wait(timeout time.Duration) error {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("localgroup: node %d still running after %v", n.ID, timeout)
	}
}

// StopAll stops every node.
func (g *Group) StopAll() error {
	var errs []error
	for _, n := range g.Nodes {
		if n.Running() {
			_ = n.signal(syscall.SIGCONT)
			_ = n.signal(syscall.SIGTERM)
		}
	}
	for _, n := range g.Nodes {
		if err := g.Stop(n.ID, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var httpClient = &http.Client{Timeout: 500 * time.Millisecond}

// Status fetches a node's /status.
func (g *Group) Status(id uint64) (*cluster.NodeStatus, error) {
	req, err := http.NewRequest(http.MethodGet, g.scheme+"://"+g.Node(id).HTTP+"/status", nil)
	if err != nil {
		return nil, err
	}
	if g.cfg.HTTPToken != "" {
		req.Header.Set("Authorization", "Bearer "+g.cfg.HTTPToken)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("localgroup: node %d's /status: %s", id, resp.Status)
	}
	var st cluster.NodeStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Statuses fetches every node's status (nil for nodes that do not answer).
func (g *Group) Statuses() []*cluster.NodeStatus {
	out := make([]*cluster.NodeStatus, len(g.Nodes))
	var wg sync.WaitGroup
	for i, n := range g.Nodes {
		wg.Add(1)
		go func(i int, id uint64) {
			defer wg.Done()
			out[i], _ = g.Status(id)
		}(i, n.ID)
	}
	wg.Wait()
	return out
}

// Leader returns the node that leads and is ready, or 0.
func (g *Group) Leader() uint64 {
	for _, st := range g.Statuses() {
		if st != nil && st.LeaderReady {
			return st.Status.ID
		}
	}
	return 0
}

// WaitLeader waits for a ready leader.
func (g *Group) WaitLeader(timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if id := g.Leader(); id != 0 {
			return id, nil
		}
		for _, n := range g.Nodes {
			if e := n.Exited(); e != "" && !strings.Contains(e, "killed") {
				return 0, fmt.Errorf("localgroup: node %d exited (%s); last lines of %s:\n%s", n.ID, e, n.LogPath, Tail(n.LogPath, 10))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("localgroup: no leader within %v", timeout)
}

// Tail returns the last lines of a file.
func Tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// shareCPUs returns env with GOMAXPROCS set to ceil(cpus/nodes), unless env
// already sets it. Go sizes its scheduler to every CPU it sees; three
// nodes on one machine, each sized so, keep up to three times as many
// threads spinning for work as there are CPUs, and every hand-off between
// goroutines may wake another thread. Measured on 2 vCPUs with one send at
// a time (alternating fresh groups): p50 0.57-0.61 ms with the default,
// 0.52-0.59 ms with GOMAXPROCS=1, and less CPU per message on every node.
func shareCPUs(env []string, nodes, cpus int) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	if nodes < 1 {
		nodes = 1
	}
	n := max(1, (cpus+nodes-1)/nodes)
	return append(env, fmt.Sprintf("GOMAXPROCS=%d", n))
}
