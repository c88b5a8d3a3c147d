package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/cluster"
)

// localNode is one broker process the supervisor runs.
type localNode struct {
	id                 uint64
	client, raft, http string
	dir, logPath       string
	cmd                *exec.Cmd
	exited             chan error
}

type clusterFlags struct {
	data     string
	basePort int
	nodes    int
	flush    string
	demo     int
	segment  int64
	tick     time.Duration
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
			"raft base-port+10+i-1, HTTP (/metrics, /status) base-port+20+i-1.",
		RunE: func(c *cobra.Command, _ []string) error {
			return runCluster(c.Context(), logger(), f)
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "raftmq-data", "data directory (one subdirectory per node)")
	cmd.Flags().IntVar(&f.basePort, "base-port", 10911, "first client port")
	cmd.Flags().IntVar(&f.nodes, "nodes", 3, "number of nodes")
	cmd.Flags().StringVar(&f.flush, "flush", "sync", "sync (fsync on a quorum before ack) or async")
	cmd.Flags().IntVar(&f.demo, "demo", 1000, "messages to send and read back once the group is up (0: none)")
	cmd.Flags().Int64Var(&f.segment, "segment-size", 1<<30, "commitlog segment size")
	cmd.Flags().DurationVar(&f.tick, "tick", 50*time.Millisecond, "raft tick")
	return cmd
}

func (f clusterFlags) plan() []*localNode {
	var ns []*localNode
	for i := 1; i <= f.nodes; i++ {
		dir := filepath.Join(f.data, fmt.Sprintf("n%d", i))
		ns = append(ns, &localNode{
			id:      uint64(i),
			client:  fmt.Sprintf("127.0.0.1:%d", f.basePort+i-1),
			raft:    fmt.Sprintf("127.0.0.1:%d", f.basePort+10+i-1),
			http:    fmt.Sprintf("127.0.0.1:%d", f.basePort+20+i-1),
			dir:     dir,
			logPath: filepath.Join(dir, "broker.log"),
			exited:  make(chan error, 1),
		})
	}
	return ns
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
	nodes := f.plan()
	var peerArgs []string
	for _, n := range nodes {
		peerArgs = append(peerArgs, "--peer", fmt.Sprintf("%d=%s/%s", n.id, n.client, n.raft))
	}
	fmt.Printf("raftmq: starting a %d-node group (flush %s), data in %s\n", len(nodes), f.flush, f.data)
	fmt.Printf("  %-4s %-17s %-17s %-17s %s\n", "node", "client", "raft", "http", "log")
	for _, n := range nodes {
		fmt.Printf("  n%-3d %-17s %-17s %-17s %s\n", n.id, n.client, n.raft, n.http, n.logPath)
	}
	for _, n := range nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return err
		}
		lf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		args := append([]string{"broker", "--id", fmt.Sprint(n.id), "--data", n.dir, "--http", n.http,
			"--flush", f.flush, "--segment-size", fmt.Sprint(f.segment), "--tick", f.tick.String()}, peerArgs...)
		n.cmd = exec.Command(self, args...)
		n.cmd.Stdout, n.cmd.Stderr = lf, lf
		if err := n.cmd.Start(); err != nil {
			lf.Close()
			stopNodes(nodes)
			return fmt.Errorf("cluster: start node %d: %w", n.id, err)
		}
		go func(n *localNode, lf *os.File) {
			n.exited <- n.cmd.Wait()
			lf.Close()
		}(n, lf)
	}
	defer stopNodes(nodes)

	// Wait for a leader.
	deadline := time.Now().Add(20 * time.Second)
	var leader uint64
	for leader == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: no leader after 20s; see the node logs")
		}
		if err := checkExited(nodes); err != nil {
			return err
		}
		for _, st := range fetchStatuses(nodes) {
			if st != nil && st.LeaderReady {
				leader = st.Status.ID
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Printf("leader elected: n%d\n", leader)
	if f.demo > 0 {
		var addrs []string
		for _, n := range nodes {
			addrs = append(addrs, n.client)
		}
		if err := clusterDemo(ctx, log, addrs, f.demo); err != nil {
			return err
		}
	}
	fmt.Println("watching the group; Ctrl-C stops all nodes")
	fi, _ := os.Stdout.Stat()
	tty := fi != nil && fi.Mode()&os.ModeCharDevice != 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Println()
			}
			fmt.Println("stopping...")
			return stopNodes(nodes)
		case <-tick.C:
		}
		if err := checkExited(nodes); err != nil {
			fmt.Println()
			fmt.Fprintln(os.Stderr, "raftmq:", err)
		}
		line := statusLine(nodes, fetchStatuses(nodes))
		if tty {
			fmt.Printf("\r\033[K%s", line)
		} else if time.Since(last) >= 5*time.Second {
			fmt.Println(line)
			last = time.Now()
		}
	}
}

func checkExited(nodes []*localNode) error {
	for _, n := range nodes {
		select {
		case err := <-n.exited:
			n.exited <- err // keep it for stopNodes
			if n.cmd != nil && n.cmd.ProcessState != nil {
				return fmt.Errorf("node %d exited (%v); last lines of %s:\n%s", n.id, n.cmd.ProcessState, n.logPath, tail(n.logPath, 10))
			}
		default:
		}
	}
	return nil
}

func tail(path string, lines int) string {
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

var statusClient = &http.Client{Timeout: 500 * time.Millisecond}

func fetchStatus(httpAddr string) (*cluster.NodeStatus, error) {
	resp, err := statusClient.Get("http://" + httpAddr + "/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st cluster.NodeStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

func fetchStatuses(nodes []*localNode) []*cluster.NodeStatus {
	out := make([]*cluster.NodeStatus, len(nodes))
	for i, n := range nodes {
		out[i], _ = fetchStatus(n.http)
	}
	return out
}

func statusLine(nodes []*localNode, sts []*cluster.NodeStatus) string {
	var leader, term, commit uint64
	parts := []string{}
	for i, st := range sts {
		if st == nil {
			parts = append(parts, fmt.Sprintf("n%d down", nodes[i].id))
			continue
		}
		if st.Status.Term >= term {
			term = st.Status.Term
			if st.Status.Leader != 0 {
				leader = st.Status.Leader
			}
		}
		commit = max(commit, st.Status.Commit)
		parts = append(parts, fmt.Sprintf("n%d %s applied %d", nodes[i].id, strings.ToLower(strings.TrimPrefix(st.Status.Role, "State")), st.Status.Applied))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s leader n%d term %d commit %d | %s", time.Now().Format("15:04:05"), leader, term, commit, strings.Join(parts, " | "))
}

// stopNodes sends SIGTERM to every running node and waits (SIGKILL after
// 15 s).
func stopNodes(nodes []*localNode) error {
	var errs []error
	for _, n := range nodes {
		if n.cmd != nil && n.cmd.Process != nil && n.cmd.ProcessState == nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		select {
		case err := <-n.exited:
			n.exited <- err
			if err != nil && !isSignalExit(err) {
				errs = append(errs, fmt.Errorf("node %d: %w", n.id, err))
			}
		case <-time.After(15 * time.Second):
			_ = n.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("node %d did not stop within 15s; killed", n.id))
		}
	}
	return errors.Join(errs...)
}

func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	return false
}
