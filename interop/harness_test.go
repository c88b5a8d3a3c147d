// Package interop tests raftmq with Apache RocketMQ's own Go client
// (github.com/apache/rocketmq-client-go/v2), as a user would: the raftmq
// binary is built from this repository and run as three `raftmq broker`
// processes on loopback ports; the tests talk to them only through the
// RocketMQ client and raftmq's command line. It is a module of its own so
// that raftmq itself never depends on the RocketMQ client.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// binary is the raftmq binary TestMain builds once per test binary.
var binary string

// runID tells this run's groups, instances and topics from those of other
// runs (the RocketMQ client keeps broadcasting offsets in files named after
// the group and the client id).
var runID = fmt.Sprintf("%d%d", os.Getpid(), time.Now().UnixNano()%1e6)

func TestMain(m *testing.M) {
	rlog.SetLogger(clientLog)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("RAFTMQ_BINARY"); bin != "" {
		binary = bin // a binary built by the caller
		return m.Run()
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "raftmq-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "raftmq")
	build := exec.Command("go", "build", "-o", binary, "./cmd/raftmq")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "interop: building raftmq in", root+":", err)
		return 2
	}
	return m.Run()
}

// repoRoot finds the raftmq repository above the working directory (the
// interop module's directory when run by go test).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && regexp.MustCompile(`(?m)^module github\.com/raftmq/raftmq\s*$`).Match(b) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no directory above %s holds raftmq's go.mod (module github.com/raftmq/raftmq)", dir)
		}
	}
}

// node is one broker process.
type node struct {
	id                 int
	client, raft, http string // loopback IP:port literals
	grpc               string // RocketMQ 5's gRPC service
	dir, logPath       string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	killed bool // the last stop was a SIGKILL of ours
}

// group is a three-node raftmq group, one RocketMQ brokerName, run as real
// processes with their data in a test's temporary directory.
type group struct {
	t     testing.TB
	nodes []*node
	peers string
	// clusterID is the group's --cluster-id, random per group.
	clusterID string
	extra     []string // more broker flags
}

// freePorts returns n distinct free loopback ports. They are free when it
// returns, not reserved: a broker binds them a moment later.
func freePorts(t testing.TB, n int) []int {
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// startGroup starts three brokers (extra: more broker flags) and waits
// until one leads. Everything is stopped when t ends; each node's log is
// printed if t failed. The ports are free when chosen but not reserved:
// if another process takes one first, the group starts again on others.
func startGroup(t *testing.T, extra ...string) *group {
	t.Helper()
	for attempt := 1; ; attempt++ {
		g := planGroup(t, extra)
		t.Cleanup(g.close)
		for _, n := range g.nodes {
			g.start(n.id)
		}
		err := poll(30*time.Second, func() bool { return g.leader() != 0 || g.exited() != nil })
		if err == nil && g.exited() == nil {
			return g
		}
		if n := g.exited(); n != nil && attempt < 3 && strings.Contains(tail(n.logPath, 0, 20), "address already in use") {
			t.Logf("node %d could not bind its ports (taken since they were chosen); starting the group again on others", n.id)
			g.killAll()
			continue
		}
		g.checkAlive()
		t.Fatalf("no ready leader within 30 s of starting the group")
	}
}

// planGroup chooses ports and directories for a group without starting it.
func planGroup(t *testing.T, extra []string) *group {
	ports := freePorts(t, 12)
	g := &group{t: t, extra: extra}
	base := t.TempDir()
	var peers []string
	for i := range 3 {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i+1))
		n := &node{id: i + 1,
			client:  fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			raft:    fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			http:    fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]),
			grpc:    fmt.Sprintf("127.0.0.1:%d", ports[9+i]),
			dir:     dir,
			logPath: filepath.Join(dir, "broker.log")}
		g.nodes = append(g.nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s/%s/%s", n.id, n.client, n.raft, n.grpc))
	}
	g.peers = strings.Join(peers, ",")
	g.clusterID = fmt.Sprintf("%016x", rand.Uint64()|1)
	return g
}

// exited returns a node that exited without being killed by the test, or
// nil.
func (g *group) exited() *node {
	for _, n := range g.nodes {
		n.mu.Lock()
		dead := n.cmd != nil && isClosed(n.exited) && !n.killed
		n.mu.Unlock()
		if dead {
			return n
		}
	}
	return nil
}

// killAll kill -9s every running node (a group given up on).
func (g *group) killAll() {
	for _, n := range g.nodes {
		n.mu.Lock()
		running := n.cmd != nil && !isClosed(n.exited)
		n.mu.Unlock()
		if running {
			g.kill(n.id)
		}
	}
}

