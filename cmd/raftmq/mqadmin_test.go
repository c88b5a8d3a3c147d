package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
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
	// Auto-creation is off now: a send to a new topic is refused.
	out, err = cli(t, "admin", "sendMessage", "-t", "NoSuchTopic", "-p", "x")
	require.ErrorContains(t, err, "TOPIC_NOT_EXIST", out)
}
