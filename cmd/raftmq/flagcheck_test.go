package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runMain runs this test binary as `raftmq ARGS` and returns its exit
// code and standard error; a process still running after timeout gets
// SIGTERM (exit code -1 if it had to be killed).
func runMain(t *testing.T, timeout time.Duration, args ...string) (code int, stderr string, took time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, errb.String(), took
}

// Every flag of `raftmq broker` and `raftmq cluster` with a value outside
// what it accepts, on the command line or in a --config file, is refused
// at once with exit status 2 and a message naming the flag; nothing
// starts. (Before, many of these started the broker, or the cluster's
// nodes, which then failed or crash-looped.)
func TestBadFlagValuesExitUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	node := []string{"broker", "--id", "1", "--data", filepath.Join(dir, "n1"), "--peer", "1=127.0.0.1:0/127.0.0.1:0"}
	base := freeBasePort(t)
	group := []string{"cluster", "--data", filepath.Join(dir, "cluster"), "--base-port", strconv.Itoa(base), "--demo", "0", "--restart=false"}
	yamlFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	badTick := yamlFile("tick.yaml", "tick: -1s\n")
	// The arguments the bad values are added to pass on their own.
	require.NoError(t, checkBrokerArgs(node[1:]))
	require.NoError(t, checkBrokerArgs(append(node[1:], "--config", yamlFile("good.yaml", "tick: 100ms\ndirect-io: 1\n"))))
	for _, c := range []struct {
		cmd  []string
		args []string
		flag string
	}{
		{node, []string{"--id", "0"}, "--id"},
		{node, []string{"--flush", "x"}, "--flush"},
		{node, []string{"--segment-size", "100"}, "--segment-size"},
		{node, []string{"--segment-size", "5000000000"}, "--segment-size"},
		{node, []string{"--warm-ahead", "-2"}, "--warm-ahead"},
		{node, []string{"--cache-window", "-5"}, "--cache-window"},
		{node, []string{"--direct-io", "7"}, "--direct-io"},
		{node, []string{"--cq-max-open-files", "-7"}, "--cq-max-open-files"},
		{node, []string{"--http", "nohost"}, "--http"},
		{node, []string{"--http", "127.0.0.1:70000"}, "--http"},
		{node, []string{"--bind-ip", "not-an-ip"}, "--bind-ip"},
		{node, []string{"--grpc-transport", "quic"}, "--grpc-transport"},
		{group, []string{"--grpc-transport", "quic"}, "--grpc-transport"},
		{node, []string{"--namesrv", "nohost"}, "--namesrv"},
		{node, []string{"--cluster-name", ""}, "--cluster-name"},
		{node, []string{"--broker-name", " "}, "--broker-name"},
		{node, []string{"--tick", "-1s"}, "--tick"},
		{node, []string{"--tick", "0s"}, "--tick"},
		{node, []string{"--tick", "x"}, "--tick"},
		{node, []string{"--commit-notify-delay", "1h"}, "--commit-notify-delay"},
		{node, []string{"--max-timer-delay", "0s"}, "--max-timer-delay"},
		{node, []string{"--transaction-timeout", "-1s"}, "--transaction-timeout"},
		{node, []string{"--transaction-check-interval", "0s"}, "--transaction-check-interval"},
		{node, []string{"--transaction-check-max", "0"}, "--transaction-check-max"},
		{node, []string{"--file-reserved-time", "0s"}, "--file-reserved-time"},
		{node, []string{"--disk-check-interval", "-1s"}, "--disk-check-interval"},
		{node, []string{"--delete-when", "25"}, "--delete-when"},
		{node, []string{"--disk-clean-ratio", "1.5"}, "--disk-clean-ratio"},
		{node, []string{"--disk-full-ratio", "-1"}, "--disk-full-ratio"},
		{node, []string{"--acl-file", "/nonexistent/plain_acl.yml"}, "--acl-file"},
		{node, []string{"--tls-cert", "/nonexistent/cert.pem"}, "--tls-cert"},
		{node, []string{"--tls-mode", "bogus"}, "--tls-mode"},
		{node, []string{"--tls-client-auth", "bogus"}, "--tls-client-auth"},
		{node, []string{"--console-runs", "/nonexistent/runs"}, "--console-runs"},
		{node, []string{"--peer", "2=127.0.0.1:70000/127.0.0.1:1"}, "--peer"},
		{node, []string{"--config", badTick}, "--tick"},
		{node, []string{"--config", yamlFile("dio.yaml", "direct-io: 7\n")}, "--direct-io"},
		{node, []string{"--config", yamlFile("tickx.yaml", "tick: x\n")}, "tick"},
		{group, []string{"--nodes", "0"}, "--nodes"},
		{group, []string{"--nodes", "11"}, "--nodes"},
		{group, []string{"--base-port", "70000"}, "--base-port"},
		{group, []string{"--base-port", "0"}, "--base-port"},
		{group, []string{"--base-port", "65530"}, "--base-port"},
		{group, []string{"--groups", "0"}, "--groups"},
		{group, []string{"--namesrv-port", "70000"}, "--namesrv-port"},
		{group, []string{"--demo", "-1"}, "--demo"},
		{group, []string{"--flush", "x"}, "--flush"},
		{group, []string{"--tick", "-1s"}, "--tick"},
		{group, []string{"--direct-io", "7"}, "--direct-io"},
		{group, []string{"--cq-max-open-files", "-7"}, "--cq-max-open-files"},
		{group, []string{"--segment-size", "10"}, "--segment-size"},
		{group, []string{"--broker-config", badTick}, "--tick"},
	} {
		args := append(append([]string{}, c.cmd...), c.args...)
		t.Run(fmt.Sprintf("%s %s", c.cmd[0], strings.Join(c.args, " ")), func(t *testing.T) {
			code, stderr, took := runMain(t, 10*time.Second, args...)
			require.Equal(t, exitUsage, code, "exit code; stderr:\n%s", stderr)
			require.Contains(t, stderr, c.flag)
			require.Less(t, took, 5*time.Second)
		})
	}
}

// `raftmq cluster` with one of its ports taken exits non-zero at once,
// naming the port and --base-port, before it starts any node (before, the
// other nodes started and the group ran without the one that could not
// listen, or every node failed until "no leader within 20 s").
func TestClusterBusyPortExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	base := freeBasePort(t)
	for _, off := range []int{0, 11, 22} { // a client, a raft and an HTTP port
		busy := base + off
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(busy)))
		require.NoError(t, err)
		data := t.TempDir()
		code, stderr, took := runMain(t, 30*time.Second, "cluster", "--data", data, "--base-port", strconv.Itoa(base), "--demo", "0")
		l.Close()
		require.NotZero(t, code, "stderr:\n%s", stderr)
		require.Contains(t, stderr, fmt.Sprintf("port %d ", busy))
		require.Contains(t, stderr, "--base-port")
		require.Less(t, took, 5*time.Second)
		_, err = os.Stat(filepath.Join(data, "n1", "broker.log"))
		require.ErrorIs(t, err, os.ErrNotExist, "no node was started")
	}
}
