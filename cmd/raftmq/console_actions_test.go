package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/harness/localgroup"
	"github.com/raftmq/raftmq/offsets"
)

// submit fills the form matching form (fields: a selector inside the
// form, or a field's name, to a value; "check" ticks a checkbox or a
// radio button, "uncheck" clears one), presses its submit button as a
// user would, and returns the status of the page the browser lands on.
func (b *browser) submit(form string, fields map[string]string) int {
	b.t.Helper()
	if fields == nil {
		fields = map[string]string{}
	}
	js, _ := json.Marshal(fields)
	ok := evalJS[bool](b, fmt.Sprintf(`(() => {
		const f = document.querySelector(%q);
		if (!f) return false;
		for (const [k, v] of Object.entries(%s)) {
			const el = f.querySelector(k.match(/^[a-zA-Z]+$/) ? '[name="' + k + '"]' : k);
			if (!el) return false;
			if (v === 'check' || v === 'uncheck') el.checked = v === 'check'; else el.value = v;
		}
		return true;
	})()`, form, js))
	require.True(b.t, ok, "form %s with fields %v on %s", form, fields, evalJS[string](b, `location.href`))
	resp, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	require.NoError(b.t, err, "submit %s", form)
	require.NotNil(b.t, resp, "submit %s", form)
	return int(resp.Status)
}

// cliFails runs a command that must fail and returns its output.
func cliFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cli(t, args...)
	require.Error(t, err, "raftmq %v: %s", args, out)
	return out + err.Error()
}

