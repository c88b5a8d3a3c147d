package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// The console's changes. Each is a form posted with its session's CSRF
// token; the change is the group's ordinary admin request made with the
// user's account (client/admin, as the CLI makes it), so the ACL checks it
// and the node that carries it out logs it with the caller. The console
// refuses admin changes to non-admin accounts before asking (the group
// would refuse them too). A change carried out redirects to its page with
// the outcome; one refused or failed shows the reason, with an error
// status, never a success.

func (c *Console) actionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.HandleFunc("POST /console/topics", c.adminOnly(c.topicUpdate))
	mux.HandleFunc("POST /console/topics/{topic}/delete", c.adminOnly(c.topicDelete))
	mux.HandleFunc("POST /console/topics/{topic}/send", c.testSend)
	mux.HandleFunc("POST /console/groups", c.adminOnly(c.groupUpdate))
	mux.HandleFunc("POST /console/groups/{group}/delete", c.adminOnly(c.groupDelete))
	mux.HandleFunc("POST /console/groups/{group}/reset", c.adminOnly(c.offsetReset))
	mux.HandleFunc("POST /console/groups/{group}/dlq/resend", c.dlqResend)
	mux.HandleFunc("GET /console/broker", c.brokerPage)
	mux.HandleFunc("POST /console/broker", c.adminOnly(c.settingUpdate))
	mux.HandleFunc("GET /console/acl", c.aclPage)
	mux.HandleFunc("POST /console/acl", c.adminOnly(c.accountUpdate))
	mux.HandleFunc("POST /console/acl/delete", c.adminOnly(c.accountDelete))
}

// adminOnly refuses f's change to a non-admin account.
func (c *Console) adminOnly(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s := sessionOf(r); s == nil || !s.admin {
			c.log.Warn("console: admin change refused", "path", r.URL.Path, "access_key", accessKeyOf(r), "from", r.RemoteAddr)
			c.render(w, r, http.StatusForbidden, "none", page{Title: "Not allowed", Err: errNotAdmin.Error() + "; sign in with one.", Back: back(r)})
			return
		}
		f(w, r)
	}
}

// back is the page a form was posted from (same console only).
func back(r *http.Request) string {
	if u, err := url.Parse(r.Referer()); err == nil && strings.HasPrefix(u.Path, Prefix) && (u.Host == "" || u.Host == r.Host) {
		return u.RequestURI()
	}
	return Prefix
}

// done redirects to target with msg shown there.
func (c *Console) done(w http.ResponseWriter, r *http.Request, target, msg string) {
	c.setFlash(sessionOf(r), msg)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// failed shows why a change was not carried out.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, title string, err error) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, errBadInput):
		status = http.StatusBadRequest
	case admin.NotFound(err), errors.Is(err, admin.ErrNoDeadLetter):
		status = http.StatusNotFound
	case denied(err):
		status = http.StatusForbidden
	case errors.Is(err, admin.ErrUnknownSetting), errors.Is(err, admin.ErrRestartSetting):
		status = http.StatusBadRequest
	}
	var ce *client.Error
	if errors.As(err, &ce) && ce.Code != remoting.SystemError && status == http.StatusBadGateway && !admin.NotFound(err) {
		status = http.StatusUnprocessableEntity // the broker refused the request itself
	}
	c.log.Info("console: change failed", "what", title, "path", r.URL.Path, "access_key", accessKeyOf(r), "err", err)
	c.render(w, r, status, "none", page{Title: title, Err: title + " failed: " + explain(err), Back: back(r)})
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadInput}, args...)...)
}

func formInt(r *http.Request, name string, def int64) (int64, error) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, bad("%s %q is not a number", name, v)
	}
	return n, nil
}

func formBool(r *http.Request, name string) bool {
	v := r.PostFormValue(name)
	return v == "on" || v == "true"
}

func (c *Console) topicUpdate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	topic := strings.TrimSpace(r.PostFormValue("topic"))
	err := func() error {
		if topic == "" {
			return bad("give the topic's name")
		}
		read, err := formInt(r, "readQueues", 8)
		if err != nil {
			return err
		}
		write, err := formInt(r, "writeQueues", read)
		if err != nil {
			return err
		}
		perm, err := formInt(r, "perm", 6)
		if err != nil {
			return err
		}
		if read < 1 || write < 1 {
			return bad("a topic needs at least one read and one write queue")
		}
		if perm != remoting.PermRead && perm != remoting.PermWrite && perm != remoting.PermRead|remoting.PermWrite {
			return bad("perm %d: want 2 (write), 4 (read) or 6 (read and write)", perm)
		}
		return clientOf(r).UpdateTopic(ctx, client.TopicConfig{Topic: topic, ReadQueues: int32(read), WriteQueues: int32(write),
			Perm: int32(perm), Order: formBool(r, "order")})
	}()
	if err != nil {
		c.failed(w, r, "Topic "+topic, err)
		return
	}
	c.done(w, r, Prefix+"topics/"+url.PathEscape(topic), "Topic "+topic+" created or updated.")
}

