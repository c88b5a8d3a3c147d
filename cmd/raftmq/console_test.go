package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/jepsen/history"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// chromium finds a Chromium (or Chrome) binary: $RAFTMQ_CHROMIUM, then
// the usual names on PATH.
func chromium() string {
	if p := os.Getenv("RAFTMQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser drives one headless Chromium tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// open loads a console page and returns its HTTP status.
func (b *browser) open(path string) int {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, chromedp.Navigate(b.base+path))
	require.NoError(b.t, err, "open %s", path)
	require.NotNil(b.t, resp, "open %s", path)
	// Served offline: no script, no style sheet or image from anywhere.
	external := evalJS[int](b, `document.querySelectorAll('script, link[rel=stylesheet], img, iframe').length`)
	require.Zero(b.t, external, "%s loads external resources", path)
	return int(resp.Status)
}

// evalJS runs a script on the page and returns its value.
func evalJS[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	require.NoError(b.t, err, "evaluate %s", js)
	return v
}

// text is the text of the first element matching sel ("" if none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.trim()`, sel))
}

// rows maps each row matching sel by its attr to its cells' data-k texts.
func (b *browser) rows(sel, attr string) map[string]map[string]string {
	b.t.Helper()
	return evalJS[map[string]map[string]string](b, fmt.Sprintf(`Object.fromEntries(Array.from(document.querySelectorAll(%q)).map(r =>
		[r.getAttribute(%q), Object.fromEntries(Array.from(r.querySelectorAll('[data-k]')).map(c => [c.dataset.k, c.textContent.trim()]))]))`,
		sel, attr))
}

func num(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	require.NoError(t, err, "%q is not a number", s)
	return n
}

// cliLines runs a command printing one JSON object per line.
func cliLines[T any](t *testing.T, args ...string) []T {
	t.Helper()
	out, err := cli(t, args...)
	require.NoError(t, err, "raftmq %v: %s", args, out)
	var vs []T
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var v T
		require.NoError(t, json.Unmarshal([]byte(l), &v), "raftmq %v printed %q", args, l)
		vs = append(vs, v)
	}
	return vs
}

func memberOf(t *testing.T, c cluster.AdminCluster, id uint64) cluster.AdminMember {
	t.Helper()
	for _, m := range c.Members {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("member %d not in %+v", id, c)
	return cluster.AdminMember{}
}

type cliMessage struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
	Body        string `json:"body"`
}

