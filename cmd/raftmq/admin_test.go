package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// cli runs raftmq with args in this process and returns what it printed.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// startProcesses starts three broker processes (this test binary) with
// 8 MiB segments and args, stopped when the test ends, and waits for a
// leader, which it returns.
// testHTTPToken is the HTTP bearer token of groups started with an ACL.
const testHTTPToken = "cmd-test-http-token"

func startProcesses(t *testing.T, args ...string) (*localgroup.Group, uint64) {
	t.Helper()
	cfg := localgroup.Config{Binary: os.Args[0], Env: []string{"RAFTMQ_TEST_MAIN=1"}, Dir: t.TempDir(),
		BasePort: freeBasePort(t), Args: append([]string{"--segment-size", "8388608"}, args...)}
	if slices.Contains(args, "--acl-file") {
		cfg.HTTPToken = testHTTPToken // with an ACL, /status (WaitLeader) needs a credential
	}
	g := localgroup.New(cfg)
	require.NoError(t, g.Start())
	t.Cleanup(func() { _ = g.StopAll() })
	leader, err := g.WaitLeader(15 * time.Second)
	require.NoError(t, err)
	return g, leader
}

// cliJSON runs a --json command and decodes its answer into v.
func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := cli(t, append(args, "--json")...)
	require.NoError(t, err, "raftmq %v: %s", args, out)
	require.NoError(t, json.Unmarshal([]byte(out), v), "raftmq %v printed %q", args, out)
}