func (c *Console) topicDelete(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	topic := r.PathValue("topic")
	cl := clientOf(r)
	// The broker answers success for a missing topic, as RocketMQ's
	// does: the user is told instead.
	if _, err := admin.TopicStatus(ctx, cl, topic); err != nil {
		c.failed(w, r, "Deleting topic "+topic, err)
		return
	}
	if err := cl.DeleteTopic(ctx, topic); err != nil {
		c.failed(w, r, "Deleting topic "+topic, err)
		return
	}
	c.done(w, r, Prefix+"topics", "Topic "+topic+" deleted (its messages stay until retention removes them).")
}

func (c *Console) testSend(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	topic := r.PathValue("topic")
	m := &client.Message{Topic: topic, QueueID: -1, Body: []byte(r.PostFormValue("body")), Tags: strings.TrimSpace(r.PostFormValue("tags"))}
	if k := strings.TrimSpace(r.PostFormValue("keys")); k != "" {
		m.Keys = strings.Split(k, ",")
	}
	if len(m.Body) == 0 {
		c.failed(w, r, "Test send to "+topic, bad("a message needs a body"))
		return
	}
	res, err := clientOf(r).NewProducer(client.ProducerOptions{Group: "raftmq-console"}).Send(ctx, m)
	if err != nil {
		c.failed(w, r, "Test send to "+topic, err)
		return
	}
	c.done(w, r, Prefix+"topics/"+url.PathEscape(topic), fmt.Sprintf("Sent: msgId %s, queue %d, offset %d, offsetMsgId %s.",
		res.MsgID, res.QueueID, res.QueueOffset, res.OffsetMsgID))
}

func (c *Console) groupUpdate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	group := strings.TrimSpace(r.PostFormValue("group"))
	err := func() error {
		if group == "" {
			return bad("give the group's name")
		}
		gc := offsets.NewSubscriptionGroupConfig(group)
		rq, err := formInt(r, "retryQueueNums", int64(gc.RetryQueueNums))
		if err != nil {
			return err
		}
		rm, err := formInt(r, "retryMaxTimes", int64(gc.RetryMaxTimes))
		if err != nil {
			return err
		}
		gc.RetryQueueNums, gc.RetryMaxTimes = int32(rq), int32(rm)
		gc.ConsumeEnable, gc.ConsumeBroadcastEnable = formBool(r, "consumeEnable"), formBool(r, "consumeBroadcastEnable")
		gc.ConsumeMessageOrderly, gc.ConsumeFromMinEnable = formBool(r, "consumeMessageOrderly"), formBool(r, "consumeFromMinEnable")
		if err := gc.Validate(); err != nil {
			return fmt.Errorf("%w: %w", errBadInput, err)
		}
		return admin.UpdateGroup(ctx, clientOf(r), gc)
	}()
	if err != nil {
		c.failed(w, r, "Consumer group "+group, err)
		return
	}
	c.done(w, r, Prefix+"groups/"+url.PathEscape(group), "Consumer group "+group+" created or updated.")
}

func (c *Console) groupDelete(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	group := r.PathValue("group")
	if err := clientOf(r).DeleteGroup(ctx, group); err != nil {
		c.failed(w, r, "Deleting consumer group "+group, err)
		return
	}
	c.done(w, r, Prefix+"groups", "Consumer group "+group+" deleted (its committed offsets stay).")
}

// offsetReset moves the group's offsets in a topic to a time, or to the
// end of each queue (skipping the backlog).
func (c *Console) offsetReset(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	group, topic := r.PathValue("group"), strings.TrimSpace(r.PostFormValue("topic"))
	title := "Offset reset of " + group
	if topic == "" {
		c.failed(w, r, title, bad("give the topic"))
		return
	}
	ts, what := int64(-1), "the end of each queue"
	if r.PostFormValue("to") != "end" {
		at, err := parseTime(r.PostFormValue("time"))
		if err == nil && at.IsZero() {
			err = bad("give a time (UTC) or choose the end")
		}
		if err != nil {
			c.failed(w, r, title, err)
			return
		}
		ts, what = at.UnixMilli(), at.UTC().Format("2006-01-02 15:04:05")+" UTC"
	}
	v, err := admin.ResetOffset(ctx, clientOf(r), group, topic, ts, true)
	if err != nil {
		c.failed(w, r, title, err)
		return
	}
	var moved []string
	for _, q := range v.Queues {
		moved = append(moved, fmt.Sprintf("queue %d: %d → %d", q.QueueID, q.Old, q.New))
	}
	c.done(w, r, Prefix+"groups/"+url.PathEscape(group), fmt.Sprintf("Offsets of %s in %s reset to %s (%s); %d online consumers told.",
		group, topic, what, strings.Join(moved, ", "), v.Notified))
}

