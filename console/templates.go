package console

import (
	"bytes"

	"fmt"
	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
	"html/template"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// layout is every page's frame: title, navigation, the error if any, and
// the page's body. Styles are inline; nothing is loaded from elsewhere.
const layout = `{{define "layout"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>{{.Title}} · raftmq console</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f3b57;color:#fff;padding:.6em 1.5em;display:flex;gap:1.5em;align-items:baseline;flex-wrap:wrap}
header b{font-size:1.15em}header a{color:#cfe3f7;text-decoration:none}header a.on{color:#fff;font-weight:bold;border-bottom:2px solid #fff}
main{padding:1em 1.5em;max-width:90em}
table{border-collapse:collapse;margin:.5em 0 1.2em;background:#fff}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef2f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.err{background:#fde8e8;border:1px solid #e0a0a0;padding:.6em 1em;margin:.5em 0}
.ok{background:#e6f4e6;border:1px solid #9c9;padding:.6em 1em;margin:.5em 0}
header a.lab{font-size:.8em;color:#9fb8d0}form.inline{display:inline;margin:0}
form.act{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:end;background:#fff;border:1px solid #ddd;padding:.8em;margin:.5em 0 1em}
form.act label{display:flex;flex-direction:column;font-size:.9em}form.act label.cb{flex-direction:row;gap:.3em;align-items:center}
button.danger{color:#b00}
.note{color:#666}.bad{color:#b00}.good{color:#070}
form.search{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:end;background:#fff;border:1px solid #ddd;padding:.8em}
form.search label{display:flex;flex-direction:column;font-size:.9em}
code,pre{font-family:ui-monospace,monospace;font-size:.92em}pre{white-space:pre-wrap;word-break:break-all;margin:0}
svg{max-width:100%;height:auto;background:#fff}
</style></head><body>
<header><b>raftmq</b>
<a href="/console/" {{if eq .Nav "cluster"}}class="on"{{end}}>Cluster</a>
<a href="/console/topics" {{if eq .Nav "topics"}}class="on"{{end}}>Topics</a>
<a href="/console/groups" {{if eq .Nav "groups"}}class="on"{{end}}>Consumer groups</a>
<a href="/console/messages" {{if eq .Nav "messages"}}class="on"{{end}}>Message search</a>
<a href="/console/broker" {{if eq .Nav "broker"}}class="on"{{end}}>Broker settings</a>
{{if and .SignIn .Admin}}<a href="/console/acl" {{if eq .Nav "acl"}}class="on"{{end}}>ACL accounts</a>{{end}}
<span class="note" style="color:#9fb8d0;margin-left:auto">{{.Now}} UTC</span>
{{if .User}}<span class="note" style="color:#9fb8d0" id="user">{{.User}}{{if .Admin}} (admin){{end}}</span>
<form class="inline" method="post" action="/console/logout">{{csrf}}<button type="submit" id="sign-out">Sign out</button></form>{{end}}
<a href="/console/lab/" class="lab{{if eq .Nav "lab"}} on{{end}}" title="tools for testing raftmq itself">lab</a></header>
<main><h1>{{.Title}}</h1>
{{if .OK}}<div class="ok" id="ok">{{.OK}}</div>{{end}}
{{if .Err}}<div class="err" id="error">{{.Err}}</div>{{end}}
{{if .Back}}<p><a href="{{.Back}}" id="back">Back</a></p>{{end}}
{{if .Data}}{{template "body" .Data}}{{end}}
</main></body></html>{{end}}`

const clusterPage = `{{define "body"}}
{{if .HasGroup}}<p>Cluster <b>{{.Group.Cluster}}</b>, broker <b>{{.Group.Broker}}</b>:
leader <b id="leader">{{.Group.Leader}}</b>, term <b id="term">{{.Group.Term}}</b>,
commit index <b id="commit">{{.Group.Commit}}</b>, last index {{.Group.LastIndex}}.</p>{{end}}
<table id="members"><tr><th>id</th><th>client address</th><th>raft address</th><th>role</th><th>term</th><th>commit</th><th>applied</th>
<th>match</th><th>behind (entries)</th><th>behind (bytes)</th><th>active</th><th>disk used</th><th>disk free</th><th>log</th></tr>
{{range .Members}}<tr id="member-{{.ID}}">
<td class="n">{{.ID}}</td><td><code>{{.Client}}</code></td><td><code>{{.Raft}}</code></td>
<td data-k="role">{{.RoleName}}{{if .Error}} <span class="bad">unreachable: {{.Error}}</span>{{end}}</td>
<td class="n" data-k="term">{{.Term}}</td><td class="n" data-k="commit">{{.Commit}}</td><td class="n" data-k="applied">{{.Applied}}</td>
<td class="n" data-k="match">{{.Match}}</td><td class="n" data-k="lag-entries">{{.LagEntries}}</td><td class="n" data-k="lag-bytes">{{.LagBytes}}</td>
<td>{{if .Active}}yes{{else}}<span class="bad">no</span>{{end}}</td>
{{if .Disk}}<td class="n" data-k="disk-used">{{pct .Disk.DiskUsed}}{{if .Disk.DiskFull}} <span class="bad">full</span>{{end}}</td>
<td class="n" data-k="disk-free">{{bytes .Disk.DiskFree}}</td><td class="n">{{bytes .Disk.LogBytes}} in {{.Disk.SegmentCount}} segments</td>
{{else}}<td colspan="3" class="note">{{.DiskErr}}</td>{{end}}
</tr>{{end}}</table>
<p class="note">Roles, terms and indexes are each member's own answer; "behind" is how much of the leader's log the leader knows a member lacks.</p>
{{end}}`

const topicsPage = `{{define "body"}}
<table id="topics"><tr><th>topic</th><th>queues (read/write)</th><th>perm</th><th>messages held</th><th>max offsets (sum)</th><th>last update</th><th>messages/s</th></tr>
{{range .Topics}}<tr data-topic="{{.Name}}">
<td><a href="/console/topics/{{pathEsc .Name}}">{{.Name}}</a>{{if .System}} <span class="note">(system)</span>{{end}}</td>
{{if .Err}}<td colspan="6" class="bad">{{.Err}}</td>{{else}}
<td class="n">{{.Status.ReadQueues}}/{{.Status.WriteQueues}}</td><td class="n">{{.Status.Perm}}</td>
<td class="n" data-k="held">{{.Held}}</td><td class="n" data-k="max">{{.Max}}</td><td>{{msTime .Last}}</td>
<td class="n" data-k="rate">{{rate .Rate .Over}}</td>{{end}}
</tr>{{end}}</table>
{{if .Truncated}}<p class="note">The first {{len .Topics}} of {{.Count}} topics.</p>{{end}}
<p class="note">Rates come from this console's own samples of the topics' offsets (every {{.Interval}} while a page shows them).</p>
{{if isAdmin}}<h2>Create a topic</h2>{{template "topicForm" newTopic}}{{end}}
{{end}}`

const topicForm = `{{define "topicForm"}}<form class="act" id="topic-form" method="post" action="/console/topics">{{csrf}}
{{if .Topic}}<input type="hidden" name="topic" value="{{.Topic}}">{{else}}<label>topic <input name="topic" required></label>{{end}}
<label>read queues <input name="readQueues" value="{{.ReadQueues}}" size="4"></label>
<label>write queues <input name="writeQueues" value="{{.WriteQueues}}" size="4"></label>
<label>perm <select name="perm">{{$p := .Perm}}{{range permChoices}}<option value="{{.V}}"{{if eq .V $p}} selected{{end}}>{{.K}}</option>{{end}}</select></label>
<label class="cb"><input type="checkbox" name="order"{{if .Order}} checked{{end}}> ordered</label>
<button type="submit">{{if .Topic}}Update{{else}}Create{{end}}</button></form>{{end}}`

const topicPage = `{{define "body"}}
<p>{{.Status.ReadQueues}} read / {{.Status.WriteQueues}} write queues, perm {{.Status.Perm}}, order {{.Status.Order}};
<span id="held">{{.Held}}</span> messages held; <span id="rate">{{rate .Rate .Over}}</span> messages/s.
<a href="/console/messages?topic={{.Status.Topic}}&amp;begin={{.Since}}">Messages of the last hour</a></p>
<table id="queues"><tr><th>queue</th><th>min offset</th><th>max offset</th><th>last update</th></tr>
{{range .Status.Queues}}<tr id="q-{{.QueueID}}"><td class="n">{{.QueueID}}</td><td class="n" data-k="min">{{.MinOffset}}</td>
<td class="n" data-k="max">{{.MaxOffset}}</td><td>{{msTime .LastUpdate}}</td></tr>{{end}}</table>
{{if .Plot}}<div id="rate-plot">{{.Plot}}</div>{{else}}<p class="note">The message-rate plot appears after two samples (every {{.Interval}}).</p>{{end}}
<h2>Test send</h2>
<form class="act" id="send-form" method="post" action="/console/topics/{{pathEsc .Name}}/send">{{csrf}}
<label>body <input name="body" size="40" required></label><label>keys (comma-separated) <input name="keys"></label>
<label>tags <input name="tags"></label><button type="submit">Send</button></form>
{{if isAdmin}}<h2>Update</h2>{{template "topicForm" .Status}}
<form class="act" id="topic-delete" method="post" action="/console/topics/{{pathEsc .Name}}/delete">{{csrf}}
<span>Delete the topic (its messages stay until retention removes them)</span><button type="submit" class="danger">Delete {{.Name}}</button></form>{{end}}
{{end}}`

const groupsPage = `{{define "body"}}
<table id="groups"><tr><th>group</th><th>online clients</th><th>topics</th><th>total lag</th><th>retry max</th><th>consume enabled</th></tr>
{{range .Groups}}<tr data-group="{{.Name}}"><td><a href="/console/groups/{{pathEsc .Name}}">{{.Name}}</a></td>
<td class="n" data-k="clients">{{.Clients}}</td><td>{{range $i, $t := .Topics}}{{if $i}}, {{end}}{{$t}}{{end}}</td>
<td class="n" data-k="lag">{{if .LagErr}}<span class="note">{{.LagErr}}</span>{{else}}{{.Lag}}{{end}}</td>
<td class="n">{{.Config.RetryMaxTimes}}</td><td>{{.Config.ConsumeEnable}}</td></tr>{{end}}</table>
{{if .Truncated}}<p class="note">The first {{len .Groups}} of {{.Count}} groups.</p>{{end}}
{{if isAdmin}}<h2>Create a consumer group</h2>{{template "groupForm" newGroup}}{{end}}
{{end}}`

const groupForm = `{{define "groupForm"}}<form class="act" id="group-form" method="post" action="/console/groups">{{csrf}}
{{if .GroupName}}<input type="hidden" name="group" value="{{.GroupName}}">{{else}}<label>group <input name="group" required></label>{{end}}
<label>retry queues <input name="retryQueueNums" value="{{.RetryQueueNums}}" size="4"></label>
<label>retry max times <input name="retryMaxTimes" value="{{.RetryMaxTimes}}" size="4"></label>
<label class="cb"><input type="checkbox" name="consumeEnable"{{if .ConsumeEnable}} checked{{end}}> consume enabled</label>
<label class="cb"><input type="checkbox" name="consumeBroadcastEnable"{{if .ConsumeBroadcastEnable}} checked{{end}}> broadcast enabled</label>
<label class="cb"><input type="checkbox" name="consumeMessageOrderly"{{if .ConsumeMessageOrderly}} checked{{end}}> orderly</label>
<label class="cb"><input type="checkbox" name="consumeFromMinEnable"{{if .ConsumeFromMinEnable}} checked{{end}}> consume from min</label>
<button type="submit">{{if .GroupName}}Update{{else}}Create{{end}}</button></form>{{end}}`

const groupPage = `{{define "body"}}
<p>Total lag <b id="total-lag">{{.Progress.TotalLag}}</b> messages over {{len .Progress.Queues}} queues.
{{if .Progress.TotalInFlight}}Popped and not acked yet: <b id="total-in-flight">{{.Progress.TotalInFlight}}</b>.{{end}}
<a href="/console/groups/{{pathEsc .Progress.Group}}/dlq">Dead letters</a>{{if .DLQ}}: <span id="dlq-count">{{.DLQ}}</span>{{end}}.</p>
<h2>Lag per queue</h2>
<table id="progress"><tr><th>topic</th><th>queue</th><th>broker offset</th><th>consumer offset</th><th>lag</th><th>last consumed</th>{{if .Progress.TotalInFlight}}<th>in flight (pop)</th>{{end}}</tr>
{{$pop := .Progress.TotalInFlight}}{{range .Progress.Queues}}<tr data-q="{{.Topic}}/{{.QueueID}}"><td>{{.Topic}}</td><td class="n">{{.QueueID}}</td>
<td class="n" data-k="broker">{{.BrokerOffset}}</td><td class="n" data-k="consumer">{{if .Committed}}{{.ConsumerOffset}}{{else}}-{{end}}</td>
<td class="n" data-k="lag">{{.Lag}}</td><td>{{msTime .LastConsume}}</td>{{if $pop}}<td class="n" data-k="inflight">{{.InFlight}}</td>{{end}}</tr>{{end}}</table>
{{if .Plot}}<div id="lag-plot">{{.Plot}}</div>{{else}}<p class="note">The lag-over-time plot appears after two samples (every {{.Interval}}).</p>{{end}}
<h2>Members</h2>
{{if .ConnErr}}<p class="note" id="members-none">{{.ConnErr}}</p>{{else}}
<table id="clients"><tr><th>client id</th><th>address</th><th>language</th><th>version</th><th>last heartbeat</th></tr>
{{range .Conn.Clients}}<tr><td data-k="client-id"><code>{{.ClientID}}</code></td><td><code>{{.Addr}}</code></td><td>{{.Language}}</td><td class="n">{{.Version}}</td><td>{{goTime .LastSeen}}</td></tr>{{end}}</table>
<table id="subscriptions"><tr><th>topic</th><th>expression</th><th>type</th></tr>
{{range .Conn.Subscriptions}}<tr><td>{{.Topic}}</td><td><code>{{.Expression}}</code></td><td>{{.ExpressionType}}</td></tr>{{end}}</table>
<p>{{.Conn.ConsumeType}}, {{.Conn.MessageModel}}, {{.Conn.ConsumeFromWhere}}</p>{{end}}
{{if isAdmin}}<h2>Reset offsets</h2>
<form class="act" id="reset-form" method="post" action="/console/groups/{{pathEsc .Progress.Group}}/reset">{{csrf}}
<label>topic <select name="topic">{{range .Progress.Topics}}<option>{{.}}</option>{{end}}</select></label>
<label class="cb"><input type="radio" name="to" value="time" checked> to the first message stored at or after</label>
<label>time (UTC) <input name="time" placeholder="2006-01-02T15:04:05" value="{{.Since}}"></label>
<label class="cb"><input type="radio" name="to" value="end"> to the end (skip the backlog)</label>
<button type="submit">Reset</button></form>
<h2>Subscription group config</h2>
{{if .Config}}{{template "groupForm" .Config}}{{else}}<p class="note">The group has no subscription group config.</p>{{template "groupForm" newGroupNamed .Progress.Group}}{{end}}
<form class="act" id="group-delete" method="post" action="/console/groups/{{pathEsc .Progress.Group}}/delete">{{csrf}}
<span>Delete the subscription group config (committed offsets stay)</span><button type="submit" class="danger">Delete {{.Progress.Group}}</button></form>{{end}}
{{end}}`

const messagesTable = `{{define "messages"}}<table id="results"><tr><th>topic</th><th>queue</th><th>offset</th><th>msgId (UNIQ_KEY)</th><th>offsetMsgId</th><th>keys</th><th>tags</th><th>stored</th><th>reconsumed</th><th>body</th></tr>
{{range .}}<tr data-msgid="{{.MsgID}}"><td>{{.Topic}}</td><td class="n">{{.QueueID}}</td><td class="n" data-k="offset">{{.QueueOffset}}</td>
<td><code>{{.MsgID}}</code></td><td><a href="/console/message?id={{.OffsetMsgID}}"><code>{{.OffsetMsgID}}</code></a></td>
<td>{{range $i, $k := .Keys}}{{if $i}} {{end}}{{$k}}{{end}}</td><td>{{.Tags}}</td><td>{{msTime .StoreTimestamp}}</td><td class="n">{{.ReconsumeTimes}}</td>
<td data-k="body"><pre>{{preview .Body}}</pre></td></tr>{{end}}</table>{{end}}`

const messagesPage = `{{define "body"}}
<form class="search" method="get" action="/console/messages">
<label>topic <input name="topic" value="{{.Q.Topic}}"></label>
<label>key (KEYS) <input name="key" value="{{.Q.Key}}"></label>
<label>msgId (UNIQ_KEY) <input name="uniq" value="{{.Q.Uniq}}" size="34"></label>
<label>offsetMsgId <input name="id" value="{{.Q.ID}}" size="34"></label>
<label>stored from (UTC) <input name="begin" value="{{.Begin}}" placeholder="2006-01-02T15:04:05"></label>
<label>until (UTC) <input name="end" value="{{.End}}" placeholder="now"></label>
<label>at most <input name="max" value="{{.Q.Max}}" size="4"></label>
<button type="submit">Search</button></form>
<p class="note">By offsetMsgId alone; or a topic with a key, a msgId, or (neither) a time range.</p>
{{if .Searched}}<p id="found">{{len .Messages}} found</p>{{template "messages" .Messages}}{{end}}
{{end}}`

const messagePage = `{{define "body"}}
<table id="message">
<tr><th>topic</th><td>{{.M.Topic}}</td></tr><tr><th>queue / offset</th><td>{{.M.QueueID}} / {{.M.QueueOffset}}</td></tr>
<tr><th>msgId (UNIQ_KEY)</th><td><code>{{.M.MsgID}}</code></td></tr><tr><th>offsetMsgId</th><td><code>{{.M.OffsetMsgID}}</code></td></tr>
<tr><th>commit-log offset</th><td>{{.M.CommitLogOffset}}</td></tr>
<tr><th>born</th><td>{{msTime .M.BornTimestamp}} at {{.M.BornHost}}</td></tr><tr><th>stored</th><td>{{msTime .M.StoreTimestamp}} at {{.M.StoreHost}}</td></tr>
<tr><th>reconsumed</th><td>{{.M.ReconsumeTimes}} times</td></tr></table>
<h2>Properties</h2>{{template "props" .Props}}
<h2>Body ({{len .M.Body}} bytes)</h2><pre id="body">{{body .M.Body}}</pre>
{{end}}`

const propsTable = `{{define "props"}}<table class="props">{{range .}}<tr><th>{{.K}}</th><td><code>{{.V}}</code></td></tr>{{end}}</table>{{end}}`

const dlqPage = `{{define "body"}}
<p>Topic <code>{{.Topic}}</code>: <b id="dlq-count">{{len .Messages}}</b> dead letters{{if .Truncated}} (the oldest {{len .Messages}}){{end}}, oldest first.
Resent ones go to the group's retry topic, to be consumed again.</p>
{{if .Messages}}<form class="act" id="resend-all" method="post" action="/console/groups/{{pathEsc .Group}}/dlq/resend">{{csrf}}
<input type="hidden" name="all" value="true"><button type="submit">Resend all</button></form>{{end}}
<table id="dead-letters"><tr><th>msgId</th><th>from topic</th><th>queue offset</th><th>stored</th><th>reconsumed</th><th>properties</th><th>body</th><th></th></tr>
{{range .Messages}}<tr data-msgid="{{.M.MsgID}}"><td><a href="/console/message?id={{.M.OffsetMsgID}}"><code>{{.M.MsgID}}</code></a></td>
<td>{{.Origin}}</td><td class="n">{{.M.QueueOffset}}</td><td>{{msTime .M.StoreTimestamp}}</td><td class="n">{{.M.ReconsumeTimes}}</td>
<td>{{template "props" .Props}}</td><td data-k="body"><pre>{{preview .M.Body}}</pre></td>
<td><form class="inline resend" method="post" action="/console/groups/{{pathEsc $.Group}}/dlq/resend">{{csrf}}<input type="hidden" name="msgId" value="{{.M.MsgID}}"><button type="submit">Resend</button></form></td></tr>{{end}}</table>
{{end}}`

const loginPage = `{{define "body"}}
<form class="act" id="login" method="post" action="/console/login"><input type="hidden" name="next" value="{{.Next}}">
<label>accessKey <input name="accessKey" value="{{.AccessKey}}" autocomplete="username" required></label>
<label>secretKey <input name="secretKey" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form>
<p class="note">This group has an ACL: sign in with one of its accounts. What you see and change is what the account may read and do;
changes need an admin account. Serve the HTTP port with TLS, or keep it on a trusted network: the keys cross it once.</p>
{{end}}`

const brokerPage = `{{define "body"}}
<table id="settings"><tr><th>setting</th><th>scope</th>{{range .Nodes}}<th><code>{{.Addr}}</code>{{if .Err}} <span class="bad">{{.Err}}</span>{{end}}</th>{{end}}</tr>
{{$nodes := .Nodes}}{{range .Keys}}{{$k := .Key}}<tr data-key="{{.Key}}"><td><code>{{.Key}}</code></td><td data-k="scope">{{.Scope}}</td>
{{range $i, $n := $nodes}}<td data-k="node-{{$i}}">{{index $n.Set $k}}</td>{{end}}</tr>{{end}}</table>
<p class="note">Scope <b>group</b>: changed at runtime for the whole group, through raft; <b>node</b>: changed at runtime on a node until it restarts;
<b>restart</b>: the node's flags or config file.</p>
{{if isAdmin}}<h2>Change a setting</h2>
<form class="act" id="setting-form" method="post" action="/console/broker">{{csrf}}
<label>setting <select name="key">{{range .Keys}}{{if ne .Scope "restart"}}<option>{{.Key}}</option>{{end}}{{end}}</select></label>
<label>value <input name="value" required></label>
<label>node (node-scope settings) <select name="node"><option value="">every node</option>{{range .Nodes}}<option>{{.Addr}}</option>{{end}}</select></label>
<button type="submit">Change</button></form>{{end}}
{{end}}`

const aclPage = `{{define "body"}}
{{if not .Enabled}}<p class="note" id="acl-off">The group enforces no ACL.</p>{{end}}
<table id="accounts"><tr><th>accessKey</th><th>admin</th><th>white remote address</th><th>default topic perm</th><th>default group perm</th><th>topic perms</th><th>group perms</th><th></th></tr>
{{range .Accounts}}<tr data-account="{{.AccessKey}}"><td><code>{{.AccessKey}}</code></td><td data-k="admin">{{.Admin}}</td><td>{{.WhiteRemoteAddress}}</td>
<td data-k="default-topic">{{perm .DefaultTopicPerm}}</td><td data-k="default-group">{{perm .DefaultGroupPerm}}</td>
<td data-k="topics">{{range $i, $p := .TopicPerms}}{{if $i}}, {{end}}{{$p.Name}}={{perm $p.Perm}}{{end}}</td>
<td data-k="groups">{{range $i, $p := .GroupPerms}}{{if $i}}, {{end}}{{$p.Name}}={{perm $p.Perm}}{{end}}</td>
<td><form class="inline account-delete" method="post" action="/console/acl/delete">{{csrf}}<input type="hidden" name="accessKey" value="{{.AccessKey}}">
<button type="submit" class="danger">Delete</button></form></td></tr>{{end}}</table>
<p>Global white remote addresses: {{range $i, $a := .GlobalWhiteRemoteAddresses}}{{if $i}}, {{end}}<code>{{$a}}</code>{{else}}none{{end}}.</p>
<h2>Create or update an account</h2>
<form class="act" id="account-form" method="post" action="/console/acl">{{csrf}}
<label>accessKey <input name="accessKey" required></label><label>secretKey (new account; blank: keep) <input name="secretKey" type="password" autocomplete="new-password"></label>
<label class="cb"><input type="checkbox" name="admin"> admin</label>
<label>default topic perm <select name="defaultTopicPerm"><option value="">keep</option><option>DENY</option><option>PUB</option><option>SUB</option><option>PUB|SUB</option></select></label>
<label>default group perm <select name="defaultGroupPerm"><option value="">keep</option><option>DENY</option><option>PUB</option><option>SUB</option><option>PUB|SUB</option></select></label>
<label>topic perms (topic=PERM, …) <input name="topicPerms"></label><label>group perms (group=PERM, …) <input name="groupPerms"></label>
<label>white remote address <input name="whiteRemoteAddress"></label>
<button type="submit">Save</button></form>
<p class="note">Secret keys are never shown. Changes are replicated through raft and logged with who made them.</p>
{{end}}`

const labPage = `{{define "body"}}
<p>Tools for testing raftmq itself, not for running it.</p>
<ul><li><a href="/console/lab/chaos/" id="chaos-link">Chaos reports</a>: the <code>raftmq jepsen</code> runs
{{if .Runs}}of the broker's <code>--console-runs</code> directory{{else}}(none: the broker has no <code>--console-runs</code>){{end}}.</li></ul>
{{end}}`

const chaosPage = `{{define "body"}}
<p id="chaos-off">No runs directory is set. Start the broker with <code>--console-runs DIR</code>, DIR being where
<code>raftmq jepsen run</code> or <code>raftmq jepsen campaign --out DIR</code> writes its run directories, and this page lists
their reports as <code>raftmq jepsen serve</code> does.</p>
{{end}}`

// templates parses each page with the layout.
func templates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"pathEsc": url.PathEscape,
		"msTime": func(ms int64) string {
			if ms <= 0 {
				return "-"
			}
			return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
		},
		"goTime": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		"pct":   func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + " %" },
		"bytes": byteSize,
		"rate": func(r, over float64) string {
			if over == 0 {
				return "-"
			}
			return strconv.FormatFloat(r, 'f', 1, 64)
		},
		"preview": func(b []byte) string { return preview(b, 120) },
		// csrf and isAdmin are bound per request (render).
		"csrf":    func() template.HTML { return "" },
		"isAdmin": func() bool { return false },
		"newTopic": func() cluster.AdminTopicStatus {
			return cluster.AdminTopicStatus{ReadQueues: 8, WriteQueues: 8, Perm: remoting.PermRead | remoting.PermWrite}
		},
		"newGroup":      func() offsets.SubscriptionGroupConfig { return offsets.NewSubscriptionGroupConfig("") },
		"newGroupNamed": offsets.NewSubscriptionGroupConfig,
		"permChoices": func() []struct {
			K string
			V int32
		} {
			return []struct {
				K string
				V int32
			}{{"6 read and write", 6}, {"4 read", 4}, {"2 write", 2}}
		},
		"perm": func(p acl.Perm) string {
			if p == 0 {
				return acl.Deny.String()
			}
			return p.String()
		},
		"body": func(b []byte) string { return preview(b, 1<<20) },
	}
	pages := map[string]string{"cluster": clusterPage, "topics": topicsPage + topicForm, "topic": topicPage + topicForm, "groups": groupsPage + groupForm,
		"group": groupPage + groupForm, "messages": messagesPage + messagesTable, "message": messagePage + propsTable,
		"dlq": dlqPage + propsTable, "chaos": chaosPage, "login": loginPage, "broker": brokerPage, "acl": aclPage, "lab": labPage, "none": `{{define "body"}}{{end}}`}
	out := map[string]*template.Template{}
	for name, text := range pages {
		t, err := template.New(name).Funcs(funcs).Parse(layout + text)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// preview is a body as text (up to n bytes, then "…"), or a note of its
// size and first bytes in hex when it is not UTF-8.
func preview(b []byte, n int) string {
	if !utf8.Valid(b) || bytes.ContainsFunc(b, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' && r != '\r' }) {
		k := min(len(b), 32)
		return fmt.Sprintf("(%d bytes, binary) %x…", len(b), b[:k])
	}
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

// byteSize formats a byte count in binary units.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
