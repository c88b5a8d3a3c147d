package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// scrape reads a node's /metrics with Prometheus' own text parser.
func scrape(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sample returns the value of the family's series with the given labels
// (name, value pairs): a counter's or gauge's value, a histogram's count.
// ok is false when there is no such series.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsMoveWithLoad starts a group with --http, sends and consumes,
// and checks what the leader's /metrics says against what was done; then
// that every expression of the Grafana dashboard names a metric the scrape
// has.
func TestMetricsMoveWithLoad(t *testing.T) {
	httpAddrs := freeAddrs(t, 3)
	tb := startBrokersWith(t, func(c *Config) { c.HTTPAddr = httpAddrs[c.ID-1] }, 1)
	// Node 1 is the preferred leader: wait for it, so that leadership does
	// not move during the test.
	require.Eventually(t, func() bool { return tb.bs[1].Replica().Node().LeaderReady() }, 10*time.Second, 5*time.Millisecond)
	l := tb.bs[1]
	lhttp := l.cfg.HTTPAddr
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "M", DefaultTopic: "TBW102", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	resp := invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	before := scrape(t, lhttp)
	const n0, n1 = 30, 10 // messages to queue 0 and queue 1
	for i := range n0 + n1 {
		q := int32(0)
		if i >= n0 {
			q = 1
		}
		resp := invoke(t, lc, sendCmd("M", q, fmt.Sprintf("m%d", i), fmt.Sprintf("MU%d", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	// A send to a topic name RocketMQ refuses is refused (and counted).
	resp = invoke(t, lc, sendCmd("bad topic", 0, "x", "MUX"))
	require.Equal(t, remoting.MessageIllegal, resp.Code, resp.Remark)
	// A repeated send is answered as a duplicate and stores nothing.
	resp = invoke(t, lc, sendCmd("M", 0, "m0", "MU0"))
	require.Equal(t, "true", resp.ExtFields["raftmqDuplicate"])

	// The group "mg" consumes 20 of queue 0 and all of queue 1: lag 10.
	ph := remoting.PullMessageRequestHeader{ConsumerGroup: "mg", Topic: "M", QueueID: 0, QueueOffset: 0, MaxMsgNums: 20, SysFlag: remoting.PullSysFlagSubscription, Subscription: "*", ExpressionType: "TAG"}
	resp = invoke(t, lc, remoting.NewRequest(remoting.PullMessage, ph.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	ph.QueueOffset = n0
	resp = invoke(t, lc, remoting.NewRequest(remoting.PullMessage, ph.Encode(), nil))
	require.Equal(t, remoting.PullNotFound, resp.Code, resp.Remark)
	for q, off := range map[int32]int64{0: 20, 1: n1} {
		uh := remoting.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "mg", Topic: "M", QueueID: q, CommitOffset: off}
		resp = invoke(t, lc, remoting.NewRequest(remoting.UpdateConsumerOffset, uh.Encode(), nil))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	require.Eventually(t, func() bool {
		o0, ok0 := l.Replica().Store().ConsumerOffset("mg", "M", 0)
		o1, ok1 := l.Replica().Store().ConsumerOffset("mg", "M", 1)
		return ok0 && ok1 && o0 == 20 && o1 == n1
	}, 5*time.Second, 5*time.Millisecond)

	after := scrape(t, lhttp)
	moved := func(name string, labels ...string) float64 {
		a, ok := sample(after, name, labels...)
		require.True(t, ok, "%s%v missing after the load", name, labels)
		b, _ := sample(before, name, labels...)
		return a - b
	}
	require.Equal(t, float64(n0+n1), moved("raftmq_topic_messages_total", "topic", "M"), "messages by topic, the duplicate not counted")
	require.Greater(t, moved("raftmq_topic_message_bytes_total", "topic", "M"), float64(50*(n0+n1)), "record bytes by topic")
	require.Equal(t, float64(n0+n1+1), moved("raftmq_sends_total", "result", "ok"))
	require.Equal(t, float64(n0+n1+1), moved("raftmq_send_commit_seconds"), "one latency sample per answered send")
	require.GreaterOrEqual(t, moved("raftmq_log_fsync_seconds"), 1.0)
	require.GreaterOrEqual(t, moved("raftmq_apply_seconds"), 1.0)
	require.GreaterOrEqual(t, moved("raftmq_commit_seconds"), float64(n0+n1+1), "one commit sample per proposed entry")
	require.Equal(t, 1.0, moved("raftmq_pulls_total", "result", "found"))
	require.Equal(t, 1.0, moved("raftmq_pulls_total", "result", "none"))
	require.Equal(t, 2.0, moved("raftmq_pull_seconds"), "one latency sample per pull")
	require.Greater(t, moved("raftmq_pull_bytes_total"), float64(20*50), "the 20 messages pulled")
	require.Equal(t, 1.0, moved("raftmq_requests_refused_total", "code", strconv.Itoa(int(remoting.MessageIllegal))))
	conns, ok := sample(after, "raftmq_connections", "protocol", "remoting")
	require.True(t, ok)
	require.GreaterOrEqual(t, conns, 1.0, "this test's client connection")
	raftConns, _ := sample(after, "raftmq_connections", "protocol", "raft")
	require.Equal(t, 2.0, raftConns, "streams to both followers")
	httpConns, _ := sample(after, "raftmq_connections", "protocol", "http")
	require.GreaterOrEqual(t, httpConns, 1.0, "the scrape's own connection")
	bi, ok := sample(after, "raftmq_build_info")
	require.True(t, ok)
	require.Equal(t, 1.0, bi)

	lag, ok := sample(after, "raftmq_group_lag_messages", "group", "mg", "topic", "M")
	require.True(t, ok)
	require.Equal(t, float64(n0-20), lag)
	require.Equal(t, float64(20+n1), moved("raftmq_group_committed_messages_total", "group", "mg", "topic", "M"))
	term, _ := sample(after, "raftmq_raft_term")
	require.GreaterOrEqual(t, term, 1.0)
	changes, _ := sample(after, "raftmq_raft_leader_changes_total")
	require.GreaterOrEqual(t, changes, 1.0)
	isLeader, _ := sample(after, "raftmq_raft_is_leader")
	require.Equal(t, 1.0, isLeader)
	for _, f := range []string{"2", "3"} {
		fl, ok := sample(after, "raftmq_raft_follower_lag_entries", "follower", f)
		require.True(t, ok, "follower %s's lag on the leader", f)
		require.GreaterOrEqual(t, fl, 0.0)
	}
	_, self := sample(after, "raftmq_raft_follower_lag_entries", "follower", "1")
	require.False(t, self, "the leader is not its own follower")
	full, _ := sample(after, "raftmq_disk_full_ratio")
	require.Equal(t, 0.90, full)
	free, _ := sample(after, "raftmq_disk_free_bytes")
	require.Greater(t, free, 0.0)
	cl, _ := sample(after, "raftmq_commitlog_bytes")
	require.Greater(t, cl, float64(50*(n0+n1)))
	lost, ok := sample(after, "raftmq_retention_forced_unconsumed_messages_total")
	require.True(t, ok, "the forced retention counter is not exported")
	require.Zero(t, lost)

	// A follower has no follower lag; its lag gauge agrees once applied.
	fhttp := tb.follower().cfg.HTTPAddr
	require.Eventually(t, func() bool {
		lag, ok := sample(scrape(t, fhttp), "raftmq_group_lag_messages", "group", "mg", "topic", "M")
		return ok && lag == float64(n0-20)
	}, 5*time.Second, 10*time.Millisecond)
	_, ok = sample(scrape(t, fhttp), "raftmq_raft_follower_lag_entries")
	require.False(t, ok)

	// A topic deleted and made again keeps counting under its label (the
	// counter cached in its old record is not the one its sends find).
	resp = invoke(t, lc, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "M"}, nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = invoke(t, lc, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	for i := range 3 {
		resp := invoke(t, lc, sendCmd("M", 1, fmt.Sprintf("again%d", i), fmt.Sprintf("MA%d", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	again, _ := sample(scrape(t, lhttp), "raftmq_topic_messages_total", "topic", "M")
	b0, _ := sample(before, "raftmq_topic_messages_total", "topic", "M")
	require.Equal(t, float64(n0+n1+3), again-b0)

	checkDashboard(t, after)
}

var metricName = regexp.MustCompile(`\b(?:raftmq|go|process)_[a-z0-9_]+`)

// checkDashboard checks docs/grafana/raftmq.json is a dashboard whose
// every query names metrics the scrape has.
func checkDashboard(t *testing.T, fams map[string]*dto.MetricFamily) {
	data, err := os.ReadFile("../docs/grafana/raftmq.json")
	require.NoError(t, err)
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	require.NotEmpty(t, dash.Title)
	exprs := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "panel %q: %s", p.Title, tg.Expr)
			for _, name := range names {
				base := name
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if b := strings.TrimSuffix(name, suf); b != name && fams[b] != nil &&
						(fams[b].GetType() == dto.MetricType_HISTOGRAM || fams[b].GetType() == dto.MetricType_SUMMARY) {
						base = b
					}
				}
				require.Contains(t, fams, base, "panel %q: %s", p.Title, tg.Expr)
			}
			exprs++
		}
	}
	require.GreaterOrEqual(t, exprs, 8)
}

// The per-topic counters: at most MaxLabelValues topics get a label of
// their own, the rest (and a topic named _other) share _other, and a
// topic keeps its counter.
func TestTopicCountersCapLabels(t *testing.T) {
	tc := newTopicCounters(prometheus.CounterOpts{Name: "m_total"}, prometheus.CounterOpts{Name: "b_total"}, 3)
	for i := range 5 {
		tc.get(fmt.Sprint("t", i)).add(i+1, 10*(i+1))
	}
	tc.get("t0").add(1, 1)
	tc.get("t4").add(1, 1)
	tc.get(OtherLabel).add(1, 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(tc)
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]map[string]float64{}
	for _, f := range fams {
		got[f.GetName()] = map[string]float64{}
		for _, m := range f.GetMetric() {
			got[f.GetName()][m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"t0": 2, "t1": 2, "t2": 3, OtherLabel: 4 + 5 + 1 + 1}, got["m_total"])
	require.Equal(t, map[string]float64{"t0": 11, "t1": 20, "t2": 30, OtherLabel: 40 + 50 + 1 + 1}, got["b_total"])
}

// Group/topic pairs past MaxLabelValues are summed under _other/_other.
func TestGroupLagCapsLabels(t *testing.T) {
	var lags []store.GroupLag
	for i := range MaxLabelValues + 5 {
		lags = append(lags, store.GroupLag{Group: fmt.Sprintf("g%04d", i), Topic: "t", Lag: 2, Committed: 3, Queues: 1})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&scrapeCollector{src: scrapeFuncs{groupLags: func() []store.GroupLag { return lags }}})
	fams, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	require.Len(t, byName["raftmq_group_lag_messages"].GetMetric(), MaxLabelValues+1)
	require.Len(t, byName["raftmq_group_committed_messages_total"].GetMetric(), MaxLabelValues+1)
	v, ok := sample(byName, "raftmq_group_lag_messages", "group", OtherLabel, "topic", OtherLabel)
	require.True(t, ok)
	require.Equal(t, 10.0, v)
	v, _ = sample(byName, "raftmq_group_committed_messages_total", "group", OtherLabel, "topic", OtherLabel)
	require.Equal(t, 15.0, v)
	v, _ = sample(byName, "raftmq_group_lag_messages", "group", "g0999", "topic", "t")
	require.Equal(t, 2.0, v)
}

// The forced retention counter is exported as the store counts it.
func TestForcedUnconsumedCounter(t *testing.T) {
	var n uint64 = 62
	reg := prometheus.NewRegistry()
	reg.MustRegister(&scrapeCollector{src: scrapeFuncs{forcedUnconsumed: func() uint64 { return n }}})
	fams, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	v, ok := sample(byName, "raftmq_retention_forced_unconsumed_messages_total")
	require.True(t, ok)
	require.Equal(t, 62.0, v)
	require.Equal(t, dto.MetricType_COUNTER, byName["raftmq_retention_forced_unconsumed_messages_total"].GetType())
}

// BenchmarkTopicCounter measures the send path's per-topic count: a
// CounterVec label lookup per send against the counter found by name and
// through the send's TopicAux slot.
func BenchmarkTopicCounter(b *testing.B) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "m_total"}, []string{"topic"})
	tc := newTopicCounters(prometheus.CounterOpts{Name: "m_total"}, prometheus.CounterOpts{Name: "b_total"}, MaxLabelValues)
	topics := make([]string, 100)
	for i := range topics {
		topics[i] = fmt.Sprintf("topic-%03d", i)
	}
	b.Run("WithLabelValues", func(b *testing.B) {
		for i := range b.N {
			vec.WithLabelValues(topics[i%len(topics)]).Inc()
		}
	})
	b.Run("byName", func(b *testing.B) {
		for i := range b.N {
			tc.get(topics[i%len(topics)]).add(1, 1000)
		}
	})
	b.Run("Counter", func(b *testing.B) {
		c := vec.WithLabelValues(topics[0])
		for range b.N {
			c.Inc()
		}
	})
}
