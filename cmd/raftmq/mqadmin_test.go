package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/localgroup"
)

// cheatSheetLines reads the mqadmin command lines of the code blocks of
// docs/mqadmin-cheatsheet.md.
func cheatSheetLines(t *testing.T) []string {
	f, err := os.Open(filepath.Join("..", "..", "docs", "mqadmin-cheatsheet.md"))
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	inCode := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
			continue
		}
		if inCode && strings.HasPrefix(l, "mqadmin ") {
			lines = append(lines, l)
		}
	}
	require.NoError(t, sc.Err())
	return lines
}

// startClusterProcess runs `raftmq cluster` (this test binary) on a free
// base port with args and waits until each node knows a leader; it
// returns the nodes' client addresses.
func startClusterProcess(t *testing.T, args ...string) []string {
	t.Helper()
	dir := t.TempDir()
	base := freeBasePort(t)
	cmd := exec.Command(os.Args[0], append([]string{"cluster", "--demo", "0", "--restart=false", "--data", filepath.Join(dir, "data"),
		"--base-port", fmt.Sprint(base)}, args...)...)
	cmd.Env = append(os.Environ(), "RAFTMQ_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})
	var addrs []string
	for i := 0; i < 3; i++ {
		var st cluster.NodeStatus
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/status", base+20+i))
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if err == nil && st.Status.Leader != 0 {
					break
				}
			}
			require.True(t, time.Now().Before(deadline), "node %d: no status: %v\n%s", i+1, err, out.String())
			time.Sleep(50 * time.Millisecond)
		}
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	return addrs
}