// startNamesrv runs `raftmq namesrv` on a free port until the test ends.
func startNamesrv(t *testing.T) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	cmd := exec.Command(binary, "namesrv", "--listen", addr)
	logPath := filepath.Join(t.TempDir(), "namesrv.log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("namesrv.log:\n%s", b)
		}
	})
	eventually(t, 10*time.Second, "the name server answers", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// close stops every node with SIGTERM (a node must stop cleanly: exit
// status 0) and, if the test failed, prints the brokers' logs.
func (g *group) close() {
	for _, n := range g.nodes {
		n.mu.Lock()
		if n.cmd != nil && !isClosed(n.exited) {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
		n.mu.Unlock()
	}
	for _, n := range g.nodes {
		n.mu.Lock()
		cmd, exited, killed := n.cmd, n.exited, n.killed
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			// SIGQUIT makes the Go runtime write every goroutine's stack
			// to the log and exit: the stuck one is the diagnosis.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			g.t.Errorf("node %d did not stop within 15 s of SIGTERM; its goroutines at SIGQUIT:\n%s", n.id, goroutineDump(n.logPath))
			continue
		}
		if !killed && cmd.ProcessState != nil && !cmd.ProcessState.Success() {
			g.t.Errorf("node %d did not stop cleanly: %v\n%s", n.id, cmd.ProcessState, tail(n.logPath, 0, 20))
		}
	}
	if dir := os.Getenv("INTEROP_KEEP_LOGS"); dir != "" {
		g.keepLogs(dir)
	}
	if g.t.Failed() {
		for _, n := range g.nodes {
			g.t.Logf("node %d (%s) broker.log, last lines:\n%s", n.id, n.client, tail(n.logPath, 0, 60))
		}
	}
}

// keepLogs copies each node's log to dir/<test>/n<id>.log.
func (g *group) keepLogs(dir string) {
	d := filepath.Join(dir, strings.ReplaceAll(g.t.Name(), "/", "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		g.t.Logf("INTEROP_KEEP_LOGS: %v", err)
		return
	}
	for _, n := range g.nodes {
		if b, err := os.ReadFile(n.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(d, fmt.Sprintf("n%d.log", n.id)), b, 0o644)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// start starts node id, or restarts it on its data after a kill.
func (g *group) start(id int) {
	g.t.Helper()
	n := g.nodes[id-1]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !isClosed(n.exited) {
		g.t.Fatalf("node %d is already running", id)
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		g.t.Fatal(err)
	}
	lf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		g.t.Fatal(err)
	}
	args := []string{"broker", "--id", fmt.Sprint(id), "--data", n.dir, "--http", n.http, "--peers", g.peers, "--cluster-id", g.clusterID,
		// Small segments, not zero-filled ahead: the tests store little and
		// share a small machine.
		"--segment-size", "67108864", "--warm-ahead", "-1"}
	args = append(args, g.extra...)
	if g.token() != "" {
		tokenFile := filepath.Join(n.dir, "http-token")
		if err := os.WriteFile(tokenFile, []byte(g.token()), 0o600); err != nil {
			g.t.Fatal(err)
		}
		args = append(args, "--http-token-file", tokenFile)
	}
	// More flags for every broker of every test, for diagnosis.
	args = append(args, strings.Fields(os.Getenv("INTEROP_BROKER_FLAGS"))...)
	if os.Getenv("INTEROP_BROKER_VERBOSE") != "" {
		args = append(args, "-v")
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Three brokers share this machine's CPUs (see harness/localgroup);
	// they register with no name server the environment may name.
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "NAMESRV_ADDR=") || strings.HasPrefix(kv, "GOMAXPROCS=")
	}), "GOMAXPROCS=1")
	// A broker dies with the test binary, even if the binary is killed
	// (go test's timeout) before its cleanups run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		g.t.Fatalf("start node %d: %v", id, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(exited) }()
	n.cmd, n.exited, n.killed = cmd, exited, false
}

// kill sends SIGKILL to node id and waits until the process is gone.
func (g *group) kill(id int) {
	g.t.Helper()
	n := g.nodes[id-1]
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	if cmd == nil || isClosed(exited) {
		n.mu.Unlock()
		g.t.Fatalf("kill: node %d is not running", id)
	}
	n.killed = true
	_ = cmd.Process.Signal(syscall.SIGKILL)
	n.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		g.t.Fatalf("node %d still runs 10 s after SIGKILL", id)
	}
}