// consoleActions drives each of the console's changes in the browser on
// a group without an ACL (every user is an admin there) and checks each
// effect with the CLI's --json: topic create, update, delete; a test
// send; group create, update, delete; offset reset to a time and to the
// end; a dead letter's resend; broker settings. Refused changes show
// their reason with an error status.
func consoleActions(t *testing.T, b *browser, all, group, orders string, dlqMsgID string) {
	// Pages with forms do not reload themselves (it would clear a form
	// being filled); the cluster page does.
	refreshes := func(path string) bool {
		require.Equal(t, http.StatusOK, b.open(path), path)
		return evalJS[int](b, `document.querySelectorAll('meta[http-equiv=refresh]').length`) == 1
	}
	require.True(t, refreshes("/console/"))
	for _, path := range []string{"/console/topics", "/console/topics/" + orders, "/console/groups", "/console/groups/" + group} {
		require.False(t, refreshes(path), path)
	}

	// Topics.
	const made = "console-made"
	require.Equal(t, http.StatusOK, b.open("/console/topics"))
	require.Equal(t, http.StatusOK, b.submit("#topic-form", map[string]string{"topic": made, "readQueues": "3", "writeQueues": "3", "perm": "6"}))
	require.Contains(t, b.text("#ok"), "Topic "+made+" created")
	require.Equal(t, "/console/topics/"+made, evalJS[string](b, `location.pathname`))
	var st cluster.AdminTopicStatus
	cliJSON(t, &st, "admin", "topic", "status", made, "--addr", all)
	require.Len(t, st.Queues, 3)
	require.Equal(t, int32(6), st.Perm)
	require.Equal(t, http.StatusOK, b.submit("#topic-form", map[string]string{"perm": "4"}))
	cliJSON(t, &st, "admin", "topic", "status", made, "--addr", all)
	require.Equal(t, int32(4), st.Perm, "updated to read-only")
	require.Equal(t, "", b.text("#error"))
	// A test send to a read-only topic is refused, and says so.
	status := b.submit("#send-form", map[string]string{"body": "refused"})
	require.NotEqual(t, http.StatusOK, status)
	require.Contains(t, b.text("#error"), "Test send to "+made+" failed")
	require.Equal(t, "", b.text("#ok"))
	// Bad input: a clear error, nothing changed.
	require.Equal(t, http.StatusOK, b.open("/console/topics/"+made))
	require.Equal(t, http.StatusBadRequest, b.submit("#topic-form", map[string]string{"readQueues": "x"}))
	require.Contains(t, b.text("#error"), "readQueues \"x\" is not a number")
	require.Equal(t, http.StatusOK, b.open("/console/topics/"+made))
	require.Equal(t, http.StatusOK, b.submit("#topic-delete", nil))
	require.Contains(t, b.text("#ok"), "Topic "+made+" deleted")
	require.Contains(t, cliFails(t, "admin", "topic", "status", made, "--addr", all), made)
	// Deleting it again: the page says it does not exist.
	require.Equal(t, http.StatusNotFound, b.open("/console/topics/"+made))

	// A test send, found by the CLI's message query.
	require.Equal(t, http.StatusOK, b.open("/console/topics/"+orders))
	require.Equal(t, http.StatusOK, b.submit("#send-form", map[string]string{"body": "console hello", "keys": "console-k", "tags": "t1"}))
	require.Contains(t, b.text("#ok"), "Sent: msgId ")
	sent := cliLines[cliMessage](t, "admin", "message", "query", "--topic", orders, "--key", "console-k", "--addr", all, "--json")
	require.Len(t, sent, 1)
	require.Equal(t, "console hello", sent[0].Body)
	require.Contains(t, b.text("#ok"), sent[0].MsgID)

	// Consumer groups.
	const g2 = "console-group"
	require.Equal(t, http.StatusOK, b.open("/console/groups"))
	require.Equal(t, http.StatusOK, b.submit("#group-form", map[string]string{"group": g2, "retryMaxTimes": "5", "consumeBroadcastEnable": "check"}))
	require.Contains(t, b.text("#ok"), "Consumer group "+g2+" created")
	var gc offsets.SubscriptionGroupConfig
	cliJSON(t, &gc, "admin", "consumer", "config", "-g", g2, "--addr", all)
	require.Equal(t, int32(5), gc.RetryMaxTimes)
	require.True(t, gc.ConsumeBroadcastEnable)
	require.True(t, gc.ConsumeEnable)
	require.Equal(t, http.StatusOK, b.open("/console/groups/"+g2))
	require.Equal(t, http.StatusOK, b.submit("#group-form", map[string]string{"retryMaxTimes": "7", "consumeEnable": "uncheck"}))
	cliJSON(t, &gc, "admin", "consumer", "config", "-g", g2, "--addr", all)
	require.Equal(t, int32(7), gc.RetryMaxTimes)
	require.False(t, gc.ConsumeEnable)
	require.True(t, gc.ConsumeBroadcastEnable, "kept")
	require.Equal(t, http.StatusBadRequest, b.submit("#group-form", map[string]string{"retryMaxTimes": "-3"}))
	require.NotEmpty(t, b.text("#error"))
	cliJSON(t, &gc, "admin", "consumer", "config", "-g", g2, "--addr", all)
	require.Equal(t, int32(7), gc.RetryMaxTimes, "unchanged by the refused update")
	require.Equal(t, http.StatusOK, b.open("/console/groups/"+g2))
	require.Equal(t, http.StatusOK, b.submit("#group-delete", nil))
	require.Contains(t, b.text("#ok"), "Consumer group "+g2+" deleted")
	require.Contains(t, cliFails(t, "admin", "consumer", "config", "-g", g2, "--addr", all), "no subscription group config")

	// Offset reset: to a time before every order (each queue's start),
	// then to the end (the backlog skipped).
	progress := func() cluster.AdminConsumerProgress {
		var pr cluster.AdminConsumerProgress
		cliJSON(t, &pr, "admin", "consumer", "progress", "-g", group, "-t", orders, "--addr", all)
		return pr
	}
	require.Equal(t, http.StatusOK, b.open("/console/groups/"+group))
	require.Equal(t, http.StatusOK, b.submit("#reset-form", map[string]string{"topic": orders,
		"time": time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05")}))
	require.Contains(t, b.text("#ok"), "Offsets of "+group+" in "+orders+" reset to ")
	pr := progress()
	require.NotEmpty(t, pr.Queues)
	for _, q := range pr.Queues {
		require.Zero(t, q.ConsumerOffset, "queue %d back to its start", q.QueueID)
		require.Equal(t, q.BrokerOffset, q.Lag)
	}
	require.Equal(t, http.StatusOK, b.submit("#reset-form", map[string]string{"topic": orders, `[name=to][value=end]`: "check"}))
	require.Contains(t, b.text("#ok"), "the end of each queue")
	pr = progress()
	for _, q := range pr.Queues {
		require.Equal(t, q.BrokerOffset, q.ConsumerOffset, "queue %d at its end", q.QueueID)
		require.Zero(t, q.Lag)
	}
	require.Equal(t, strconv.FormatInt(0, 10), b.text(fmt.Sprintf(`#progress tr[data-q="%s/0"] [data-k=lag]`, orders)))
	// A time that does not parse: refused, offsets untouched.
	require.Equal(t, http.StatusBadRequest, b.submit("#reset-form", map[string]string{"topic": orders, `[name=to][value=time]`: "check", "time": "yesterday"}))
	require.Contains(t, b.text("#error"), `time "yesterday"`)
	require.Zero(t, progress().TotalLag)

	// A dead letter's resend: one more message in the group's retry topic.
	retryHeld := func() int64 {
		var st cluster.AdminTopicStatus
		cliJSON(t, &st, "admin", "topic", "status", "%RETRY%"+group, "--addr", all)
		var n int64
		for _, q := range st.Queues {
			n += q.MaxOffset
		}
		return n
	}
	before := retryHeld()
	require.Equal(t, http.StatusOK, b.open("/console/groups/"+group+"/dlq"))
	require.Equal(t, http.StatusOK, b.submit(fmt.Sprintf(`#dead-letters tr[data-msgid=%q] form.resend`, dlqMsgID), nil))
	require.Contains(t, b.text("#ok"), "Resent 1 dead letters to %RETRY%"+group+": "+dlqMsgID)
	require.Equal(t, before+1, retryHeld())

	// Broker settings: the page shows what getBrokerConfig says; a
	// group-wide change reaches every node through raft, a node's own
	// only the node chosen, and a bad value is refused.
	settings := func() map[string][]cluster.AdminSetting {
		var v map[string][]cluster.AdminSetting
		cliJSON(t, &v, "admin", "broker", "config", "get", "--addr", all)
		return v
	}
	value := func(set []cluster.AdminSetting, key string) string {
		for _, s := range set {
			if s.Key == key {
				return s.Value
			}
		}
		t.Fatalf("no setting %s in %v", key, set)
		return ""
	}
	cur := settings()
	require.Equal(t, http.StatusOK, b.open("/console/broker"))
	rows := b.rows("#settings tr[data-key]", "data-key")
	nodes := evalJS[[]string](b, `Array.from(document.querySelectorAll('#settings th code')).map(c => c.textContent)`)
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		require.Equal(t, value(cur[n], cluster.SettingAutoCreateTopic), rows[cluster.SettingAutoCreateTopic][fmt.Sprintf("node-%d", i)], n)
	}
	require.Equal(t, cluster.ScopeGroup, rows[cluster.SettingAutoCreateTopic]["scope"])
	flip := map[string]string{"true": "false", "false": "true"}[value(cur[nodes[0]], cluster.SettingAutoCreateTopic)]
	require.Equal(t, http.StatusOK, b.submit("#setting-form", map[string]string{"key": cluster.SettingAutoCreateTopic, "value": flip}))
	require.Contains(t, b.text("#ok"), "group-wide, through raft")
	require.Eventually(t, func() bool {
		v := settings()
		for _, n := range nodes {
			if value(v[n], cluster.SettingAutoCreateTopic) != flip {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "every node applies the change")
	require.Equal(t, http.StatusOK, b.submit("#setting-form", map[string]string{"key": cluster.SettingLogLevel, "value": "debug", "node": nodes[1]}))
	require.Contains(t, b.text("#ok"), "on "+nodes[1])
	cur = settings()
	require.Equal(t, "debug", strings.ToLower(value(cur[nodes[1]], cluster.SettingLogLevel)))
	require.NotEqual(t, "debug", strings.ToLower(value(cur[nodes[0]], cluster.SettingLogLevel)))
	require.Equal(t, http.StatusOK, b.open("/console/broker"))
	require.NotEqual(t, http.StatusOK, b.submit("#setting-form", map[string]string{"key": cluster.SettingBrokerPermission, "value": "5"}))
	require.Contains(t, b.text("#error"), "brokerPermission")
	require.Equal(t, "6", value(settings()[nodes[0]], cluster.SettingBrokerPermission))
}

// consoleSignIn drives the console of a group with an ACL in headless
// Chromium: the sign-in form, a non-admin account that sees no admin
// form and whose forged admin post is refused, signing out, and an admin
// managing ACL accounts, each change checked with the admin client (op,
// signed as the operator) and found in the audit log with the caller.
func consoleSignIn(t *testing.T, g *localgroup.Group, op *client.Client) {
	chrome := chromium()
	if chrome == "" {
		t.Log("no chromium: the console's sign-in is not driven in a browser")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	b := &browser{t: t, ctx: bctx, base: "http://" + g.Node(3).HTTP}

	// A page without a session lands on the sign-in form, then comes back.
	require.Equal(t, http.StatusOK, b.open("/console/topics"))
	require.Equal(t, "/console/login", evalJS[string](b, `location.pathname`))
	require.Equal(t, http.StatusUnauthorized, b.submit("#login", map[string]string{"accessKey": "reader1", "secretKey": "not-the-secret"}))
	require.Contains(t, b.text("#error"), "refused these keys")
	require.Equal(t, http.StatusOK, b.submit("#login", map[string]string{"accessKey": "reader1", "secretKey": "reader-secret"}))
	require.Equal(t, "/console/topics", evalJS[string](b, `location.pathname`))
	require.Equal(t, "reader1", b.text("#user"))
	require.Zero(t, evalJS[int](b, `document.querySelectorAll('#topic-form, a[href="/console/acl"]').length`), "no admin form for a reader")
	// A forged admin post with the session's own token: refused, nothing made.
	status := awaitJS[int](b, `(async () => {
		const fd = new URLSearchParams({topic: 'forged', csrf: document.querySelector('input[name=csrf]').value});
		return (await fetch('/console/topics', {method: 'POST', body: fd})).status;
	})()`)
	require.Equal(t, http.StatusForbidden, status)
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	_, err := admin.TopicStatus(tctx, op, "forged")
	require.True(t, admin.NotFound(err), "the forged topic does not exist: %v", err)
	// A post without the token (as another site's form would make): refused.
	status = awaitJS[int](b, `(async () => (await fetch('/console/groups/g/dlq/resend', {method: 'POST', body: new URLSearchParams({all: 'true'})})).status)()`)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, http.StatusForbidden, b.open("/console/acl"), "the ACL's accounts are the admins' to read")
	require.Equal(t, http.StatusOK, b.open("/console/"))
	require.Equal(t, http.StatusOK, b.submit("form[action='/console/logout']", nil))
	require.Equal(t, "/console/login", evalJS[string](b, `location.pathname`))

	// An admin: the ACL's accounts, without secrets; one created, then deleted.
	require.Equal(t, http.StatusOK, b.submit("#login", map[string]string{"accessKey": "operator", "secretKey": "operator-secret"}))
	require.Equal(t, "operator (admin)", b.text("#user"))
	require.Equal(t, http.StatusOK, b.open("/console/acl"))
	accounts := b.rows("#accounts tr[data-account]", "data-account")
	require.Equal(t, "true", accounts["operator"]["admin"])
	require.Equal(t, "SUB", accounts["reader1"]["default-topic"])
	require.NotContains(t, evalJS[string](b, `document.documentElement.outerHTML`), "reader-secret")
	require.Equal(t, http.StatusOK, b.submit("#account-form", map[string]string{"accessKey": "console-user", "secretKey": "console-user-secret",
		"defaultTopicPerm": "PUB|SUB", "topicPerms": "guarded=SUB"}))
	require.Contains(t, b.text("#ok"), "Account console-user created")
	v, err := admin.ACL(tctx, op)
	require.NoError(t, err)
	i := slices.IndexFunc(v.Accounts, func(a cluster.AdminAccount) bool { return a.AccessKey == "console-user" })
	require.GreaterOrEqual(t, i, 0, "the new account in %+v", v.Accounts)
	require.False(t, v.Accounts[i].Admin)
	require.Equal(t, "PUB|SUB", v.Accounts[i].DefaultTopicPerm.String())
	nu, err := client.New(client.Options{Addrs: g.Addrs(), AccessKey: "console-user", SecretKey: "console-user-secret"})
	require.NoError(t, err)
	defer nu.Close()
	require.Eventually(t, func() bool {
		_, err := admin.TopicStatus(tctx, nu, "guarded")
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the new account's keys work")
	require.Equal(t, http.StatusOK, b.submit(`#accounts tr[data-account="console-user"] form.account-delete`, nil))
	require.Contains(t, b.text("#ok"), "Account console-user deleted")
	v, err = admin.ACL(tctx, op)
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(v.Accounts, func(a cluster.AdminAccount) bool { return a.AccessKey == "console-user" }))
	// Deleting one's own account is refused with the reason.
	require.Equal(t, http.StatusOK, b.open("/console/acl"))
	require.Equal(t, http.StatusBadRequest, b.submit(`#accounts tr[data-account="operator"] form.account-delete`, nil))
	require.Contains(t, b.text("#error"), "signed in with this account")

	// The changes are in the audit log of the node that made them (the
	// leader), with the caller's access key.
	require.Eventually(t, func() bool {
		n := 0
		for _, node := range g.Nodes {
			data, _ := os.ReadFile(node.LogPath)
			for _, l := range strings.Split(string(data), "\n") {
				if strings.Contains(l, "access control changed") && strings.Contains(l, "console-user") && strings.Contains(l, "access_key=operator") {
					n++
				}
			}
		}
		return n == 2
	}, 5*time.Second, 100*time.Millisecond, "the account's creation and deletion, audited with the caller")
}

// awaitJS runs a script returning a promise and returns its value.
func awaitJS[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, "evaluate %s", js)
	return v
}
