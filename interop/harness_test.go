// Package interop tests raftmq with Apache RocketMQ's own Go client
// (github.com/apache/rocketmq-client-go/v2), as a user would: the raftmq
// binary is built from this repository and run as three broker processes;
// the tests talk to them only through the RocketMQ client and raftmq's
// command line. It is a module of its own so that raftmq itself never
// depends on the RocketMQ client.
package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// binary is the raftmq binary built by TestMain.
var binary string

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	dir, err := os.MkdirTemp("", "raftmq-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "raftmq")
	build := exec.Command("go", "build", "-o", binary, "./cmd/raftmq")
	build.Dir = ".." // the repository root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "interop: building raftmq:", err)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one broker process.
type node struct {
	id                 int
	client, raft, http string
	dir                string
	mu                 sync.Mutex
	cmd                *exec.Cmd
	done               chan struct{}
}

// group is a three-node raftmq group run as real processes.
type group struct {
	t     *testing.T
	nodes []*node
	peers string
	extra []string
}

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
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

// startGroup starts three brokers and waits for a leader; extra are more
// broker flags.
func startGroup(t *testing.T, extra ...string) *group {
	t.Helper()
	ports := freePorts(t, 9)
	g := &group{t: t, extra: extra}
	base := t.TempDir()
	var peers []string
	for i := range 3 {
		n := &node{id: i + 1,
			client: fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			raft:   fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			http:   fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]),
			dir:    filepath.Join(base, fmt.Sprintf("n%d", i+1))}
		g.nodes = append(g.nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s/%s", n.id, n.client, n.raft))
	}
	g.peers = strings.Join(peers, ",")
	for _, n := range g.nodes {
		g.start(n.id)
	}
	t.Cleanup(func() {
		for _, n := range g.nodes {
			g.stop(n.id, syscall.SIGTERM)
		}
		if t.Failed() {
			for _, n := range g.nodes {
				b, _ := os.ReadFile(filepath.Join(n.dir, "broker.log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("node %d broker.log (last lines):\n%s", n.id, strings.Join(lines, "\n"))
			}
		}
	})
	g.waitLeader(30 * time.Second)
	return g
}

// start (re)starts node id.
func (g *group) start(id int) {
	n := g.nodes[id-1]
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		g.t.Fatal(err)
	}
	lf, err := os.OpenFile(filepath.Join(n.dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		g.t.Fatal(err)
	}
	args := append([]string{"broker", "--id", fmt.Sprint(id), "--data", n.dir, "--http", n.http, "--peers", g.peers,
		"--segment-size", "67108864"}, g.extra...)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// stop signals node id and waits for it to exit.
func (g *group) stop(id int, sig syscall.Signal) {
	n := g.nodes[id-1]
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill kill -9s node id.
func (g *group) kill(id int) { g.stop(id, syscall.SIGKILL) }

type status struct {
	Raft struct {
		Leader uint64 `json:"leader"`
		Term   uint64 `json:"term"`
	} `json:"raft"`
	LeaderReady bool `json:"leaderReady"`
}

func (g *group) status(id int) (status, bool) {
	var st status
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get("http://" + g.nodes[id-1].http + "/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st) == nil
}

// waitLeader waits until some node leads and has applied its term's
// first entry, and returns its id.
func (g *group) waitLeader(timeout time.Duration) int {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range g.nodes {
			if st, ok := g.status(n.id); ok && st.LeaderReady {
				return n.id
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.t.Fatalf("no leader within %v", timeout)
	return 0
}

// addrs are the client addresses, the "name servers" a RocketMQ client is
// given: every node answers route queries itself.
func (g *group) addrs() []string {
	var out []string
	for _, n := range g.nodes {
		out = append(out, n.client)
	}
	return out
}

func (g *group) resolver() primitive.NsResolver { return primitive.NewPassthroughResolver(g.addrs()) }

// raftmq runs the raftmq command line against the group.
func (g *group) raftmq(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// createTopic creates a topic of q queues through the command line.
func (g *group) createTopic(topic string, q int) {
	g.t.Helper()
	if out, err := g.raftmq("admin", "topic", "create", topic, "--queues", fmt.Sprint(q), "--addr", strings.Join(g.addrs(), ",")); err != nil {
		g.t.Fatalf("create topic %s: %v\n%s", topic, err, out)
	}
}

// eventually polls cond every 50 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
