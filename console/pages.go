package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Most topics and groups a list page asks about; most dead letters shown.
const (
	maxListTopics = 200
	maxListGroups = 100
	maxDLQ        = 100
	listParallel  = 8
)

// page is what the layout renders.
type page struct {
	Title, Nav, Err, Now string
	Refresh              int
	Data                 any
	// Back: a failed change's form page.
	Back string
	// Filled by render from the session: the outcome of the last change,
	// the forms' CSRF token, the account signed in and whether it is an
	// admin (admin forms are shown to admins only).
	OK, CSRF, User string
	Admin, SignIn  bool
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/{$}", c.clusterPage)
	mux.HandleFunc("GET /console/topics", c.topicsPage)
	mux.HandleFunc("GET /console/topics/{topic}", c.topicPage)
	mux.HandleFunc("GET /console/groups", c.groupsPage)
	mux.HandleFunc("GET /console/groups/{group}", c.groupPage)
	mux.HandleFunc("GET /console/groups/{group}/dlq", c.dlqPage)
	mux.HandleFunc("GET /console/messages", c.messagesPage)
	mux.HandleFunc("GET /console/message", c.messagePage)
	mux.HandleFunc("GET /console/lab/{$}", c.labPage)
	mux.HandleFunc("GET /console/lab/chaos/", c.chaosPage)
	mux.HandleFunc("GET /console/chaos/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"lab/"+strings.TrimPrefix(r.URL.Path, Prefix), http.StatusMovedPermanently)
	})
	c.actionRoutes(mux)
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "none", page{Title: "Not found", Err: "no console page at " + r.URL.Path})
	})
	return mux
}

// render writes a page; an error from the group that refused the
// credentials asks for them again.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Now = time.Now().UTC().Format("2006-01-02 15:04:05")
	if s := sessionOf(r); s != nil {
		p.CSRF, p.User, p.Admin = s.csrf, s.cr.accessKey, s.admin
		if name != "login" {
			p.OK = c.takeFlash(s)
		}
	}
	// Pages with live figures reload themselves, unless they hold a form
	// (a reload would clear what the user is typing): an admin's lists
	// and group page, and every topic page (its test send).
	if p.Refresh == 0 && c.cfg.Refresh > 0 && status == http.StatusOK &&
		(name == "cluster" || !p.Admin && (name == "topics" || name == "groups" || name == "group")) {
		p.Refresh = int(c.cfg.Refresh / time.Second)
	}
	p.SignIn = c.aclOn()
	t, err := c.tmpl[name].Clone()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	csrf := template.HTML(`<input type="hidden" name="` + csrfField + `" value="` + template.HTMLEscapeString(p.CSRF) + `">`)
	t.Funcs(template.FuncMap{"csrf": func() template.HTML { return csrf }, "isAdmin": func() bool { return p.Admin }})
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Warn("console: render", "page", name, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail renders an error page: 404 for a topic, group or message the group
// does not know, 401 for refused credentials, 502 otherwise.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, title, nav string, err error) {
	status := http.StatusBadGateway
	switch {
	case admin.NotFound(err):
		status = http.StatusNotFound
	case errors.Is(err, admin.ErrBadQuery), errors.Is(err, errBadInput):
		status = http.StatusBadRequest
	case c.cfg.ACL && badCredentials(err):
		w.Header().Set("WWW-Authenticate", `Basic realm="raftmq console", charset="UTF-8"`)
		status = http.StatusUnauthorized
	case denied(err):
		status = http.StatusForbidden
	}
	c.render(w, r, status, "none", page{Title: title, Nav: nav, Err: explain(err)})
}

// explain words a broker's answer for the page.
func explain(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case remoting.TopicNotExist:
			return "Unknown topic: " + ce.Remark
		case remoting.SubscriptionGroupNotExist:
			return "Unknown consumer group: " + ce.Remark
		case remoting.QueryNotFound:
			return "Not found: " + ce.Remark
		}
		if admin.NotFound(err) {
			return "Message not found: " + ce.Remark
		}
	}
	return err.Error()
}

var errBadInput = errors.New("console: bad input")

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
}

// memberView is a member with its own disk figures.
type memberView struct {
	cluster.AdminMember
	Disk    *cluster.NodeStatus
	DiskErr string
}