// TestAdminCommands runs the mqadmin-like commands against three real
// broker processes holding data, through each node, and checks their
// figures: queue bounds, lag = broker offset - committed offset, a reset
// by time landing on the first message stored after the time on every
// node, the replicated config import, and a clear error for an unknown
// topic or group.
func TestAdminCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g, _ := startProcesses(t)
	all := strings.Join(g.Addrs(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic, group = "adm", "adm-group"
	out, err := cli(t, "admin", "topic", "update", topic, "--queues", "2", "--addr", all)
	require.NoError(t, err, out)

	cl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer cl.Close()
	p := cl.NewProducer(client.ProducerOptions{Group: "adm-producer"})
	send := func(q int32, n int, key string) {
		for i := range n {
			_, err := p.Send(ctx, &client.Message{Topic: topic, QueueID: q, Body: []byte(fmt.Sprintf("q%d-%d", q, i)), Keys: []string{key}})
			require.NoError(t, err)
		}
	}
	send(0, 5, "early")
	send(1, 5, "early")
	time.Sleep(30 * time.Millisecond)
	mid := time.Now()
	time.Sleep(30 * time.Millisecond)
	send(0, 5, "late")
	send(1, 3, "late")

	// Committed offsets 3 and 2: lag 7 and 6.
	pc := cl.NewPullConsumer(group)
	require.NoError(t, pc.CommitOffset(ctx, topic, 0, 3))
	require.NoError(t, pc.CommitOffset(ctx, topic, 1, 2))

	for i, addr := range g.Addrs() {
		var st cluster.AdminTopicStatus
		cliJSON(t, &st, "admin", "topic", "status", topic, "--addr", addr)
		require.Len(t, st.Queues, 2, "node %d", i+1)
		require.Equal(t, int64(10), st.Queues[0].MaxOffset, "node %d", i+1)
		require.Equal(t, int64(8), st.Queues[1].MaxOffset, "node %d", i+1)
		require.Zero(t, st.Queues[0].MinOffset)
		require.Greater(t, st.Queues[1].LastUpdate, mid.UnixMilli(), "node %d: the last message was stored after mid", i+1)

		var pr cluster.AdminConsumerProgress
		cliJSON(t, &pr, "admin", "consumer", "progress", "-g", group, "--addr", addr)
		require.Equal(t, []string{topic}, pr.Topics)
		require.Len(t, pr.Queues, 2)
		require.Equal(t, cluster.AdminConsumeQueue{Topic: topic, QueueID: 0, BrokerOffset: 10, ConsumerOffset: 3, Committed: true, Lag: 7,
			LastConsume: pr.Queues[0].LastConsume}, pr.Queues[0], "node %d", i+1)
		require.Equal(t, int64(6), pr.Queues[1].Lag, "node %d", i+1)
		require.Equal(t, int64(13), pr.TotalLag, "node %d", i+1)
		require.Positive(t, pr.Queues[0].LastConsume)
		require.Less(t, pr.Queues[0].LastConsume, mid.UnixMilli(), "node %d: message 2 was stored before mid", i+1)
	}
	// The same figures in RocketMQ's bodies, as mqadmin reads them.
	ts, err := cl.TopicStats(ctx, topic)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	require.Equal(t, int64(8), ts[remoting.MessageQueue{Topic: topic, BrokerName: "raftmq", QueueID: 1}].MaxOffset)
	cs, err := cl.ConsumeStats(ctx, group, "")
	require.NoError(t, err)
	require.Equal(t, remoting.OffsetWrapper{BrokerOffset: 10, ConsumerOffset: 3, PullOffset: 3,
		LastTimestamp: cs[remoting.MessageQueue{Topic: topic, BrokerName: "raftmq", QueueID: 0}].LastTimestamp},
		cs[remoting.MessageQueue{Topic: topic, BrokerName: "raftmq", QueueID: 0}])
	resp, err := cl.Invoke(ctx, g.Addrs()[2], remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	require.NoError(t, err)
	var ci remoting.ClusterInfo
	require.NoError(t, remoting.DecodeJSON(resp.Body, &ci))
	require.Len(t, ci.BrokerAddrTable["raftmq"].BrokerAddrs, 3, "%s", resp.Body)
	require.Equal(t, []string{"raftmq"}, ci.ClusterAddrTable["DefaultCluster"])

	// The text table, and mqadmin's name for it.
	out, err = cli(t, "admin", "consumerProgress", "-g", group, "--addr", all)
	require.NoError(t, err, out)
	require.Contains(t, out, "Consume Diff Total: 13")

	// Unknown topic and group: an error naming it, from every command.
	for _, args := range [][]string{
		{"admin", "topic", "status", "nope"},
		{"admin", "topic", "route", "nope"},
		{"admin", "topic", "delete", "nope"},
		{"admin", "consumer", "progress", "-g", group, "-t", "nope"},
		{"admin", "offset", "reset-by-time", "-g", group, "-t", "nope", "-s", "now"},
	} {
		out, err := cli(t, append(args, "--addr", all)...)
		require.Error(t, err, "%v: %s", args, out)
		require.Contains(t, err.Error(), `topic "nope" does not exist`, "%v", args)
	}
	for _, args := range [][]string{
		{"admin", "consumer", "progress", "-g", "nogroup"},
		{"admin", "consumer", "connection", "-g", "nogroup"},
		{"admin", "group", "delete", "-g", "nogroup"},
		{"admin", "offset", "reset-by-time", "-g", "nogroup", "-t", topic, "-s", "now"},
	} {
		out, err := cli(t, append(args, "--addr", all)...)
		require.Error(t, err, "%v: %s", args, out)
		require.Contains(t, err.Error(), `consumer group "nogroup" does not exist`, "%v", args)
	}
	out, err = cli(t, "admin", "consumer", "connection", "-g", group, "--addr", all)
	require.ErrorContains(t, err, `no consumer of group "adm-group" is online`, out)
	out, err = cli(t, "admin", "producerConnection", "-g", "adm-producer", "-t", topic, "--addr", all)
	require.ErrorContains(t, err, `no producer of group "adm-producer" is online`, out) // raftmq's plain producer sends no heartbeat
	tp, err := cl.NewTransactionProducer(client.TransactionProducerOptions{Producer: client.ProducerOptions{Group: "adm-tx"}}, txListener{})
	require.NoError(t, err)
	require.NoError(t, tp.Start(ctx))
	defer tp.Shutdown(context.Background())
	for i, addr := range g.Addrs() {
		var pc cluster.AdminProducerConnection
		cliJSON(t, &pc, "admin", "producer", "connection", "-g", "adm-tx", "--addr", addr)
		require.Len(t, pc.Clients, 1, "node %d", i+1)
		require.Equal(t, tp.ClientID(), pc.Clients[0].ClientID, "node %d", i+1)
	}

	// Reset by time to mid: the first messages stored after it are 5 and
	// 5, on every node, and a consumer starting now fetches them.
	var rs cluster.AdminReset
	cliJSON(t, &rs, "admin", "offset", "reset-by-time", "-g", group, "-t", topic, "-s", mid.UTC().Format(time.RFC3339Nano), "--addr", g.Addrs()[2])
	require.Len(t, rs.Queues, 2)
	require.Equal(t, int64(5), rs.Queues[0].New)
	require.Equal(t, int64(5), rs.Queues[1].New)
	for i, addr := range g.Addrs() {
		var pr cluster.AdminConsumerProgress
		cliJSON(t, &pr, "admin", "consumer", "progress", "-g", group, "-t", topic, "--addr", addr)
		require.Equal(t, int64(5), pr.Queues[0].ConsumerOffset, "node %d", i+1)
		require.Equal(t, int64(5), pr.Queues[1].ConsumerOffset, "node %d", i+1)
		require.Equal(t, int64(8), pr.TotalLag, "node %d", i+1)
	}
	off, ok, err := cl.NewPullConsumer(group).FetchOffset(ctx, topic, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(5), off)
	// -1: the end of each queue; without --force an offset never moves forward.
	cliJSON(t, &rs, "admin", "offset", "reset-by-time", "-g", group, "-t", topic, "-s", "-1", "--force=false", "--addr", all)
	require.Equal(t, int64(5), rs.Queues[0].New)
	cliJSON(t, &rs, "admin", "resetOffsetByTime", "-g", group, "-t", topic, "-s", "-1", "--addr", all)
	require.Equal(t, int64(10), rs.Queues[0].New)
	require.Equal(t, int64(8), rs.Queues[1].New)

	// A live push consumer: its connection and subscription, on every node.
	pcons, err := cl.NewPushConsumer(client.PushConsumerOptions{Group: "adm-push", Subscriptions: map[string]client.Subscription{topic: {Expression: "*"}}},
		func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	require.NoError(t, err)
	require.NoError(t, pcons.Start(ctx))
	defer pcons.Shutdown(context.Background())
	for i, addr := range g.Addrs() {
		var cc cluster.AdminConsumerConnection
		cliJSON(t, &cc, "admin", "consumer", "connection", "-g", "adm-push", "--addr", addr)
		require.Len(t, cc.Clients, 1, "node %d", i+1)
		require.Equal(t, pcons.ClientID(), cc.Clients[0].ClientID)
		require.Contains(t, []string{cc.Subscriptions[0].Topic, cc.Subscriptions[len(cc.Subscriptions)-1].Topic}, topic)
		require.Equal(t, "CLUSTERING", cc.MessageModel)
	}

	// Without -g: a line per group, with its online consumers.
	var rows []groupSummary
	cliJSON(t, &rows, "admin", "consumer", "progress", "--addr", all)
	found := false
	for _, r := range rows {
		if r.Group == "adm-push" {
			found = true
			require.Equal(t, groupSummary{Group: "adm-push", Consumers: 1, Model: "CLUSTERING", Type: r.Type, TotalLag: r.TotalLag}, r)
		}
	}
	require.True(t, found, "%+v", rows)

	// The group view, asked through a follower: three members, each
	// reachable with the leader's term, lag counted.
	var cv cluster.AdminCluster
	cliJSON(t, &cv, "admin", "cluster", "list", "--addr", g.Addrs()[1])
	require.Len(t, cv.Members, 3)
	require.NotZero(t, cv.Leader)
	for _, m := range cv.Members {
		require.True(t, m.Reachable, "%+v", m)
		require.Equal(t, cv.Term, m.Term, "%+v", m)
		require.LessOrEqual(t, m.Match, cv.LastIndex)
		require.Equal(t, cv.LastIndex-m.Match, m.LagEntries)
		if m.ID == cv.Leader {
			require.Equal(t, "StateLeader", m.Role)
		}
	}

	// Subscription groups and topics: update, delete, delete again.
	out, err = cli(t, "admin", "group", "update", "-g", "adm-g3", "--retry-max-times", "5", "--addr", all)
	require.NoError(t, err, out)
	out, err = cli(t, "admin", "deleteSubGroup", "-g", "adm-g3", "--addr", all)
	require.NoError(t, err, out)
	_, err = cli(t, "admin", "group", "delete", "-g", "adm-g3", "--addr", all)
	require.ErrorContains(t, err, `consumer group "adm-g3" does not exist`)
	out, err = cli(t, "admin", "updateTopic", "-t", "adm-tmp", "-r", "3", "-w", "2", "-p", "4", "--addr", all)
	require.NoError(t, err, out)
	var tmp cluster.AdminTopicStatus
	cliJSON(t, &tmp, "admin", "topicStatus", "-t", "adm-tmp", "--addr", g.Addrs()[0])
	require.Equal(t, cluster.AdminTopicStatus{Topic: "adm-tmp", ReadQueues: 3, WriteQueues: 2, Perm: 4, Queues: tmp.Queues}, tmp)
	out, err = cli(t, "admin", "topic", "delete", "adm-tmp", "--addr", all)
	require.NoError(t, err, out)
	_, err = cli(t, "admin", "topic", "status", "adm-tmp", "--addr", g.Addrs()[2])
	require.ErrorContains(t, err, `topic "adm-tmp" does not exist`)

	// Messages by key through mqadmin's name.
	out, err = cli(t, "admin", "queryMsgByKey", "-t", topic, "-k", "late", "--addr", all)
	require.NoError(t, err, out)
	require.Equal(t, 8, strings.Count(out, "KEYS=late"), out)

	// One message by queue offset, and none past the end.
	out, err = cli(t, "admin", "queryMsgByOffset", "-t", topic, "-i", "1", "-o", "6", "--addr", all)
	require.NoError(t, err, out)
	require.Contains(t, out, "queue 1  offset 6")
	require.Contains(t, out, "KEYS=late")
	_, err = cli(t, "admin", "message", "get", "-t", topic, "-i", "1", "-o", "8", "--addr", all)
	require.ErrorContains(t, err, "no message at adm queue 1 offset 8 (the queue holds [0, 8))")

	// import-config through raft: a new topic and group, and offsets,
	// one past its queue's end (lowered to it), on every node.
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("topics.json", `{"topicConfigTable":{"imp":{"topicName":"imp","readQueueNums":3,"writeQueueNums":3,"perm":6,"order":false}}}`)
	write("subscriptionGroup.json", `{"subscriptionGroupTable":{"imp-g":{"groupName":"imp-g","consumeEnable":true,"retryMaxTimes":4}}}`)
	write("consumerOffset.json", `{"offsetTable":{"adm@imp-g":{0:4,1:100},"imp@imp-g":{"2":0}}}`)
	var im cluster.AdminImport
	cliJSON(t, &im, "admin", "import-config", dir, "--addr", g.Addrs()[1])
	require.Equal(t, cluster.AdminImport{Topics: 1, Groups: 1, Offsets: 3, Clamped: 1, Index: im.Index}, im)
	for i, addr := range g.Addrs() {
		var st cluster.AdminTopicStatus
		cliJSON(t, &st, "admin", "topic", "status", "imp", "--addr", addr)
		require.Len(t, st.Queues, 3, "node %d", i+1)
		var pr cluster.AdminConsumerProgress
		cliJSON(t, &pr, "admin", "consumer", "progress", "-g", "imp-g", "-t", topic, "--addr", addr)
		require.Equal(t, int64(4), pr.Queues[0].ConsumerOffset, "node %d", i+1)
		require.Equal(t, int64(8), pr.Queues[1].ConsumerOffset, "node %d: 100 lowered to the queue's end", i+1)
	}
}

// TestAdminClusterLag: with a follower stopped, `admin cluster list`
// reports it unreachable and behind the leader by the entries and bytes
// sent since; once it is back it catches up to lag 0.
func TestAdminClusterLag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g, leader := startProcesses(t)
	down := leader%3 + 1
	require.NoError(t, g.Stop(down, 10*time.Second))
	all := strings.Join(g.Addrs(), ",")
	out, err := cli(t, "admin", "topic", "create", "lag", "--queues", "1", "--addr", all)
	require.NoError(t, err, out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer cl.Close()
	p := cl.NewProducer(client.ProducerOptions{Group: "lag-producer"})
	const n, size = 20, 1000
	for range n {
		_, err := p.Send(ctx, &client.Message{Topic: "lag", Body: bytes.Repeat([]byte("x"), size)})
		require.NoError(t, err)
	}
	var cv cluster.AdminCluster
	cliJSON(t, &cv, "admin", "cluster", "list", "--addr", all)
	require.Equal(t, leader, cv.Leader)
	for _, m := range cv.Members {
		if m.ID != down {
			require.True(t, m.Reachable, "%+v", m)
			continue
		}
		require.False(t, m.Reachable, "%+v", m)
		require.NotEmpty(t, m.Error)
		require.GreaterOrEqual(t, m.LagEntries, uint64(n), "one entry per send at least: %+v", m)
		require.Greater(t, m.LagBytes, int64(n*size), "%+v", m)
	}
	require.NoError(t, g.StartNode(down))
	out, err = cli(t, "admin", "node", "wait", fmt.Sprint(down), "--every", "100ms", "--timeout", "20s", "--addr", all)
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("n%d caught up", down))
	out, err = cli(t, "admin", "node", "wait", "9", "--addr", all)
	require.ErrorContains(t, err, "node 9 is not a member", out)
	require.Eventually(t, func() bool {
		out, err := cli(t, "admin", "cluster", "list", "--json", "--addr", all)
		if err != nil || json.Unmarshal([]byte(out), &cv) != nil {
			return false
		}
		for _, m := range cv.Members {
			if m.ID == down {
				return m.Reachable && m.LagEntries == 0 && m.LagBytes == 0 && m.Applied == cv.Members[leader-1].Applied
			}
		}
		return false
	}, 20*time.Second, 200*time.Millisecond, "node %d did not catch up: %+v", down, cv)
}

// txListener commits every transaction.
type txListener struct{}

func (txListener) ExecuteLocalTransaction(context.Context, *client.Message) client.LocalTransactionState {
	return client.CommitMessage
}

func (txListener) CheckLocalTransaction(context.Context, *client.MessageExt) client.LocalTransactionState {
	return client.CommitMessage
}

// TestConsumePop runs consume --pop against three broker processes: it
// creates the group, acks what it prints (the group's offset moves), and
// with --no-ack leaves the messages in flight, which admin consumer
// progress counts.
func TestConsumePop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g, _ := startProcesses(t)
	all := strings.Join(g.Addrs(), ",")
	const topic, group = "popt", "pop-group"
	out, err := cli(t, "admin", "topic", "update", topic, "--queues", "1", "--addr", all)
	require.NoError(t, err, out)
	cl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer cl.Close()
	p := cl.NewProducer(client.ProducerOptions{})
	for i := range 6 {
		_, err := p.Send(context.Background(), &client.Message{Topic: topic, QueueID: 0, Body: fmt.Appendf(nil, "p%d", i)})
		require.NoError(t, err)
	}
	out, err = cli(t, "consume", "--pop", "--topic", topic, "--group", group, "--max", "3", "--addr", all)
	require.NoError(t, err, out)
	out, err = cli(t, "consume", "--pop", "--no-ack", "--invisible", "1m", "--topic", topic, "--group", group, "--addr", all)
	require.NoError(t, err, out)
	var pr cluster.AdminConsumerProgress
	cliJSON(t, &pr, "admin", "consumer", "progress", "-g", group, "-t", topic, "--addr", all)
	require.Len(t, pr.Queues, 1)
	require.Equal(t, int64(3), pr.Queues[0].ConsumerOffset, "three acked")
	require.Equal(t, int64(3), pr.Queues[0].InFlight, "three in flight")
	require.Equal(t, int64(3), pr.TotalInFlight)
	out, err = cli(t, "admin", "consumer", "progress", "-g", group, "-t", topic, "--addr", all)
	require.NoError(t, err, out)
	require.Contains(t, out, "Pop In Flight Total: 3")
}