func (c *Console) dlqResend(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	group := r.PathValue("group")
	uniq := strings.TrimSpace(r.PostFormValue("msgId"))
	if uniq == "" && r.PostFormValue("all") != "true" {
		c.failed(w, r, "Resend", bad("choose a dead letter or all of them"))
		return
	}
	rs, err := admin.ResendDeadLetters(ctx, clientOf(r), group, uniq)
	if err != nil {
		c.failed(w, r, "Resend", err)
		return
	}
	ids := make([]string, len(rs))
	for i, x := range rs {
		ids[i] = x.MsgID
	}
	c.done(w, r, Prefix+"groups/"+url.PathEscape(group)+"/dlq", fmt.Sprintf("Resent %d dead letters to %s: %s.",
		len(rs), client.RetryTopic(group), strings.Join(ids, ", ")))
}

// nodeSettings is one node's settings on the broker page.
type nodeSettings struct {
	Addr string
	Set  map[string]string
	Err  string
}

func (c *Console) brokerPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	nodes, err := admin.Nodes(ctx, cl)
	if err != nil {
		c.fail(w, r, "Broker settings", "broker", err)
		return
	}
	var v struct {
		Keys  []cluster.AdminSetting
		Nodes []nodeSettings
	}
	v.Nodes = make([]nodeSettings, len(nodes))
	forEach(len(nodes), func(i int) {
		n := &v.Nodes[i]
		n.Addr = nodes[i]
		set, err := admin.Settings(ctx, cl, n.Addr)
		if err != nil {
			n.Err = explain(err)
			return
		}
		n.Set = map[string]string{}
		for _, s := range set {
			n.Set[s.Key] = s.Value
		}
		if i == 0 || v.Keys == nil {
			v.Keys = set
		}
	})
	if v.Keys == nil {
		c.fail(w, r, "Broker settings", "broker", errors.New(v.Nodes[0].Err))
		return
	}
	c.render(w, r, http.StatusOK, "broker", page{Title: "Broker settings", Nav: "broker", Data: &v})
}

func (c *Console) settingUpdate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	key, value := strings.TrimSpace(r.PostFormValue("key")), strings.TrimSpace(r.PostFormValue("value"))
	var nodes []string
	if n := r.PostFormValue("node"); n != "" {
		nodes = []string{n}
	}
	if key == "" {
		c.failed(w, r, "Broker setting", bad("choose a setting"))
		return
	}
	scope, done, err := admin.UpdateSetting(ctx, clientOf(r), nodes, key, value)
	if err != nil {
		c.failed(w, r, "Broker setting "+key, err)
		return
	}
	where := "group-wide, through raft"
	if scope != cluster.ScopeGroup {
		where = "on " + strings.Join(done, ", ")
	}
	c.done(w, r, Prefix+"broker", fmt.Sprintf("%s = %s (%s).", key, value, where))
}

func (c *Console) aclPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	v, err := admin.ACL(ctx, clientOf(r))
	if err != nil {
		c.fail(w, r, "ACL accounts", "acl", err)
		return
	}
	slices.SortFunc(v.Accounts, func(a, b cluster.AdminAccount) int { return strings.Compare(a.AccessKey, b.AccessKey) })
	c.render(w, r, http.StatusOK, "acl", page{Title: "ACL accounts", Nav: "acl", Data: &v})
}

func (c *Console) accountUpdate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	a := admin.Account{AccessKey: f("accessKey"), SecretKey: f("secretKey"), WhiteRemoteAddress: f("whiteRemoteAddress"),
		Admin: formBool(r, "admin"), DefaultTopicPerm: f("defaultTopicPerm"), DefaultGroupPerm: f("defaultGroupPerm"),
		TopicPerms: f("topicPerms"), GroupPerms: f("groupPerms")}
	if a.AccessKey == "" {
		c.failed(w, r, "ACL account", bad("give the account's accessKey"))
		return
	}
	if err := admin.UpdateAccount(ctx, clientOf(r), a); err != nil {
		c.failed(w, r, "ACL account "+a.AccessKey, err)
		return
	}
	c.done(w, r, Prefix+"acl", "Account "+a.AccessKey+" created or updated.")
}

func (c *Console) accountDelete(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	ak := strings.TrimSpace(r.PostFormValue("accessKey"))
	if ak == accessKeyOf(r) {
		c.failed(w, r, "Deleting account "+ak, bad("you are signed in with this account"))
		return
	}
	if err := admin.DeleteAccount(ctx, clientOf(r), ak); err != nil {
		c.failed(w, r, "Deleting account "+ak, err)
		return
	}
	c.done(w, r, Prefix+"acl", "Account "+ak+" deleted.")
}

func accessKeyOf(r *http.Request) string {
	if s := sessionOf(r); s != nil {
		return s.cr.accessKey
	}
	return ""
}