func (m memberView) RoleName() string { return strings.TrimPrefix(m.Role, "State") }

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	var v struct {
		HasGroup bool
		Group    cluster.AdminCluster
		Members  []memberView
	}
	p := page{Title: "Cluster", Nav: "cluster", Data: &v}
	g, err := admin.ClusterList(ctx, cl)
	if err != nil {
		if c.cfg.ACL && denied(err) {
			c.fail(w, r, "Cluster", "cluster", err)
			return
		}
		// No leader to ask: each node's own answer.
		p.Err = "The leader could not be asked (" + err.Error() + "); each node's own status follows."
		for _, a := range c.cfg.Addrs {
			v.Members = append(v.Members, memberView{AdminMember: cluster.AdminMember{Client: a}})
		}
	} else {
		v.HasGroup, v.Group = true, g
		for _, m := range g.Members {
			v.Members = append(v.Members, memberView{AdminMember: m})
		}
	}
	var wg sync.WaitGroup
	for i := range v.Members {
		m := &v.Members[i]
		if m.Client == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := admin.NodeStatus(ctx, cl, m.Client)
			if err != nil {
				m.DiskErr = err.Error()
				return
			}
			m.Disk = &st
			if !v.HasGroup {
				m.ID, m.Role, m.Term, m.Commit, m.Applied = st.Status.ID, st.Status.Role, st.Status.Term, st.Status.Commit, st.Status.Applied
			}
		}()
	}
	wg.Wait()
	c.render(w, r, http.StatusOK, "cluster", p)
}

// topicRow is a topic on the topics page.
type topicRow struct {
	Name       string
	System     bool
	Status     cluster.AdminTopicStatus
	Held, Max  int64
	Last       int64
	Rate, Over float64
	Err        string
}

// systemTopic: a topic raftmq or RocketMQ keeps for itself.
func systemTopic(t string) bool {
	return strings.HasPrefix(t, "%") || strings.HasPrefix(t, "RMQ_SYS_") || t == "TBW102" || t == "SCHEDULE_TOPIC_XXXX" ||
		strings.HasPrefix(t, "rmq_sys_")
}

func (row *topicRow) fill(st cluster.AdminTopicStatus) {
	row.Status = st
	row.Held, row.Max, row.Last = 0, 0, 0
	for _, q := range st.Queues {
		row.Held += q.MaxOffset - q.MinOffset
		row.Max += q.MaxOffset
		row.Last = max(row.Last, q.LastUpdate)
	}
}

func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	tcs, err := admin.Topics(ctx, cl)
	if err != nil {
		c.fail(w, r, "Topics", "topics", err)
		return
	}
	// The operator's topics first, then the system ones.
	sort.SliceStable(tcs, func(i, j int) bool { return !systemTopic(tcs[i].TopicName) && systemTopic(tcs[j].TopicName) })
	var v struct {
		Topics    []topicRow
		Count     int
		Truncated bool
		Interval  time.Duration
	}
	v.Count, v.Interval = len(tcs), c.cfg.SampleInterval
	if len(tcs) > maxListTopics {
		tcs, v.Truncated = tcs[:maxListTopics], true
	}
	v.Topics = make([]topicRow, len(tcs))
	forEach(len(tcs), func(i int) {
		row := &v.Topics[i]
		row.Name, row.System = tcs[i].TopicName, systemTopic(tcs[i].TopicName)
		st, err := admin.TopicStatus(ctx, cl, row.Name)
		if err != nil {
			row.Err = explain(err)
			return
		}
		now := time.Now()
		c.sample.topic(st, cl, true, now)
		row.fill(st)
		row.Rate, row.Over = c.sample.rate(row.Name, now)
	})
	c.render(w, r, http.StatusOK, "topics", page{Title: "Topics", Nav: "topics", Data: &v})
}