// TestMqadminCheatSheet runs every line of docs/mqadmin-cheatsheet.md
// against `raftmq cluster` with `mqadmin` replaced by `raftmq admin`, and
// checks each answer, then the effects through --json.
func TestMqadminCheatSheet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addrs := startClusterProcess(t)
	t.Setenv("RAFTMQ_ADDR", "")
	t.Setenv("NAMESRV_ADDR", addrs[0])
	t.Setenv("BROKER_ADDR", addrs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// What each line must print, in the sheet's order. The group's topics
	// by then: TopicTest, TopicOrder and GroupLive's %RETRY% topic.
	want := []struct{ prefix, pattern string }{
		{"mqadmin clusterList", `#Role[\s\S]*Leader`},
		{"mqadmin brokerStatus", `raftRole\s+: State(Leader|Follower)`},
		{"mqadmin updateTopic -c", `topic TopicTest: 8 read / 8 write queues`},
		{"mqadmin updateTopic -b", `topic TopicOrder: 4 read / 4 write queues, perm 6, order true`},
		{"mqadmin topicList", `(?m)^TopicOrder\n(.*\n)*TopicTest$`},
		{"mqadmin topicList -c", `#Cluster Name\s+#Topic\s+#Consumer Group\n(.*\n)*DefaultCluster\s+TopicTest`},
		{"mqadmin topicRoute", `"brokerName": "raftmq"`},
		{"mqadmin topicStatus", `8 read / 8 write queues[\s\S]*#QID\s+#Min Offset`},
		{"mqadmin topicClusterList", `^DefaultCluster\n$`},
		{"mqadmin updateTopicPerm", `topic TopicOrder: perm 6 -> 4`},
		{"mqadmin sendMessage", `#Broker Name\s+#QID\s+#Send Result\s+#MsgId\nraftmq\s+0\s+SEND_OK\s+[0-9A-F]{32}`},
		{"mqadmin queryMsgByKey", `KEYS=order-1001[\s\S]*TAGS=TagA`},
		{"mqadmin queryMsgByUniqueKey", `body \(12 bytes\): "hello raftmq"`},
		{"mqadmin queryMsgById", `body \(12 bytes\): "hello raftmq"`},
		{"mqadmin queryMsgByOffset", `topic TopicTest  queue 0  offset 0`},
		{"mqadmin printMsg", `"hello raftmq"`},
		{"mqadmin consumeMessage", `"hello raftmq"`},
		{"mqadmin updateSubGroup -c", `subscription group GroupTest`},
		{"mqadmin updateSubGroup -b", `"consumeMessageOrderly":true.*"retryMaxTimes":3`},
		{"mqadmin getConsumerConfig", `retryMaxTimes\s+= 16`},
		{"mqadmin resetOffsetByTime", `#QID\s+#Old Offset\s+#New Offset[\s\S]*group GroupTest reset in TopicTest`},
		{"mqadmin consumerProgress -g", `TopicTest\s+0\s+1\s+0\s+1\s[\s\S]*Consume Diff Total: 1\n`},
		{"mqadmin consumerProgress", `#Group\s+#Count[\s\S]*GroupTest\s+0\s+1\n`},
		{"mqadmin consumerConnection", `#ClientId[\s\S]*TopicTest\s+\*[\s\S]*MessageModel: CLUSTERING`},
		{"mqadmin cloneGroupOffset", `GroupTest -> GroupCopy, topic TopicTest, 8 queues`},
		{"mqadmin skipAccumulatedMessage", `(?m)^0\s+0\s+1$`},
		{"mqadmin brokerConsumeStats", `TopicTest\s+GroupCopy\s+0\s+1\s+1\s+0`},
		{"mqadmin statsAll", `TopicTest\s+GroupTest\s+1\s+1`},
		{"mqadmin getBrokerConfig", `brokerPermission\s+= 6\s+group`},
		{"mqadmin updateBrokerConfig", `update broker config success, group-wide \(through raft\): autoCreateTopicEnable=false`},
		{"mqadmin wipeWritePerm", `wipe write perm of broker\[raftmq\] in the group's log OK, 3 topics`},
		{"mqadmin addWritePerm", `add write perm of broker\[raftmq\] in the group's log OK, 3 topics`},
		{"mqadmin cleanExpiredCQ", `(success, 0 consume-queue files deleted\n[\s\S]*){3}`},
		{"mqadmin deleteExpiredCommitLog", `(success, 0 commitlog segments deleted\n[\s\S]*){3}`},
		{"mqadmin deleteSubGroup", `subscription group GroupOrder deleted`},
		{"mqadmin deleteTopic", `topic TopicOrder deleted`},
	}
	lines := cheatSheetLines(t)
	require.Len(t, lines, len(want), "a pattern per line of the cheat sheet")
	for i, line := range lines {
		w := want[i]
		require.True(t, strings.HasPrefix(line, w.prefix), "line %q: expected %q next", line, w.prefix)
		if strings.Contains(line, "consumerConnection") {
			pc, err := func() (*client.PushConsumer, error) {
				cl, err := client.New(client.Options{Addrs: addrs})
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { cl.Close() })
				return cl.NewPushConsumer(client.PushConsumerOptions{Group: "GroupLive", Subscriptions: map[string]client.Subscription{"TopicTest": {Expression: "*"}}},
					func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
			}()
			require.NoError(t, err)
			require.NoError(t, pc.Start(ctx))
			t.Cleanup(func() { pc.Shutdown(context.Background()) })
		}
		args := append([]string{"admin"}, shellWords(os.ExpandEnv(strings.TrimPrefix(line, "mqadmin ")))...)
		out, err := cli(t, args...)
		require.NoError(t, err, "%s: %s", line, out)
		require.Regexp(t, regexp.MustCompile(w.pattern), out, "%s", line)
		if strings.HasPrefix(line, "mqadmin sendMessage") {
			f := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])
			t.Setenv("MSG_ID", f[len(f)-1])
		}
	}

	// The effects, through --json.
	var names []string
	cliJSON(t, &names, "admin", "topic", "names")
	require.Contains(t, names, "TopicTest")
	require.NotContains(t, names, "TopicOrder", "deleteTopic")
	for _, a := range addrs {
		var set map[string][]cluster.AdminSetting
		cliJSON(t, &set, "admin", "getBrokerConfig", "-b", a)
		got := map[string]string{}
		for _, s := range set[a] {
			got[s.Key] = s.Value
		}
		require.Equal(t, "false", got["autoCreateTopicEnable"], "node %s: the group-wide setting reached every node", a)
		require.Equal(t, "6", got["brokerPermission"], "node %s: write permission given back", a)
	}
	var pr cluster.AdminConsumerProgress
	cliJSON(t, &pr, "admin", "consumer", "progress", "-g", "GroupCopy")
	require.Len(t, pr.Queues, 8)
	require.Zero(t, pr.TotalLag, "GroupCopy skipped its backlog")
	out, err := cli(t, "admin", "getConsumerConfig", "-g", "GroupOrder")
	require.Error(t, err, "GroupOrder was deleted: %s", out)
	// A cluster or broker name that is not the group's changes nothing.
	out, err = cli(t, "admin", "updateTopic", "-c", "OtherCluster", "-t", "Elsewhere")
	require.ErrorContains(t, err, `cluster "OtherCluster" is unknown to`, out)
	out, err = cli(t, "admin", "updateTopic", "-b", addrs[1], "-c", "OtherCluster", "-t", "Elsewhere")
	require.ErrorContains(t, err, `cluster "OtherCluster"`, out)
	out, err = cli(t, "admin", "sendMessage", "-b", "other-broker", "-t", "TopicTest", "-p", "x")
	require.ErrorContains(t, err, "knows no broker group named other-broker", out)
	cliJSON(t, &names, "admin", "topic", "names")
	require.NotContains(t, names, "Elsewhere")
	// Auto-creation is off now: a send to a new topic is refused.
	out, err = cli(t, "admin", "sendMessage", "-t", "NoSuchTopic", "-p", "x")
	require.ErrorContains(t, err, "TOPIC_NOT_EXIST", out)
}