// TestConsoleInBrowser starts three broker processes, gives them two
// topics, a consumer group that consumed part of one and has an online
// member, and a dead letter, then drives headless Chromium through every
// console page of one node and checks each figure against the admin CLI's
// --json answer for the same thing.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and a browser")
	}
	chrome := chromium()
	if chrome == "" {
		t.Skip("no chromium found (apt-get install chromium, or set RAFTMQ_CHROMIUM); .ci/run installs it")
	}
	// A runs directory with one chaos run for the chaos page.
	runs := t.TempDir()
	run := filepath.Join(runs, "run-1")
	require.NoError(t, os.MkdirAll(run, 0o755))
	meta, _ := json.Marshal(history.Meta{Workload: "queue", Nemesis: []string{"partition"}, Seed: 7, Started: time.Now().UTC().Format(time.RFC3339)})
	require.NoError(t, os.WriteFile(filepath.Join(run, history.RunFile), meta, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(run, history.ResultsFile), []byte(`{"valid":true}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(run, history.ReportFile), []byte(`<!DOCTYPE html><title>r</title><h1 id="report">chaos report of run-1</h1>`), 0o644))

	g, _ := startProcesses(t, "--console-runs", runs)
	all := strings.Join(g.Addrs(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const orders, audit, group = "orders", "audit", "billing"
	for _, tq := range []struct {
		topic  string
		queues string
	}{{orders, "2"}, {audit, "1"}} {
		out, err := cli(t, "admin", "topic", "update", tq.topic, "--queues", tq.queues, "--addr", all)
		require.NoError(t, err, out)
	}
	cl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer cl.Close()
	p := cl.NewProducer(client.ProducerOptions{Group: "console-producer"})
	var first client.SendResult
	for i := range 10 {
		r, err := p.Send(ctx, &client.Message{Topic: orders, QueueID: int32(i % 2), Body: []byte(fmt.Sprintf("order %d", i)), Keys: []string{fmt.Sprintf("order-k%d", i)}})
		require.NoError(t, err)
		if i == 0 {
			first = r
		}
	}
	auditFrom := time.Now().Add(-time.Second)
	for i := range 3 {
		_, err := p.Send(ctx, &client.Message{Topic: audit, Body: []byte(fmt.Sprintf("audit %d", i))})
		require.NoError(t, err)
	}

	// The group consumed part of orders: 3 of queue 0's 5, 1 of queue 1's 5.
	pc := cl.NewPullConsumer(group)
	require.NoError(t, pc.CommitOffset(ctx, orders, 0, 3))
	require.NoError(t, pc.CommitOffset(ctx, orders, 1, 1))
	// An online member: a push consumer of audit, which consumes all of it.
	pcl, err := client.New(client.Options{Addrs: g.Addrs()})
	require.NoError(t, err)
	defer pcl.Close()
	push, err := pcl.NewPushConsumer(client.PushConsumerOptions{Group: group, Subscriptions: map[string]client.Subscription{audit: {Expression: "*"}},
		ConsumeFrom: client.ConsumeFromFirstOffset, PersistInterval: 100 * time.Millisecond},
		func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	require.NoError(t, err)
	require.NoError(t, push.Start(ctx))
	defer push.Shutdown(context.Background())
	// A dead letter: the first order, sent back straight to the DLQ.
	firstExt, err := cl.ViewMessage(ctx, first.OffsetMsgID)
	require.NoError(t, err)
	h := remoting.ConsumerSendMsgBackRequestHeader{Offset: firstExt.CommitLogOffset, Group: group, DelayLevel: -1, OriginMsgID: first.MsgID, OriginTopic: orders}
	resp, err := cl.Invoke(ctx, g.Addrs()[0], remoting.NewRequest(remoting.ConsumerSendMsgBack, h.Encode(), nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// Wait until the member is registered and has committed audit's end,
	// so that nothing moves while the pages are compared with the CLI.
	var conn cluster.AdminConsumerConnection
	require.Eventually(t, func() bool {
		out, err := cli(t, "admin", "consumer", "connection", "-g", group, "--addr", all, "--json")
		return err == nil && json.Unmarshal([]byte(out), &conn) == nil && len(conn.Clients) == 1
	}, 20*time.Second, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		var pr cluster.AdminConsumerProgress
		out, err := cli(t, "admin", "consumer", "progress", "-g", group, "-t", audit, "--addr", all, "--json")
		return err == nil && json.Unmarshal([]byte(out), &pr) == nil && len(pr.Queues) == 1 && pr.Queues[0].ConsumerOffset == 3
	}, 20*time.Second, 100*time.Millisecond, "the push consumer commits audit's 3 messages")

	// The browser, on node 2's console.
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	b := &browser{t: t, ctx: bctx, base: "http://" + g.Node(2).HTTP}

	// / redirects to the cluster page.
	require.Equal(t, http.StatusOK, b.open("/"))
	require.Equal(t, "/console/", evalJS[string](b, `location.pathname`))
	var before, after cluster.AdminCluster
	cliJSON(t, &before, "admin", "cluster", "list", "--addr", all)
	require.Equal(t, http.StatusOK, b.open("/console/"))
	members := b.rows("#members tr[id]", "id")
	cliJSON(t, &after, "admin", "cluster", "list", "--addr", all)
	require.Equal(t, strconv.FormatUint(after.Leader, 10), b.text("#leader"))
	require.Equal(t, strconv.FormatUint(after.Term, 10), b.text("#term"))
	require.Len(t, members, len(after.Members))
	for _, m := range after.Members {
		row := members[fmt.Sprintf("member-%d", m.ID)]
		require.NotNil(t, row, "member %d on the page", m.ID)
		require.Equal(t, strings.TrimPrefix(m.Role, "State"), row["role"], "member %d", m.ID)
		require.Equal(t, strconv.FormatUint(m.Term, 10), row["term"])
		// Indexes only grow: the page's are between the CLI's answers
		// before and after it.
		bm := memberOf(t, before, m.ID)
		require.GreaterOrEqual(t, uint64(num(t, row["commit"])), bm.Commit, "member %d", m.ID)
		require.LessOrEqual(t, uint64(num(t, row["commit"])), m.Commit, "member %d", m.ID)
		require.GreaterOrEqual(t, uint64(num(t, row["applied"])), bm.Applied, "member %d", m.ID)
		require.LessOrEqual(t, uint64(num(t, row["applied"])), m.Applied, "member %d", m.ID)
		require.Contains(t, row["disk-used"], "%")
		require.NotEmpty(t, row["disk-free"])
	}

	// Topics: messages held and max offsets of each, as topic status says.
	require.Equal(t, http.StatusOK, b.open("/console/topics"))
	topics := b.rows("#topics tr[data-topic]", "data-topic")
	for _, topic := range []string{orders, audit} {
		var st cluster.AdminTopicStatus
		cliJSON(t, &st, "admin", "topic", "status", topic, "--addr", all)
		var held, maxSum int64
		for _, q := range st.Queues {
			held += q.MaxOffset - q.MinOffset
			maxSum += q.MaxOffset
		}
		require.Equal(t, strconv.FormatInt(held, 10), topics[topic]["held"], topic)
		require.Equal(t, strconv.FormatInt(maxSum, 10), topics[topic]["max"], topic)

		require.Equal(t, http.StatusOK, b.open("/console/topics/"+topic))
		queues := b.rows("#queues tr[id]", "id")
		require.Len(t, queues, len(st.Queues), topic)
		for _, q := range st.Queues {
			row := queues[fmt.Sprintf("q-%d", q.QueueID)]
			require.Equal(t, strconv.FormatInt(q.MinOffset, 10), row["min"], "%s queue %d", topic, q.QueueID)
			require.Equal(t, strconv.FormatInt(q.MaxOffset, 10), row["max"], "%s queue %d", topic, q.QueueID)
		}
	}
	require.Equal(t, "13", strconv.FormatInt(num(t, topics[orders]["held"])+num(t, topics[audit]["held"]), 10))

	// Consumer groups: the group's total lag and members, then its page:
	// lag per queue, members, and the lag plot once sampled twice.
	var pr cluster.AdminConsumerProgress
	cliJSON(t, &pr, "admin", "consumer", "progress", "-g", group, "--addr", all)
	require.Equal(t, http.StatusOK, b.open("/console/groups"))
	groups := b.rows("#groups tr[data-group]", "data-group")
	require.Equal(t, strconv.FormatInt(pr.TotalLag, 10), groups[group]["lag"])
	require.Equal(t, "1", groups[group]["clients"])

	require.Equal(t, http.StatusOK, b.open("/console/groups/"+group))
	require.Equal(t, strconv.FormatInt(pr.TotalLag, 10), b.text("#total-lag"))
	progress := b.rows("#progress tr[data-q]", "data-q")
	require.Len(t, progress, len(pr.Queues))
	ordersLag := int64(0)
	for _, q := range pr.Queues {
		row := progress[fmt.Sprintf("%s/%d", q.Topic, q.QueueID)]
		require.NotNil(t, row, "%s/%d on the page", q.Topic, q.QueueID)
		require.Equal(t, strconv.FormatInt(q.Lag, 10), row["lag"], "%s/%d", q.Topic, q.QueueID)
		require.Equal(t, strconv.FormatInt(q.BrokerOffset, 10), row["broker"], "%s/%d", q.Topic, q.QueueID)
		if q.Topic == orders {
			ordersLag += q.Lag
			require.Equal(t, strconv.FormatInt(q.ConsumerOffset, 10), row["consumer"])
		}
	}
	require.Equal(t, int64(2+4), ordersLag, "the group consumed 3 of queue 0's 5 orders and 1 of queue 1's 5")
	require.Equal(t, "0", progress[audit+"/0"]["lag"], "the member consumed all of audit")
	require.Equal(t, conn.Clients[0].ClientID, b.text("#clients [data-k=client-id]"))
	require.Equal(t, "1", b.text("#dlq-count"))
	// The lag plot, once the console has two samples a second apart.
	require.Eventually(t, func() bool {
		time.Sleep(500 * time.Millisecond)
		return b.open("/console/groups/"+group) == http.StatusOK &&
			evalJS[int](b, `document.querySelectorAll('#lag-plot svg').length`) == 1
	}, 15*time.Second, 10*time.Millisecond, "the lag-over-time plot")

	// The DLQ page lists what admin dlq list does.
	dead := cliLines[cliMessage](t, "admin", "dlq", "list", "--group", group, "--addr", all, "--json")
	require.Len(t, dead, 1)
	require.Equal(t, http.StatusOK, b.open("/console/groups/"+group+"/dlq"))
	require.Equal(t, "1", b.text("#dlq-count"))
	dlqIDs := evalJS[[]string](b, `Array.from(document.querySelectorAll('#dead-letters tr[data-msgid]')).map(r => r.dataset.msgid)`)
	require.Equal(t, []string{dead[0].MsgID}, dlqIDs)
	require.Equal(t, "order 0", b.text("#dead-letters [data-k=body]"))

	// Message search by key, msgId and offsetMsgId finds what message
	// query does; by time, the three audit messages.
	byKey := cliLines[cliMessage](t, "admin", "message", "query", "--topic", orders, "--key", "order-k3", "--addr", all, "--json")
	require.Len(t, byKey, 1)
	m := byKey[0]
	for _, q := range []string{"topic=orders&key=order-k3", "topic=orders&uniq=" + m.MsgID, "id=" + m.OffsetMsgID} {
		require.Equal(t, http.StatusOK, b.open("/console/messages?"+q), q)
		require.Equal(t, "1 found", b.text("#found"), q)
		found := b.rows("#results tr[data-msgid]", "data-msgid")
		require.Contains(t, found, m.MsgID, q)
		require.Equal(t, strconv.FormatInt(m.QueueOffset, 10), found[m.MsgID]["offset"], q)
		require.Equal(t, m.Body, found[m.MsgID]["body"], q)
	}
	require.Equal(t, http.StatusOK, b.open("/console/messages?topic=audit&begin="+auditFrom.UTC().Format("2006-01-02T15:04:05")))
	require.Equal(t, "3 found", b.text("#found"))
	require.Equal(t, http.StatusOK, b.open("/console/message?id="+m.OffsetMsgID))
	require.Equal(t, m.Body, b.text("#body"))

	// Unknown topic, group and message: a clear error and 404.
	for path, want := range map[string]string{
		"/console/topics/nope":                                           "Unknown topic",
		"/console/groups/nope":                                           "Unknown consumer group",
		"/console/groups/nope/dlq":                                       "Unknown consumer group",
		"/console/messages?topic=nope&key=x":                             "Unknown topic",
		"/console/message?id=" + m.OffsetMsgID[:16] + "00000000FFFFFFF0": "",
	} {
		require.Equal(t, http.StatusNotFound, b.open(path), path)
		require.Contains(t, b.text("#error"), want, path)
	}

	// Chaos reports: in the lab corner, not the main menu: the runs
	// directory's index, and a run's report.html.
	require.Zero(t, evalJS[int](b, `Array.from(document.querySelectorAll('header a')).filter(a => a.textContent.includes('Chaos')).length`))
	require.Equal(t, http.StatusOK, b.open("/console/lab/"))
	_, err = chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS("#chaos-link")))
	require.NoError(t, err)
	require.Equal(t, "/console/lab/chaos/", evalJS[string](b, `location.pathname`))
	require.Contains(t, b.text("#runs"), "run-1")
	require.Equal(t, http.StatusOK, b.open("/console/lab/chaos/runs/run-1/"))
	require.Equal(t, "chaos report of run-1", b.text("#report"))

	// A message rate from the console's own samples: ten more orders
	// between two views of the topic, a second apart.
	require.Equal(t, http.StatusOK, b.open("/console/topics/"+orders))
	for i := range 10 {
		_, err := p.Send(ctx, &client.Message{Topic: orders, Body: []byte(fmt.Sprintf("late order %d", i))})
		require.NoError(t, err)
	}
	var rate float64
	require.Eventually(t, func() bool {
		time.Sleep(500 * time.Millisecond)
		if b.open("/console/topics/"+orders) != http.StatusOK {
			return false
		}
		r, err := strconv.ParseFloat(b.text("#rate"), 64)
		rate = r
		return err == nil && r > 0
	}, 15*time.Second, 10*time.Millisecond, "a message rate on the topic's page")
	require.Positive(t, rate)
	require.Equal(t, 1, evalJS[int](b, `document.querySelectorAll('#rate-plot svg').length`), "the message-rate plot")
	// Its time axis is wall-clock time (UTC), as the page's clock.
	require.Contains(t, b.text("#rate-plot"), "time (UTC)")
	require.Contains(t, b.text("#rate-plot"), time.Now().UTC().Format("15:04")[:4])

	consoleActions(t, b, all, group, orders, dead[0].MsgID)
}

const consoleACL = `
accounts:
  - accessKey: operator
    secretKey: operator-secret
    admin: true
  - accessKey: reader1
    secretKey: reader-secret
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`

// With --acl-file the console asks for basic authentication, signs its
// requests with the account given, and asks again for keys the group
// refuses.
func TestConsoleACL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(aclFile, []byte(consoleACL), 0o644))
	keyFile := filepath.Join(t.TempDir(), "acl.key")
	require.NoError(t, os.WriteFile(keyFile, acl.EncodeKey(acl.NewKey()), 0o600))
	g, _ := startProcesses(t, "--acl-file", aclFile, "--acl-key-file", keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.New(client.Options{Addrs: g.Addrs(), AccessKey: "operator", SecretKey: "operator-secret"})
	require.NoError(t, err)
	defer cl.Close()
	require.Eventually(t, func() bool {
		return cl.UpdateTopic(ctx, client.TopicConfig{Topic: "guarded", ReadQueues: 1, WriteQueues: 1}) == nil
	}, 10*time.Second, 100*time.Millisecond, "the group takes the file's ACL")

	get := func(path, user, pass string) (int, string, http.Header) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.Node(1).HTTP+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		_, err = io.Copy(&b, resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b.String(), resp.Header
	}
	code, body, _ := get("/console/topics", "", "")
	require.Equal(t, http.StatusOK, code, "no credentials: the sign-in page")
	require.Contains(t, body, `id="login"`)
	// The node's /status and /metrics need credentials too: the keys, or
	// the --http-token-file token localgroup gave the group.
	for _, path := range []string{"/status", "/metrics"} {
		code, _, _ = get(path, "", "")
		require.Equal(t, http.StatusUnauthorized, code, "%s without credentials", path)
		code, _, _ = get(path, "reader1", "reader-secret")
		require.Equal(t, http.StatusOK, code, "%s with an account's keys", path)
	}
	st, err := g.Status(1)
	require.NoError(t, err, "/status with the token")
	require.NotZero(t, st.Status.Term)
	code, body, h := get("/console/topics", "operator", "wrong")
	require.Equal(t, http.StatusUnauthorized, code, "a wrong secret key: %s", body)
	require.Contains(t, h.Get("WWW-Authenticate"), "Basic")
	require.Contains(t, body, "Check signature failed")
	code, body, _ = get("/console/topics/guarded", "operator", "operator-secret")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="queues"`)
	// Another account's keys work too: each user's requests are signed
	// with their own.
	code, body, _ = get("/console/topics/guarded", "reader1", "reader-secret")
	require.Equal(t, http.StatusOK, code, body)
	code, body, _ = get("/console/topics/guarded", "reader1", "operator-secret")
	require.Equal(t, http.StatusUnauthorized, code, body)

	consoleSignIn(t, g, cl)
}