// forEach runs f(0..n-1), listParallel at a time.
func forEach(n int, f func(i int)) {
	sem := make(chan struct{}, listParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

func (c *Console) topicPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	topic := r.PathValue("topic")
	st, err := admin.TopicStatus(ctx, cl, topic)
	if err != nil {
		c.fail(w, r, "Topic "+topic, "topics", err)
		return
	}
	now := time.Now()
	c.sample.topic(st, cl, true, now)
	var v struct {
		topicRow
		Since    string
		Plot     template.HTML
		Interval time.Duration
	}
	v.Name, v.Interval = topic, c.cfg.SampleInterval
	v.fill(st)
	v.Rate, v.Over = c.sample.rate(topic, now)
	v.Since = now.Add(-time.Hour).UTC().Format(inputTime)
	if ss := c.sample.topicSeries(topic); len(ss) >= 2 {
		line := series{name: topic}
		for i := 1; i < len(ss); i++ {
			d := ss[i].at.Sub(ss[i-1].at).Seconds()
			if d > 0 {
				line.at = append(line.at, ss[i].at)
				line.v = append(line.v, float64(ss[i].total-ss[i-1].total)/d)
			}
		}
		svg, err := timePlot("Messages stored per second", "messages per second", []series{line})
		if err != nil {
			c.log.Warn("console: rate plot", "topic", topic, "err", err)
		}
		v.Plot = template.HTML(svg) // rendered by gonum/plot from numbers
	}
	c.render(w, r, http.StatusOK, "topic", page{Title: "Topic " + topic, Nav: "topics", Data: &v})
}

// groupRow is a group on the groups page.
type groupRow struct {
	Name    string
	Config  offsets.SubscriptionGroupConfig
	Clients int
	Topics  []string
	Lag     int64
	LagErr  string
}

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	gcs, err := admin.Groups(ctx, cl)
	if err != nil {
		c.fail(w, r, "Consumer groups", "groups", err)
		return
	}
	var v struct {
		Groups    []groupRow
		Count     int
		Truncated bool
	}
	v.Count = len(gcs)
	if len(gcs) > maxListGroups {
		gcs, v.Truncated = gcs[:maxListGroups], true
	}
	v.Groups = make([]groupRow, len(gcs))
	forEach(len(gcs), func(i int) {
		row := &v.Groups[i]
		row.Name, row.Config = gcs[i].GroupName, gcs[i]
		if conn, err := admin.ConsumerConnection(ctx, cl, row.Name); err == nil {
			row.Clients = len(conn.Clients)
		}
		p, err := admin.ConsumerProgress(ctx, cl, row.Name, "")
		if err != nil {
			row.LagErr = "no offsets"
			if !admin.NotFound(err) {
				row.LagErr = explain(err)
			}
			return
		}
		c.sample.group(p, cl, true, time.Now())
		row.Lag, row.Topics = p.TotalLag, p.Topics
	})
	c.render(w, r, http.StatusOK, "groups", page{Title: "Consumer groups", Nav: "groups", Data: &v})
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	group := r.PathValue("group")
	p, err := admin.ConsumerProgress(ctx, cl, group, "")
	if err != nil {
		c.fail(w, r, "Consumer group "+group, "groups", err)
		return
	}
	c.sample.group(p, cl, true, time.Now())
	var v struct {
		Progress cluster.AdminConsumerProgress
		Conn     cluster.AdminConsumerConnection
		ConnErr  string
		DLQ      int64
		Plot     template.HTML
		Interval time.Duration
		Config   *offsets.SubscriptionGroupConfig
		Since    string
	}
	v.Progress, v.Interval = p, c.cfg.SampleInterval
	v.Since = time.Now().Add(-time.Hour).UTC().Format(inputTime)
	if gcs, err := admin.Groups(ctx, cl); err == nil {
		for i := range gcs {
			if gcs[i].GroupName == group {
				v.Config = &gcs[i]
			}
		}
	}
	if v.Conn, err = admin.ConsumerConnection(ctx, cl, group); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Code == remoting.ConsumerNotOnline {
			v.ConnErr = "No consumer of the group is online."
		} else {
			v.ConnErr = explain(err)
		}
	}
	if st, err := admin.TopicStatus(ctx, cl, admin.DLQTopic(group)); err == nil {
		for _, q := range st.Queues {
			v.DLQ += q.MaxOffset - q.MinOffset
		}
	}
	if ss := c.sample.groupSeries(group); len(ss) >= 2 {
		svg, err := lagPlot(ss)
		if err != nil {
			c.log.Warn("console: lag plot", "group", group, "err", err)
		}
		v.Plot = template.HTML(svg) // rendered by gonum/plot from numbers
	}
	c.render(w, r, http.StatusOK, "group", page{Title: "Consumer group " + group, Nav: "groups", Data: &v})
}

// lagPlot draws a group's total lag and its lag per topic over its samples.
func lagPlot(ss []groupSample) (string, error) {
	total := series{name: "total"}
	perTopic := map[string]*series{}
	var names []string
	for _, s := range ss {
		total.at, total.v = append(total.at, s.at), append(total.v, float64(s.total))
		for t, lag := range s.byTopic {
			if perTopic[t] == nil {
				perTopic[t] = &series{name: t}
				names = append(names, t)
			}
			perTopic[t].at, perTopic[t].v = append(perTopic[t].at, s.at), append(perTopic[t].v, float64(lag))
		}
	}
	sort.Strings(names)
	lines := []series{total}
	if len(names) > 1 {
		for _, t := range names[:min(len(names), maxPlotLine-1)] {
			lines = append(lines, *perTopic[t])
		}
	}
	return timePlot("Lag", "messages behind", lines)
}

// kv is a property.
type kv struct{ K, V string }