// exitCode is the status main would exit with for err.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

// An unknown command or flag, anywhere in the tree, is a usage error
// (exit 2) naming the closest known one; a command that only groups
// others prints its help.
func TestMqadminUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "topicLst"}, `unknown command "topicLst" for "raftmq admin"; did you mean topicList?`},
		{[]string{"admin", "consumer", "progres"}, "did you mean progress?"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "raftmq"`},
		{[]string{"admin", "clusterList", "--jsn"}, "unknown flag: --jsn; did you mean --json?"},
		{[]string{"admin", "topicStatus", "-x", "T"}, "takes -b (--broker-addr)"},
		{[]string{"--log-format", "xml", "admin", "clusterList"}, `--log-format "xml": want text or json`},
		{[]string{"--log-level", "loud", "admin", "clusterList"}, `--log-level "loud"`},
		{[]string{"admin", "clusterList", "--addr", "127.0.0.1:1", "-n", "127.0.0.1:2"}, "give --addr or -n/--namesrv-addr, not both"},
	} {
		out, err := cli(t, tc.args...)
		require.Equal(t, exitUsage, exitCode(err), "%v: %v %s", tc.args, err, out)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	out, err := cli(t, "admin")
	require.NoError(t, err)
	require.Contains(t, out, "Available Commands:")
}

// -n resolves to the group's nodes through a node answering as a name
// server; $RAFTMQ_ADDR wins over $NAMESRV_ADDR.
func TestMqadminNamesrvResolution(t *testing.T) {
	probe := func(args ...string) string {
		c := newRoot()
		addr := ""
		cmd := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }}
		addrFlag(cmd, &addr)
		c.AddCommand(cmd)
		finishCommands(c)
		c.SetArgs(append([]string{"probe"}, args...))
		require.NoError(t, c.Execute())
		return addr
	}
	// Nothing listens on 127.0.0.1:1: resolving it would fail.
	t.Setenv("NAMESRV_ADDR", "127.0.0.1:1")
	t.Setenv("RAFTMQ_ADDR", "127.0.0.1:5,127.0.0.1:6")
	require.Equal(t, "127.0.0.1:5,127.0.0.1:6", probe(), "$RAFTMQ_ADDR is --addr's default and wins over $NAMESRV_ADDR")
	t.Setenv("RAFTMQ_ADDR", "")
	require.Equal(t, "127.0.0.1:7", probe("--addr", "127.0.0.1:7"), "--addr wins over $NAMESRV_ADDR")
	c := newRoot()
	c.SetArgs([]string{"admin", "clusterList"})
	c.SetOut(io.Discard)
	c.SetErr(io.Discard)
	require.ErrorContains(t, c.Execute(), "no name server answered", "$NAMESRV_ADDR is asked when no address is given")
}

// settingsOf returns node addr's settings by key, asked with creds.
func settingsOf(t *testing.T, addr string, creds ...string) map[string]cluster.AdminSetting {
	t.Helper()
	var set map[string][]cluster.AdminSetting
	cliJSON(t, &set, append(append([]string{}, creds...), "admin", "getBrokerConfig", "-b", addr)...)
	out := map[string]cluster.AdminSetting{}
	for _, s := range set[addr] {
		out[s.Key] = s
	}
	return out
}

// countInLogs counts the lines of the nodes' logs that contain every one
// of parts.
func countInLogs(t *testing.T, g *localgroup.Group, parts ...string) int {
	t.Helper()
	n := 0
	for _, nd := range g.Nodes {
		b, err := os.ReadFile(nd.LogPath)
		require.NoError(t, err)
	line:
		for _, l := range strings.Split(string(b), "\n") {
			for _, p := range parts {
				if !strings.Contains(l, p) {
					continue line
				}
			}
			n++
		}
	}
	return n
}

// TestAdminSettingsACLAudit runs the new admin commands against three
// broker processes with an ACL: a group-wide setting reaches every node
// through raft and survives a restart, the wiped write permission refuses
// sends, a node's log level changes on that node only, restart-only and
// unknown keys are refused, ACL accounts are created and deleted from
// the CLI, a non-admin account is refused (and counted), each change is
// logged once with its caller, consumer progress without -g shows a group
// that has offsets and no subscription config, and consume --commit --max
// commits what it printed.
func TestAdminSettingsACLAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(aclFile, []byte(consoleACL), 0o644))
	keyFile := filepath.Join(t.TempDir(), "acl.key")
	require.NoError(t, os.WriteFile(keyFile, acl.EncodeKey(acl.NewKey()), 0o600))
	g, _ := startProcesses(t, "--acl-file", aclFile, "--acl-key-file", keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	op := []string{"--access-key", "operator", "--secret-key", "operator-secret"}
	reader := []string{"--access-key", "reader1", "--secret-key", "reader-secret"}
	all := strings.Join(g.Addrs(), ",")
	run := func(creds []string, args ...string) (string, error) {
		return cli(t, append(append(append([]string{}, creds...), args...), "--addr", all)...)
	}
	require.Eventually(t, func() bool {
		_, err := run(op, "admin", "updateTopic", "-t", "T1", "-r", "1", "-w", "1")
		return err == nil
	}, 15*time.Second, 100*time.Millisecond, "the group takes the file's ACL")

	// Group-wide, through a follower's address: every node has it.
	out, err := cli(t, append(op, "admin", "updateBrokerConfig", "-k", "brokerPermission", "-v", "4", "-b", g.Addrs()[1])...)
	require.NoError(t, err, out)
	for _, a := range g.Addrs() {
		require.Eventually(t, func() bool { return settingsOf(t, a, op...)["brokerPermission"].Value == "4" }, 5*time.Second, 20*time.Millisecond, a)
	}
	require.Equal(t, cluster.ScopeGroup, settingsOf(t, g.Addrs()[0], op...)["brokerPermission"].Scope)
	out, err = run(op, "admin", "sendMessage", "-t", "T1", "-p", "x")
	require.ErrorContains(t, err, "the broker[raftmq] sending message is forbidden", out)
	require.Equal(t, 1, countInLogs(t, g, "group-wide broker settings changed", "brokerPermission:4", "access_key=operator", "by=127.0.0.1:"),
		"the change is logged once, by the leader, with the caller")

	// It survives a restart (from the log or a snapshot).
	require.NoError(t, g.Stop(3, 10*time.Second))
	require.NoError(t, g.StartNode(3))
	require.Eventually(t, func() bool {
		out, err := cli(t, append(op, "admin", "getBrokerConfig", "-b", g.Addrs()[2], "--json")...)
		return err == nil && strings.Contains(out, `"key": "brokerPermission",
      "value": "4"`)
	}, 20*time.Second, 100*time.Millisecond, "node 3 after its restart")
	out, err = run(op, "admin", "addWritePerm", "-b", "raftmq")
	require.NoError(t, err, out)
	out, err = run(op, "admin", "sendMessage", "-t", "T1", "-p", "x")
	require.NoError(t, err, out)

	// A node's own setting: that node only.
	out, err = cli(t, append(op, "admin", "updateBrokerConfig", "-k", "logLevel", "-v", "debug", "-b", g.Addrs()[0])...)
	require.NoError(t, err, out)
	require.Equal(t, "debug", settingsOf(t, g.Addrs()[0], op...)["logLevel"].Value)
	require.Equal(t, "info", settingsOf(t, g.Addrs()[1], op...)["logLevel"].Value)
	// Restart-only and unknown keys are refused; nothing changes.
	_, err = run(op, "admin", "updateBrokerConfig", "-k", "fileReservedTime", "-v", "1")
	require.ErrorContains(t, err, "needs a restart")
	_, err = run(op, "admin", "updateBrokerConfig", "-k", "brokerPermision", "-v", "2")
	require.ErrorContains(t, err, "did you mean brokerPermission?")
	_, err = run(op, "admin", "updateBrokerConfig", "-k", "brokerPermission", "-v", "5")
	require.ErrorContains(t, err, "want 2 (write only), 4 (read only) or 6")
	require.Equal(t, "6", settingsOf(t, g.Addrs()[0], op...)["brokerPermission"].Value)

	// A non-admin account may not change settings.
	_, err = run(reader, "admin", "wipeWritePerm", "-b", "raftmq")
	require.ErrorContains(t, err, "NO_PERMISSION")

	// ACL accounts from the CLI.
	out, err = run(op, "admin", "updateAclConfig", "-a", "newuser1", "-s", "newsecret1", "-m", "false", "-i", "SUB", "-u", "SUB")
	require.NoError(t, err, out)
	nu := []string{"--access-key", "newuser1", "--secret-key", "newsecret1"}
	require.Eventually(t, func() bool {
		_, err := run(nu, "admin", "topicList")
		return err == nil
	}, 5*time.Second, 50*time.Millisecond, "the new account signs requests")
	_, err = run(nu, "admin", "updateTopic", "-t", "T2")
	require.ErrorContains(t, err, "NO_PERMISSION", "not an admin")
	out, err = run(op, "admin", "deleteAclConfig", "-a", "newuser1")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := run(nu, "admin", "topicList")
		return err != nil && strings.Contains(err.Error(), "NO_PERMISSION")
	}, 5*time.Second, 50*time.Millisecond, "the deleted account is refused")
	require.Equal(t, 1, countInLogs(t, g, "access control changed", "account=newuser1", "op=delete", "access_key=operator"))

	// A group with offsets and no subscription config is listed.
	cl, err := client.New(client.Options{Addrs: g.Addrs(), AccessKey: "operator", SecretKey: "operator-secret"})
	require.NoError(t, err)
	defer cl.Close()
	p := cl.NewProducer(client.ProducerOptions{Group: "p"})
	for i := range 150 {
		_, err := p.Send(ctx, &client.Message{Topic: "T1", QueueID: 0, Body: []byte(fmt.Sprint("m", i))})
		require.NoError(t, err)
	}
	require.NoError(t, cl.NewPullConsumer("offsets-only").CommitOffset(ctx, "T1", 0, 10))
	var rows []groupSummary
	cliJSON(t, &rows, append(op, "admin", "consumerProgress", "--addr", all)...)
	i := slices.IndexFunc(rows, func(r groupSummary) bool { return r.Group == "offsets-only" })
	require.GreaterOrEqual(t, i, 0, "%+v", rows)
	require.Equal(t, int64(151-10), rows[i].TotalLag, "151 messages (one sent above), 10 consumed")

	// consume --commit --max commits what it printed.
	out, err = run(op, "consume", "--topic", "T1", "--group", "cli-reader", "--commit", "--max", "100")
	require.NoError(t, err, out)
	off, ok, err := cl.NewPullConsumer("cli-reader").FetchOffset(ctx, "T1", 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(100), off)
	require.Equal(t, 1, countInLogs(t, g, "topic created or updated", "topic=T1", "access_key=operator"))
}
