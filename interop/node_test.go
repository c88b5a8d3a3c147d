package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The RocketMQ 5 side of interop: Apache's Node.js client
// (rocketmq-client-nodejs 1.0.8, pinned in node/package-lock.json) sends
// over gRPC to three broker processes, and raftmq's own remoting consumer
// (`raftmq consume`) checks what was stored. The Node.js packages are
// installed by .ci/run (npm ci); without them, or without node, the tests
// are skipped with the reason.

// nodeDir is the Node.js part's directory, its packages installed.
func nodeDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node (Node.js) is not installed; .ci/run installs it")
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "rocketmq-client-nodejs", "package.json")); err != nil {
		t.Skipf("rocketmq-client-nodejs is not installed in %s: run npm ci there (.ci/run does)", dir)
	}
	return dir
}

// nodeResult is what produce.js printed.
type nodeResult struct {
	Normal   []nodeSent `json:"normal"`
	FIFO     []nodeSent `json:"fifo"`
	Delay    []nodeSent `json:"delay"`
	Recalled []nodeSent `json:"recalled"`
	Commit   []nodeSent `json:"commit"`
	Rollback []nodeSent `json:"rollback"`
	Checked  []string   `json:"checked"`
	Checks   int        `json:"checks"`
	Loop     []nodeSent `json:"loop"`
	Failed   int        `json:"loopFailed"`
	// LateRecall is the error of a recall of Delay[0] once delivered.
	LateRecall *string `json:"lateRecallError"`
}

type nodeSent struct {
	Body  string `json:"body"`
	ID    string `json:"id"`
	Group string `json:"group"`
	Due   int64  `json:"due"` // ms since the epoch
	At    int64  `json:"at"`  // acknowledged, ms since the epoch
	// RecalledID is the message id a recall answered.
	RecalledID string `json:"recalledId"`
}

// runNode runs produce.js with plan; it returns what the script printed,
// or its error output.
func runNode(t *testing.T, dir string, plan map[string]any, timeout time.Duration) (nodeResult, string, error) {
	t.Helper()
	return runNodeEnv(t, dir, nil, plan, timeout)
}

// runNodeEnv is runNode with env added to the script's environment.
func runNodeEnv(t *testing.T, dir string, env []string, plan map[string]any, timeout time.Duration) (nodeResult, string, error) {
	t.Helper()
	b, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "produce.js", string(b))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res nodeResult
	if err == nil {
		err = json.Unmarshal(out, &res)
	}
	return res, stderr.String(), err
}

// stored is one message `raftmq consume` printed.
type stored struct {
	queue  int
	offset int64
	id     string
	body   string
}

var consumeLine = regexp.MustCompile(`^queue (\d+) offset (\d+) msgId (\S+) tags "[^"]*": (.*)$`)

// consumeAll reads every message of topic with raftmq's remoting consumer.
func consumeAll(t *testing.T, g *group, topic string) []stored {
	t.Helper()
	out, err := g.cli("consume", "--topic", topic)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res []stored
	for _, line := range strings.Split(out, "\n") {
		m := consumeLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		q, _ := strconv.Atoi(m[1])
		off, _ := strconv.ParseInt(m[2], 10, 64)
		res = append(res, stored{queue: q, offset: off, id: m[3], body: m[4]})
	}
	return res
}