func props(m *client.MessageExt) []kv {
	var out []kv
	for k, v := range m.Properties() {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	return out
}

func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := clientOf(r)
	group := r.PathValue("group")
	title := "Dead letters of " + group
	if _, err := admin.ConsumerProgress(ctx, cl, group, ""); err != nil {
		c.fail(w, r, title, "groups", err)
		return
	}
	type letter struct {
		M      *client.MessageExt
		Origin string
		Props  []kv
	}
	var v struct {
		Group, Topic string
		Messages     []letter
		Truncated    bool
	}
	v.Group, v.Topic = group, admin.DLQTopic(group)
	ms, err := admin.DeadLetters(ctx, cl, group, maxDLQ+1)
	if err != nil && !admin.NotFound(err) {
		c.fail(w, r, title, "groups", err)
		return
	}
	if len(ms) > maxDLQ {
		ms, v.Truncated = ms[:maxDLQ], true
	}
	for _, m := range ms {
		origin := m.Properties()[message.PropertyRetryTopic]
		v.Messages = append(v.Messages, letter{M: m, Origin: origin, Props: props(m)})
	}
	c.render(w, r, http.StatusOK, "dlq", page{Title: title, Nav: "groups", Data: &v})
}

// inputTime is the search form's time format (UTC).
const inputTime = "2006-01-02T15:04:05"

// parseTime reads a search time: the form's format (seconds optional),
// RFC 3339, or Unix milliseconds; "" is the zero time.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "now" {
		return time.Time{}, nil
	}
	for _, layout := range []string{inputTime, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, fmt.Errorf("%w: time %q: want %s (UTC), RFC 3339 or Unix milliseconds", errBadInput, s, inputTime)
}

func (c *Console) messagesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	f := r.URL.Query()
	var v struct {
		Q          admin.Query
		Begin, End string
		Searched   bool
		Messages   []*client.MessageExt
	}
	v.Q = admin.Query{Topic: strings.TrimSpace(f.Get("topic")), Key: strings.TrimSpace(f.Get("key")),
		Uniq: strings.TrimSpace(f.Get("uniq")), ID: strings.TrimSpace(f.Get("id")), Max: 32}
	v.Begin, v.End = f.Get("begin"), f.Get("end")
	p := page{Title: "Message search", Nav: "messages", Data: &v}
	if n, err := strconv.Atoi(f.Get("max")); err == nil && n > 0 {
		v.Q.Max = min(n, 1000)
	}
	if v.Q.Topic == "" && v.Q.ID == "" && v.Q.Key == "" && v.Q.Uniq == "" {
		c.render(w, r, http.StatusOK, "messages", p)
		return
	}
	var err error
	if v.Q.Begin, err = parseTime(v.Begin); err == nil {
		v.Q.End, err = parseTime(v.End)
	}
	if err == nil {
		v.Messages, err = admin.Messages(ctx, clientOf(r), v.Q)
	}
	status := http.StatusOK
	if err != nil {
		p.Err = explain(err)
		switch {
		case admin.NotFound(err):
			status = http.StatusNotFound
		case errors.Is(err, admin.ErrBadQuery), errors.Is(err, errBadInput):
			status = http.StatusBadRequest
		default:
			status = http.StatusBadGateway
		}
	} else {
		v.Searched = true
	}
	c.render(w, r, status, "messages", p)
}

func (c *Console) messagePage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	if id == "" {
		c.fail(w, r, "Message", "messages", fmt.Errorf("%w: give the message's offsetMsgId as ?id=", errBadInput))
		return
	}
	if _, _, err := message.ParseOffsetMsgID(id); err != nil {
		c.fail(w, r, "Message", "messages", fmt.Errorf("%w: %w", errBadInput, err))
		return
	}
	m, err := clientOf(r).ViewMessage(ctx, id)
	if err != nil {
		c.fail(w, r, "Message "+id, "messages", err)
		return
	}
	v := struct {
		M     *client.MessageExt
		Props []kv
	}{m, props(m)}
	c.render(w, r, http.StatusOK, "message", page{Title: "Message " + m.MsgID, Nav: "messages", Data: &v})
}

// labPage is the lab corner: tools for testing raftmq itself, kept out
// of the operator's menu.
func (c *Console) labPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "lab", page{Title: "Lab", Nav: "lab", Data: struct{ Runs bool }{c.chaos != nil}})
}

func (c *Console) chaosPage(w http.ResponseWriter, r *http.Request) {
	if c.chaos == nil {
		c.render(w, r, http.StatusOK, "chaos", page{Title: "Chaos reports", Nav: "lab", Data: struct{}{}})
		return
	}
	c.chaos.ServeHTTP(w, r)
}