// checkAlive fails the test if a node exited without being killed by it.
func (g *group) checkAlive() {
	g.t.Helper()
	for _, n := range g.nodes {
		n.mu.Lock()
		dead := n.cmd != nil && isClosed(n.exited) && !n.killed
		state := ""
		if dead && n.cmd.ProcessState != nil {
			state = n.cmd.ProcessState.String()
		}
		n.mu.Unlock()
		if dead {
			g.t.Fatalf("node %d exited by itself (%s):\n%s", n.id, state, tail(n.logPath, 0, 30))
		}
	}
}

// nodeStatus is the part of a node's HTTP /status the harness reads.
type nodeStatus struct {
	Raft struct {
		ID      uint64 `json:"id"`
		Term    uint64 `json:"term"`
		Leader  uint64 `json:"leader"`
		Commit  uint64 `json:"commit"`
		Applied uint64 `json:"applied"`
	} `json:"raft"`
	LeaderReady bool `json:"leaderReady"`
}

// token is the HTTP bearer token of a group with an ACL, whose /status
// needs a credential, else "".
func (g *group) token() string {
	if slices.Contains(g.extra, "--acl-file") {
		return "interop-http-token"
	}
	return ""
}

var statusClient = &http.Client{Timeout: time.Second}

// status fetches node id's /status; ok is false if it does not answer.
func (g *group) status(id int) (st nodeStatus, ok bool) {
	req, err := http.NewRequest(http.MethodGet, "http://"+g.nodes[id-1].http+"/status", nil)
	if err != nil {
		return st, false
	}
	if tok := g.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st) == nil
}

// leader returns the node that leads and has applied its term's first
// entry (it serves requests), or 0.
func (g *group) leader() int {
	for _, n := range g.nodes {
		if st, ok := g.status(n.id); ok && st.LeaderReady && st.Raft.Leader == uint64(n.id) {
			return n.id
		}
	}
	return 0
}

// waitLeader waits for a ready leader and returns its id.
func (g *group) waitLeader(timeout time.Duration) int {
	g.t.Helper()
	var id int
	waitFor(g.t, timeout, "a ready leader", func() bool {
		g.checkAlive()
		id = g.leader()
		return id != 0
	})
	return id
}

// waitNewLeader waits for a ready leader other than old.
func (g *group) waitNewLeader(old int, timeout time.Duration) int {
	g.t.Helper()
	var id int
	waitFor(g.t, timeout, fmt.Sprintf("a ready leader other than node %d", old), func() bool {
		g.checkAlive()
		id = g.leader()
		return id != 0 && id != old
	})
	return id
}

// waitCaughtUp waits until node id follows the ready leader and has applied
// everything the leader had committed when it was asked.
func (g *group) waitCaughtUp(id int, timeout time.Duration) {
	g.t.Helper()
	waitFor(g.t, timeout, fmt.Sprintf("node %d caught up with the leader", id), func() bool {
		g.checkAlive()
		l := g.leader()
		if l == 0 {
			return false
		}
		ls, ok1 := g.status(l)
		st, ok2 := g.status(id)
		return ok1 && ok2 && st.Raft.Leader == uint64(l) && st.Raft.Applied >= ls.Raft.Commit
	})
}

// addrs are the nodes' client addresses, which RocketMQ clients are given
// as their name servers: every node answers route queries itself.
func (g *group) addrs() []string {
	var out []string
	for _, n := range g.nodes {
		out = append(out, n.client)
	}
	return out
}

func (g *group) resolver() primitive.NsResolver { return primitive.NewPassthroughResolver(g.addrs()) }

// cli runs the raftmq command line with --addr set to the group's nodes.
func (g *group) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append(args, "--addr", strings.Join(g.addrs(), ","))
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("raftmq %s: %w", strings.Join(args, " "), err)
	}
	return string(out), err
}

// createTopic creates a topic of q read and write queues as a user would,
// with `raftmq admin topic create`.
func (g *group) createTopic(t testing.TB, topic string, q int) {
	t.Helper()
	if out, err := g.cli("admin", "topic", "create", topic, "--queues", fmt.Sprint(q)); err != nil {
		t.Fatalf("create topic %s: %v\n%s", topic, err, out)
	}
}

// logMark remembers where each node's log ended, so that a failing subtest
// can print what the brokers logged while it ran.
type logMark struct {
	offsets []int64
	client  int
}

func (g *group) mark() logMark {
	m := logMark{client: clientLog.len()}
	for _, n := range g.nodes {
		var off int64
		if fi, err := os.Stat(n.logPath); err == nil {
			off = fi.Size()
		}
		m.offsets = append(m.offsets, off)
	}
	return m
}