// TestNodeProducer: Apache's RocketMQ 5 Node.js producer, given a
// follower's gRPC address as its access point, sends normal, FIFO, delay
// and transactional messages (commit, rollback, and one left open that the
// broker checks back and the producer's checker commits); raftmq's
// remoting consumer finds each stored once, under the id the client gave
// it, FIFO groups each in one queue in send order, the delay message not
// before it was due, the rolled-back one never. A delay message recalled
// (Producer.recallMessage) before it is due is never stored; a recall of
// the delivered delay message fails with NOT_FOUND.
func TestNodeProducer(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	access := g.nodes[leader%3].grpc // a follower
	topic := uniq("node")
	g.createTopic(t, topic, 4)

	res, stderr, err := runNode(t, dir, map[string]any{"endpoints": access, "topics": []string{topic}, "topic": topic, "prefix": "m-",
		"normal": 5, "fifo": 6, "delay": 1, "delayMs": 3000, "transactions": []string{"commit", "rollback", "check"},
		"wantChecks": 1, "waitChecksMs": 30000, "recall": 2, "recallDelayMs": 2000, "recallLate": true}, 90*time.Second)
	if err != nil {
		t.Fatalf("produce.js: %v\n%s", err, stderr)
	}
	if res.Checks != 1 || len(res.Checked) != 1 || res.Checked[0] != "m-t-check" {
		t.Fatalf("the open transaction was checked back %d times (%v), want once for m-t-check", res.Checks, res.Checked)
	}

	if len(res.Recalled) != 2 || res.Recalled[0].RecalledID != res.Recalled[0].ID {
		t.Fatalf("recalled %+v: want 2, each answered with its message id", res.Recalled)
	}
	if res.LateRecall == nil || !strings.Contains(*res.LateRecall, "NOT_FOUND") && !strings.Contains(*res.LateRecall, "40400") {
		t.Errorf("a recall of the delivered delay message: %v, want NOT_FOUND", res.LateRecall)
	}
	want := map[string]string{} // body -> message id
	for _, s := range append(append(append(append([]nodeSent{}, res.Normal...), res.FIFO...), res.Delay...), res.Commit...) {
		want[s.Body] = s.ID
	}
	want["m-t-check"] = "" // committed by the check-back; id not reported
	var got []stored
	err = poll(30*time.Second, func() bool {
		got = consumeAll(t, g, topic)
		return len(got) >= len(want)
	})
	if err != nil {
		t.Fatalf("stored %d messages, want %d: %+v", len(got), len(want), got)
	}
	seen := map[string]stored{}
	for _, s := range got {
		if _, dup := seen[s.body]; dup {
			t.Errorf("%s stored twice", s.body)
		}
		seen[s.body] = s
		id, ok := want[s.body]
		switch {
		case !ok:
			t.Errorf("unexpected message %q stored (a rolled-back transaction?)", s.body)
		case id != "" && s.id != id:
			t.Errorf("%s stored as %s, the client named it %s", s.body, s.id, id)
		}
	}
	for body := range want {
		if _, ok := seen[body]; !ok {
			t.Errorf("%s was acknowledged but is not stored", body)
		}
	}
	// FIFO: one queue per message group, in send order.
	groups := map[string][]stored{}
	for _, f := range res.FIFO {
		groups[f.Group] = append(groups[f.Group], seen[f.Body])
	}
	for name, ms := range groups {
		for i := 1; i < len(ms); i++ {
			if ms[i].queue != ms[0].queue || ms[i].offset <= ms[i-1].offset {
				t.Errorf("message group %s: %+v not in one queue in send order", name, ms)
			}
		}
	}
	// Delay: the message was delivered into its topic no earlier than due.
	for _, d := range res.Delay {
		m := seen[d.Body]
		out, err := g.cli("admin", "message", "get", "--json", "-t", topic, "-i", fmt.Sprint(m.queue), "-o", fmt.Sprint(m.offset))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var msg struct {
			StoreTimestamp int64 `json:"storeTimestamp"`
		}
		if err := json.Unmarshal([]byte(out), &msg); err != nil || msg.StoreTimestamp == 0 {
			t.Fatalf("admin message get: no storeTimestamp (%v) in\n%s", err, out)
		}
		if msg.StoreTimestamp < d.Due {
			t.Errorf("delay message stored at %d, %d ms before it was due", msg.StoreTimestamp, d.Due-msg.StoreTimestamp)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Logf("stored: %v", keys)
	}
}

// TestNodeACL: with an ACL, the Node.js producer with the right keys sends;
// with a wrong secret it is refused, and the error it reports carries the
// broker's reason.
func TestNodeACL(t *testing.T) {
	dir := nodeDir(t)
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	keyFile := filepath.Join(t.TempDir(), "acl.key")
	if err := os.WriteFile(aclFile, []byte(`accounts:
  - accessKey: nodeproducer
    secretKey: node-secret-1
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
  - accessKey: operator
    secretKey: operator-secret
    admin: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("cd", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGroup(t, "--acl-file", aclFile, "--acl-key-file", keyFile)
	leader := g.waitLeader(30 * time.Second)
	topic := uniq("nodeacl")
	if out, err := g.cli("admin", "topic", "create", topic, "--queues", "4", "--access-key", "operator", "--secret-key", "operator-secret"); err != nil {
		t.Fatalf("create topic: %v\n%s", err, out)
	}
	plan := map[string]any{"endpoints": g.nodes[leader-1].grpc, "topics": []string{topic}, "topic": topic, "prefix": "a-", "normal": 1,
		"accessKey": "nodeproducer", "secretKey": "node-secret-1"}
	if _, stderr, err := runNode(t, dir, plan, 60*time.Second); err != nil {
		t.Fatalf("right keys: %v\n%s", err, stderr)
	}
	plan["secretKey"] = "guessed"
	_, stderr, err := runNode(t, dir, plan, 60*time.Second)
	if err == nil {
		t.Fatal("a wrong secret was accepted")
	}
	if !strings.Contains(stderr, "Check signature failed") {
		t.Fatalf("the refusal does not carry the broker's reason:\n%s", stderr)
	}
	fmt.Fprintln(os.Stderr) // keep the test output readable after node's stderr
}

// TestNodeFIFOAcrossLeaderKill: the Node.js producer sends FIFO messages of
// six message groups one at a time for 12 s while the leader is killed
// with SIGKILL. The route lists every node (the followers as write-only
// brokers that forward to the leader); the client sends each group's
// messages to one node by the group's hash and does not move a group to
// another node, so the groups on the killed node fail while the others go
// on. Sends are acknowledged after the kill; every acknowledged message is
// stored once, and each group's acknowledged messages are in one queue in
// send order.
func TestNodeFIFOAcrossLeaderKill(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	topic := uniq("nodefifo")
	g.createTopic(t, topic, 4)
	access := g.nodes[leader%3].grpc // a follower, which stays up
	type result struct {
		res    nodeResult
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		res, stderr, err := runNode(t, dir, map[string]any{"endpoints": access, "topics": []string{topic}, "topic": topic, "prefix": "k-",
			"fifoForMs": 12000}, 90*time.Second)
		done <- result{res, stderr, err}
	}()
	time.Sleep(4 * time.Second)
	killedAt := time.Now().UnixMilli()
	g.kill(leader)
	g.waitNewLeader(leader, 30*time.Second)
	r := <-done
	if r.err != nil {
		t.Fatalf("produce.js: %v\n%s", r.err, r.stderr)
	}
	t.Logf("%d FIFO sends acknowledged, %d failed across the leader kill", len(r.res.Loop), r.res.Failed)
	checkFIFOLoop(t, g, topic, r.res, r.stderr, killedAt)
}

// checkFIFOLoop checks produce.js's FIFO loop across a kill at killedAt:
// sends were acknowledged after it, every acknowledged message is stored
// once, and each group's messages are in one queue in send order.
func checkFIFOLoop(t *testing.T, g *group, topic string, res nodeResult, stderr string, killedAt int64) {
	t.Helper()
	after := 0
	for _, s := range res.Loop {
		if s.At > killedAt {
			after++
		}
	}
	if len(res.Loop) < 20 || after == 0 {
		t.Fatalf("%d sends acknowledged, %d after the kill:\n%s", len(res.Loop), after, stderr)
	}
	byBody := map[string][]stored{}
	var all []stored
	err := poll(30*time.Second, func() bool {
		all = consumeAll(t, g, topic)
		return len(all) >= len(res.Loop)
	})
	if err != nil {
		t.Fatalf("%d stored, %d acknowledged", len(all), len(res.Loop))
	}
	for _, s := range all {
		byBody[s.body] = append(byBody[s.body], s)
	}
	groups := map[string][]stored{}
	for _, s := range res.Loop {
		got := byBody[s.Body]
		if len(got) != 1 {
			t.Errorf("%s acknowledged, stored %d times", s.Body, len(got))
			continue
		}
		groups[s.Group] = append(groups[s.Group], got[0])
	}
	for name, ms := range groups {
		for i := 1; i < len(ms); i++ {
			if ms[i].queue != ms[0].queue || ms[i].offset <= ms[i-1].offset {
				t.Errorf("message group %s: %s (queue %d offset %d) after %s (queue %d offset %d)", name, ms[i].body, ms[i].queue, ms[i].offset,
					ms[i-1].body, ms[i-1].queue, ms[i-1].offset)
			}
		}
	}
}

// TestNodeFIFOAfterFollowerKill: with a follower killed (SIGKILL), the
// route a Node.js producer gets leaves it out, so none of its FIFO message
// groups is pinned to the dead node: sends of six groups for 5 s all go
// through, each group's in one queue in send order. Once the node is back
// the route names it again and a new producer's groups pinned to it (the
// client takes queue 0 of each broker; groups lg-4 and lg-5 hash to the
// second broker, the lower id follower, which is the one killed) send
// through it. The rocketmq-client-nodejs 1.0.8 producer builds its
// publishing queues from its first route and never refreshes them, so a
// producer started before the kill keeps failing those groups.
func TestNodeFIFOAfterFollowerKill(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	topic := uniq("nodefifof")
	g.createTopic(t, topic, 4)
	var fol []int
	for id := 1; id <= 3; id++ {
		if id != leader {
			fol = append(fol, id)
		}
	}
	other, access := fol[0], g.nodes[fol[1]-1].grpc
	active := func() bool {
		out, err := g.cli("admin", "cluster", "list", "--json")
		if err != nil {
			return false
		}
		var v struct {
			Members []struct {
				ID     int  `json:"id"`
				Active bool `json:"active"`
			} `json:"members"`
		}
		if json.Unmarshal([]byte(out), &v) != nil {
			return false
		}
		for _, m := range v.Members {
			if m.ID == other {
				return m.Active
			}
		}
		return false
	}
	run := func(prefix string) nodeResult {
		t.Helper()
		res, stderr, err := runNode(t, dir, map[string]any{"endpoints": access, "topics": []string{topic}, "topic": topic, "prefix": prefix,
			"fifoForMs": 5000}, 60*time.Second)
		if err != nil {
			t.Fatalf("produce.js: %v\n%s", err, stderr)
		}
		groups := map[string]int{}
		for _, s := range res.Loop {
			groups[s.Group]++
		}
		if res.Failed != 0 || len(groups) != 6 {
			t.Fatalf("%d sends failed; acknowledged per group %v, want all six:\n%s", res.Failed, groups, stderr)
		}
		return res
	}
	g.kill(other)
	if err := poll(30*time.Second, func() bool { return !active() }); err != nil {
		t.Fatalf("the leader still lists node %d active", other)
	}
	res := run("d-")
	g.start(other)
	if err := poll(30*time.Second, active); err != nil {
		t.Fatalf("node %d not active again", other)
	}
	back := run("b-")
	res.Loop = append(res.Loop, back.Loop...)
	t.Logf("%d FIFO sends acknowledged with node %d dead, then back", len(res.Loop), other)
	checkFIFOLoop(t, g, topic, res, "", 0)
}

// TestNodeSimpleConsumer: Apache's RocketMQ 5 Node.js SimpleConsumer
// starts against the group (route, Telemetry settings), and `raftmq admin
// consumer connection` lists it with its subscription. Messages sent with
// raftmq's remoting producer (`raftmq produce`) to its topic are received
// over gRPC and acked, each once.
func TestNodeSimpleConsumer(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	topic, group := uniq("nodecons"), uniq("nodegroup")
	g.createTopic(t, topic, 4)
	b, _ := json.Marshal(map[string]any{"endpoints": g.nodes[leader-1].grpc, "group": group, "topic": topic, "want": 5, "forMs": 30000, "holdMs": 3000})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "consume.js", string(b))
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var conn string
	err := poll(20*time.Second, func() bool {
		conn, _ = g.cli("admin", "consumer", "connection", "-g", group)
		return strings.Contains(conn, "NODE_JS") && strings.Contains(conn, topic)
	})
	if err != nil {
		t.Errorf("admin consumer connection does not list the Node.js consumer:\n%s", conn)
	}
	// Its first receive has placed the group at the end of the queues (a
	// long poll of 3 s); send after it.
	time.Sleep(4 * time.Second)
	want := []string{"r1", "r2", "r3", "r4", "r5"}
	if out, err := g.cli(append([]string{"produce", "--topic", topic}, want...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume.js: %v\n%s", err, stderr.String())
	}
	var res struct {
		Started  bool     `json:"started"`
		Received int      `json:"received"`
		Acked    int      `json:"acked"`
		Bodies   []string `json:"bodies"`
		Error    string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("consume.js printed %q: %v", stdout.String(), err)
	}
	if !res.Started {
		t.Fatalf("the consumer did not start: %+v", res)
	}
	sort.Strings(res.Bodies)
	if res.Error != "" || strings.Join(res.Bodies, ",") != strings.Join(want, ",") || res.Acked != len(want) {
		t.Fatalf("received %v (%d acked, error %q), want each of %v once, acked", res.Bodies, res.Acked, res.Error, want)
	}
}

// TestNodePushConsumer: Apache's RocketMQ 5 Node.js PushConsumer (route,
// settings, QueryAssignment, receives with auto renew, acks) gets each of
// five messages sent with raftmq's remoting producer once.
func TestNodePushConsumer(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	topic, group := uniq("nodepush"), uniq("nodepushgroup")
	g.createTopic(t, topic, 4)
	b, _ := json.Marshal(map[string]any{"endpoints": g.nodes[leader%3].grpc, "group": group, "topic": topic, "want": 5, "forMs": 40000})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd, stdout, stderr := startNodePush(t, ctx, g, dir, group, b)
	want := []string{"q1", "q2", "q3", "q4", "q5"}
	if out, err := g.cli(append([]string{"produce", "--topic", topic}, want...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("push.js: %v\n%s", err, stderr.String())
	}
	var res struct {
		Bodies []string `json:"bodies"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("push.js printed %q: %v", stdout.String(), err)
	}
	sort.Strings(res.Bodies)
	if strings.Join(res.Bodies, ",") != strings.Join(want, ",") {
		t.Fatalf("consumed %v, want each of %v once", res.Bodies, want)
	}
}

// TestNodePushConsumerDeadLetter: Apache's RocketMQ 5 Node.js
// PushConsumer of an orderly group with retryMaxTimes 1 and a listener
// that always fails: each message is delivered twice (the client's own
// retry after the backoff), then the client forwards it to the
// dead-letter queue (ForwardMessageToDeadLetterQueue), where `raftmq admin
// dlq list` finds it once, with its origin topic, and it is not delivered
// again.
func TestNodePushConsumerDeadLetter(t *testing.T) {
	dir := nodeDir(t)
	g := startGroup(t)
	leader := g.waitLeader(30 * time.Second)
	topic, group := uniq("nodedlq"), uniq("nodedlqgroup")
	g.createTopic(t, topic, 2)
	if out, err := g.cli("admin", "group", "update", "-g", group, "--orderly", "--retry-max-times", "1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"d1", "d2"}
	// Two deliveries each, then 8 s in which a third (there must be none)
	// would show and the forwards are done.
	b, _ := json.Marshal(map[string]any{"endpoints": g.nodes[leader%3].grpc, "group": group, "topic": topic, "want": 2 * len(want),
		"forMs": 60000, "fail": true, "holdMs": 8000})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd, stdout, stderr := startNodePush(t, ctx, g, dir, group, b)
	if out, err := g.cli(append([]string{"produce", "--topic", topic}, want...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("push.js: %v\n%s", err, stderr.String())
	}
	var res struct {
		Attempts []struct {
			Body    string `json:"body"`
			Attempt int    `json:"attempt"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("push.js printed %q: %v", stdout.String(), err)
	}
	seen := map[string][]int{}
	for _, a := range res.Attempts {
		seen[a.Body] = append(seen[a.Body], a.Attempt)
	}
	for _, w := range want {
		if fmt.Sprint(seen[w]) != "[1 2]" {
			t.Errorf("%s delivered with attempts %v, want [1 2]", w, seen[w])
		}
	}
	if len(res.Attempts) != 2*len(want) {
		t.Errorf("deliveries %+v, want two of each of %v", res.Attempts, want)
	}
	var lines []string
	err := poll(15*time.Second, func() bool {
		out, err := g.cli("admin", "dlq", "list", "--group", group, "--json")
		if err != nil {
			return false
		}
		lines = nil
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(l, "{") {
				lines = append(lines, l)
			}
		}
		return len(lines) >= len(want)
	})
	if err != nil {
		t.Fatalf("dead letters of %s: %q, want %v", group, lines, want)
	}
	var bodies []string
	for _, l := range lines {
		var m struct {
			Body       string            `json:"body"`
			Properties map[string]string `json:"properties"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("dlq list line %q: %v", l, err)
		}
		if m.Properties["DLQ_ORIGIN_TOPIC"] != topic {
			t.Errorf("dead letter %q: origin topic %q, want %s", m.Body, m.Properties["DLQ_ORIGIN_TOPIC"], topic)
		}
		bodies = append(bodies, m.Body)
	}
	sort.Strings(bodies)
	if strings.Join(bodies, ",") != strings.Join(want, ",") {
		t.Fatalf("dead letters %v, want each of %v once", bodies, want)
	}
}

// startNodePush starts push.js with plan b and returns once its consumer
// of group is listed by the group and has polled: the consumer's first
// receive places the group at the end of the queues, so a test sends after.
func startNodePush(t *testing.T, ctx context.Context, g *group, dir, consumerGroup string, b []byte) (*exec.Cmd, *strings.Builder, *strings.Builder) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "push.js", string(b))
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var conn string
	if err := poll(20*time.Second, func() bool {
		conn, _ = g.cli("admin", "consumer", "connection", "-g", consumerGroup)
		return strings.Contains(conn, "NODE_JS")
	}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // its output is complete once it has exited
		t.Fatalf("the push consumer is not listed:\n%s\npush.js stderr:\n%s", conn, stderr.String())
	}
	time.Sleep(5 * time.Second)
	return cmd, &stdout, &stderr
}