// diagnose, registered by sub, prints on t's failure every broker warning
// and error logged since m and the client's warnings and errors since m.
func (g *group) diagnose(t *testing.T, m logMark) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, n := range g.nodes {
			if s := tail(n.logPath, m.offsets[i], 80, "level=WARN", "level=ERROR"); s != "" {
				t.Logf("node %d (%s) warnings and errors during %s:\n%s", n.id, n.client, t.Name(), s)
			}
		}
		if s := clientLog.since(m.client, 80); s != "" {
			t.Logf("RocketMQ client's warnings and errors during %s:\n%s", t.Name(), s)
		}
	})
}

// sub runs f as a subtest on g, with the brokers' and the client's logs of
// that subtest printed if it fails.
func (g *group) sub(t *testing.T, name string, f func(t *testing.T)) {
	parent := g.t
	t.Run(name, func(t *testing.T) {
		g.t = t
		defer func() { g.t = parent }()
		g.diagnose(t, g.mark())
		f(t)
	})
}

// tail returns the last n lines of path from byte offset from on that
// contain one of subs (every line if none is given).
func tail(path string, from int64, n int, subs ...string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(subs) > 0 && !containsAny(line, subs) {
			continue
		}
		lines = append(lines, line)
		if len(lines) > 4*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// waitFor polls cond every 20 ms until it holds; past timeout it fails t
// with what.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("%s: not within %v", what, timeout)
	}
}

var errTimeout = errors.New("timed out")

// poll polls cond every 20 ms until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errTimeout
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// clientLog collects the RocketMQ client's log (it logs through rlog): its
// warnings and errors are kept in memory and printed by a failing test;
// nothing is written to the terminal unless INTEROP_CLIENT_LOG names a
// level (debug, info, warn, error), down to which lines are also printed.
var clientLog = newCapture(os.Getenv("INTEROP_CLIENT_LOG"))

type capture struct {
	mu    sync.Mutex
	lines []string
	base  int // lines dropped from the front
	echo  int // print lines of this level and above (5: none)
}

const (
	lvlDebug = iota
	lvlInfo
	lvlWarn
	lvlError
	lvlFatal
	lvlNone
)

func newCapture(echo string) *capture {
	c := &capture{echo: lvlNone}
	switch strings.ToLower(echo) {
	case "debug":
		c.echo = lvlDebug
	case "info":
		c.echo = lvlInfo
	case "warn", "warning":
		c.echo = lvlWarn
	case "error":
		c.echo = lvlError
	}
	return c
}

func (c *capture) log(level int, name, msg string, fields map[string]interface{}) {
	if level < lvlWarn && level < c.echo {
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s", time.Now().Format("15:04:05.000"), name, msg)
	for _, k := range sortedKeys(fields) {
		fmt.Fprintf(&b, " %s=%v", k, fields[k])
	}
	line := b.String()
	if level >= c.echo {
		fmt.Fprintln(os.Stderr, "rocketmq-client:", line)
	}
	if level < lvlWarn {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
	if len(c.lines) > 20000 {
		c.base += 10000
		c.lines = append(c.lines[:0], c.lines[10000:]...)
	}
}

func (c *capture) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base + len(c.lines)
}

// since returns the last n lines logged after position from.
func (c *capture) since(from, n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := max(from-c.base, 0)
	if i > len(c.lines) {
		return ""
	}
	ls := c.lines[i:]
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

func (c *capture) Debug(msg string, f map[string]interface{}) { c.log(lvlDebug, "DEBUG", msg, f) }
func (c *capture) Info(msg string, f map[string]interface{})  { c.log(lvlInfo, "INFO", msg, f) }
func (c *capture) Warning(msg string, f map[string]interface{}) {
	c.log(lvlWarn, "WARN", msg, f)
}
func (c *capture) Error(msg string, f map[string]interface{}) { c.log(lvlError, "ERROR", msg, f) }
func (c *capture) Fatal(msg string, f map[string]interface{}) { c.log(lvlFatal, "FATAL", msg, f) }
func (c *capture) Level(string)                               {}
func (c *capture) OutputPath(string) error                    { return nil }

// eventually is waitFor under the name the name-server test uses.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, timeout, what, cond)
}

// goroutineDump returns the stack dump the Go runtime wrote to the log at
// path on SIGQUIT (at most 400 lines), or a note that there is none.
func goroutineDump(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	i := bytes.Index(b, []byte("SIGQUIT: quit"))
	if i < 0 {
		return "(no dump in " + path + ")"
	}
	lines := strings.SplitN(string(b[i:]), "\n", 401)
	return strings.Join(lines[:min(len(lines), 400)], "\n")
}
