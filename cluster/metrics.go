package cluster

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// MaxLabelValues bounds the topics (per-topic counters) and the
// group/topic pairs (lag gauges) a node exports with labels of their own;
// the rest are summed under the label value OtherLabel, so a node with
// 10,000 topics does not export 10,000 series per metric.
const MaxLabelValues = 1000

// OtherLabel is the label value of everything past MaxLabelValues.
const OtherLabel = "_other"

// Metrics are one node's Prometheus metrics. Values that mirror raft and
// store state are read at scrape time (see scrapeFuncs, scrapeCollector).
type Metrics struct {
	Reg *prometheus.Registry

	Sends       *prometheus.CounterVec // by result
	SendLatency prometheus.Histogram   // request in to answer out, seconds
	Fsync       prometheus.Histogram   // one Ready's append + fsync, seconds
	Apply       prometheus.Histogram   // one Store.Apply call, seconds
	Commit      prometheus.Histogram   // leader: proposal to apply, seconds
	BatchSize   prometheus.Histogram   // requests per proposed entry
	Pulls       *prometheus.CounterVec // by result
	Forwarded   prometheus.Counter
	// ForwardDropped: forwarded requests that did not reach the leader or
	// got no answer from it, by reason (handlers.go's drop* constants).
	ForwardDropped *prometheus.CounterVec
	// Delayed, timer, retried and transactional messages (leader).
	ScheduleDelivered prometheus.Counter
	ScheduleLateness  prometheus.Histogram   // due time to proposal, seconds
	TxnEnded          *prometheus.CounterVec // by action
	SendBack          *prometheus.CounterVec // by target: retry, dlq
	// Refused: requests answered with an error by refuse (bad input,
	// access denied, write permission wiped, ...), by answer code.
	Refused *prometheus.CounterVec
	// PullLatency is request in to answer out of a pull (a long poll's
	// hold included); PullBytes the message bytes pulls returned.
	PullLatency prometheus.Histogram
	PullBytes   prometheus.Counter
	// httpConns counts open connections of the HTTP port.
	httpConns atomic.Int64
	// Pop consumption (leader).
	Popped     prometheus.Counter
	PopAcked   prometheus.Counter
	PopRevived *prometheus.CounterVec // by outcome: visible, dlq
	PopDropped prometheus.Counter
	PopEntries prometheus.Counter
	// PopPollWakeups counts long-polling pops' re-checks, by reason.
	PopPollWakeups *prometheus.CounterVec

	// The children of Sends and Pulls, looked up once.
	sendsOK, sendsError                       prometheus.Counter
	pullFound, pullNone, pullRetry, pullMoved prometheus.Counter
	pullError                                 prometheus.Counter
	// Per-topic counters and the scrape-time values.
	topics *topicCounters
	scrape *scrapeCollector
}

// scrapeFuncs are the values a node computes at scrape time; each may be
// nil.
type scrapeFuncs struct {
	gauges        func() map[string]float64
	followerLag   func() map[uint64]uint64 // leader only: entries each follower lacks
	groupLags     func() []store.GroupLag
	leaderChanges func() uint64
	// forcedUnconsumed: messages forced retention deleted unconsumed
	// (store.ForcedUnconsumedMessages).
	forcedUnconsumed func() uint64
	// clusterRefusals: raft streams and frames, and forwarded requests,
	// of another cluster refused.
	clusterRefusals func() (raft, forward uint64)
	// connections: open connections by protocol (remoting: the client
	// port; raft: streams to peers; http).
	connections func() map[string]int
}

// NewMetrics registers the metrics in a fresh registry, with the Go and
// process collectors.
func NewMetrics(src scrapeFuncs) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Reg:   reg,
		Sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_sends_total", Help: "Send requests answered, by result."}, []string{"result"}),
		SendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_send_commit_seconds",
			Help: "Time from a send request to its answer after quorum commit and apply.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}),
		Fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_log_fsync_seconds",
			Help: "Time to append and fsync one raft Ready's entries.", Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}),
		Apply: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_apply_seconds",
			Help: "Time to apply one run of committed entries to consume queues, index and state.", Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18)}),
		Commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_commit_seconds",
			Help: "Leader: time from proposing an entry to the start of its apply (replication, quorum fsync, commit).", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_entry_requests",
			Help: "Send requests packed into one raft entry.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		Pulls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_pulls_total",
			Help: "Pull requests answered, by result: found, none (nothing new), retry, offset_moved, error."}, []string{"result"}),
		Forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_forwarded_total", Help: "Requests forwarded to the leader."}),
		ForwardDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_forward_dropped_total",
			Help: "Requests a follower accepted and failed to carry to the leader, by reason: no_leader (none reachable within the leader wait), timeout and connection (outcome unknown), stopping."}, []string{"reason"}),
		ScheduleDelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_schedule_delivered_total",
			Help: "Delayed and timer messages delivered to their topic (as proposed by this node while leader)."}),
		ScheduleLateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_schedule_lateness_seconds",
			Help: "Time from a delayed message's due time to the proposal of its delivery.", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		TxnEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_transactions_ended_total",
			Help: "Transactions ended through this node while leader, by action (commit, rollback, discard)."}, []string{"action"}),
		Popped:   prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pop_messages_total", Help: "Messages handed out by pops (leader)."}),
		PopAcked: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pop_acked_total", Help: "Popped messages acked (leader; repeated acks not counted)."}),
		PopRevived: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_pop_revived_total",
			Help: "Popped messages whose invisible time passed unacked (leader), by outcome: visible again, or moved to the dead-letter topic."}, []string{"outcome"}),
		PopDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pop_dropped_total",
			Help: "Popped messages, neither acked nor dead-lettered, whose records were dropped because retention deleted the message (leader)."}),
		PopEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pop_entries_total", Help: "Pop entries (pops, acks, changes, revives, drops) proposed (leader)."}),
		PopPollWakeups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_pop_poll_wakeups_total",
			Help: "Re-checks of long-polling pops and notifications, by reason: entry (an applied entry touched the topic), recheck (the periodic one)."}, []string{"reason"}),
		SendBack: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_send_back_total",
			Help: "Messages consumers sent back, by target (retry, dlq)."}, []string{"target"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_requests_refused_total",
			Help: "Client requests refused with an error answer (bad input, access denied, write permission wiped, unknown topic on send, ...), by answer code."}, []string{"code"}),
		PullLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_pull_seconds",
			Help: "Time from a pull request to its answer, a long poll's hold included.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20)}),
		PullBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pull_bytes_total",
			Help: "Message bytes returned by pulls (the answers' bodies)."}),
	}
	m.sendsOK, m.sendsError = m.Sends.WithLabelValues("ok"), m.Sends.WithLabelValues("error")
	m.pullFound, m.pullNone, m.pullRetry = m.Pulls.WithLabelValues("found"), m.Pulls.WithLabelValues("none"), m.Pulls.WithLabelValues("retry")
	m.pullMoved, m.pullError = m.Pulls.WithLabelValues("offset_moved"), m.Pulls.WithLabelValues("error")
	for _, r := range []string{dropNoLeader, dropTimeout, dropConnection, dropStopping} {
		m.ForwardDropped.WithLabelValues(r) // exported at 0 before the first drop
	}
	m.topics = newTopicCounters(prometheus.CounterOpts{Name: "raftmq_topic_messages_total",
		Help: "Messages stored by sends this node answered as leader, by topic (duplicates of stored sends not counted; topics past the first 1,000 as _other)."},
		prometheus.CounterOpts{Name: "raftmq_topic_message_bytes_total",
			Help: "Bytes of the messages counted by raftmq_topic_messages_total (stored record sizes), by topic."}, MaxLabelValues)
	m.scrape = &scrapeCollector{src: src}
	reg.MustRegister(m.Sends, m.SendLatency, m.Fsync, m.Apply, m.Commit, m.BatchSize, m.Pulls, m.Forwarded, m.ForwardDropped,
		m.ScheduleDelivered, m.ScheduleLateness, m.TxnEnded, m.SendBack, m.topics, m.scrape,
		m.Refused, m.PullLatency, m.PullBytes, buildInfo(),
		m.Popped, m.PopAcked, m.PopRevived, m.PopDropped, m.PopEntries, m.PopPollWakeups,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// sent counts the messages of a successful send under their topic.
func (m *Metrics) sent(res []store.MessageResult) {
	if len(res) == 0 || res[0].Duplicate {
		return
	}
	var n, size int
	for i := range res {
		if !res[i].Duplicate && res[i].Err == nil {
			n++
			size += int(res[i].Size)
		}
	}
	m.topics.of(&res[0]).add(n, size)
}

// forwardDropped counts a forwarded request dropped for reason.
func (m *Metrics) forwardDropped(reason string) {
	m.ForwardDropped.WithLabelValues(reason).Inc()
}

// pulled counts a pull's answer by result, its time since start and its
// bytes, and returns it.
func (m *Metrics) pulled(resp *remoting.Command, start time.Time) *remoting.Command {
	if resp == nil {
		return nil // the client went away during a long poll
	}
	m.PullLatency.Observe(time.Since(start).Seconds())
	switch resp.Code {
	case remoting.Success:
		m.pullFound.Inc()
		m.PullBytes.Add(float64(len(resp.Body)))
	case remoting.PullNotFound:
		m.pullNone.Inc()
	case remoting.PullRetryImmediately:
		m.pullRetry.Inc()
	case remoting.PullOffsetMoved:
		m.pullMoved.Inc()
	default:
		m.pullError.Inc()
	}
	return resp
}

// applied observes one Store.Apply call that started at start.
func (m *Metrics) applied(start time.Time) { m.Apply.Observe(time.Since(start).Seconds()) }

// topicCounters keeps the per-topic counters of sent messages and bytes
// and exports them at scrape time as raftmq_topic_messages_total and
// raftmq_topic_message_bytes_total. A topic's two counts share one small
// object, found once per send (through the send's store.MessageResult.
// TopicAux, or by name): with a thousand topics sent to round robin, a
// CounterVec's children (a label hash and lookup per send, then an object
// per counter) were three or four cache misses a send. The first max
// topics seen get a label of their own, in a copy-on-write map read
// without a lock; every later topic, and one named OtherLabel, shares the
// OtherLabel counter. Counters of deleted topics stay until restart.
type topicCounters struct {
	max       int
	labelled  atomic.Pointer[map[string]*topicCounter]
	other     topicCounter
	otherUsed atomic.Bool
	mu        sync.Mutex

	msgsDesc, bytesDesc *prometheus.Desc
}

// topicCounter is one topic's (or OtherLabel's) counts.
type topicCounter struct {
	msgs, bytes atomic.Uint64
	// owner is the topicCounters that made it: a TopicAux slot set by
	// another node's metrics in the same process is not used.
	owner *topicCounters
}

func newTopicCounters(msgs, bytes prometheus.CounterOpts, max int) *topicCounters {
	t := &topicCounters{max: max,
		msgsDesc:  prometheus.NewDesc(msgs.Name, msgs.Help, []string{"topic"}, nil),
		bytesDesc: prometheus.NewDesc(bytes.Name, bytes.Help, []string{"topic"}, nil)}
	t.other.owner = t
	t.labelled.Store(&map[string]*topicCounter{})
	return t
}

// add counts n messages of size bytes in all to c.
func (c *topicCounter) add(n, size int) {
	c.msgs.Add(uint64(n))
	c.bytes.Add(uint64(size))
}

// of returns the counter of r's topic: the one cached in its TopicAux
// slot, or by name (then cached there).
func (t *topicCounters) of(r *store.MessageResult) *topicCounter {
	aux := r.TopicAux()
	if aux == nil {
		return t.get(r.Topic)
	}
	if c, ok := aux.Load().(*topicCounter); ok && c.owner == t {
		return c
	}
	c := t.get(r.Topic)
	aux.Store(c)
	return c
}

func (t *topicCounters) get(topic string) *topicCounter {
	cur := *t.labelled.Load()
	if c, ok := cur[topic]; ok {
		return c
	}
	// The labelled map only grows: once full, it stays full.
	if len(cur) >= t.max || topic == OtherLabel {
		return t.useOther()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur = *t.labelled.Load()
	if c, ok := cur[topic]; ok {
		return c
	}
	if len(cur) >= t.max {
		return t.useOther()
	}
	next := make(map[string]*topicCounter, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	c := &topicCounter{owner: t}
	next[topic] = c
	t.labelled.Store(&next)
	return c
}

// useOther returns the OtherLabel counter, exported from now on.
func (t *topicCounters) useOther() *topicCounter {
	if !t.otherUsed.Load() {
		t.otherUsed.Store(true)
	}
	return &t.other
}

func (t *topicCounters) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.msgsDesc
	ch <- t.bytesDesc
}

func (t *topicCounters) Collect(ch chan<- prometheus.Metric) {
	emit := func(topic string, c *topicCounter) {
		ch <- prometheus.MustNewConstMetric(t.msgsDesc, prometheus.CounterValue, float64(c.msgs.Load()), topic)
		ch <- prometheus.MustNewConstMetric(t.bytesDesc, prometheus.CounterValue, float64(c.bytes.Load()), topic)
	}
	for topic, c := range *t.labelled.Load() {
		emit(topic, c)
	}
	if t.otherUsed.Load() {
		emit(OtherLabel, &t.other)
	}
}

// scrapeCollector exports the values computed at scrape time: raft and
// store gauges, the leader changes counter, follower lag and group lag.
type scrapeCollector struct{ src scrapeFuncs }

var gaugeHelp = map[string]string{
	"raftmq_raft_term":                       "Current raft term.",
	"raftmq_raft_leader":                     "ID of the node this node believes leads (0: none).",
	"raftmq_raft_is_leader":                  "1 if this node leads.",
	"raftmq_raft_commit_index":               "Raft commit index.",
	"raftmq_applied_index":                   "Index applied to consume queues, index and bbolt.",
	"raftmq_log_first_index":                 "First index in the local log (retention moves it).",
	"raftmq_log_last_index":                  "Last index in the local log.",
	"raftmq_commitlog_bytes":                 "Bytes of commitlog segments on disk.",
	"raftmq_disk_used_ratio":                 "Used fraction of the data file system at the last disk check.",
	"raftmq_disk_full":                       "1 while sends are refused because the disk is above its full ratio.",
	"raftmq_disk_free_bytes":                 "Free bytes of the data file system at the last check.",
	"raftmq_disk_stalled":                    "1 while raft waits for disk space to write.",
	"raftmq_pop_in_flight":                   "Popped messages neither acked nor dead-lettered, over every group and queue.",
	"raftmq_disk_clean_ratio":                "Used fraction above which expired segments are deleted at any hour (--disk-clean-ratio).",
	"raftmq_disk_force_clean_ratio":          "Used fraction above which the oldest segments are deleted even if not expired (--disk-force-clean-ratio).",
	"raftmq_disk_full_ratio":                 "Used fraction above which sends are refused (--disk-full-ratio).",
	"raftmq_retention_file_reserved_seconds": "Age after which a segment is expired (--file-reserved-time).",
	"raftmq_raft_voters":                     "Voting members in the configuration this node knows.",
	"raftmq_raft_followers_active":           "Leader only: followers heard from within an election timeout.",
	"raftmq_raft_leader_ready":               "1 if this node leads and has applied everything of earlier terms.",
}

var (
	leaderChangesDesc = prometheus.NewDesc("raftmq_raft_leader_changes_total",
		"Leaders this node learnt of since it started (one per term with a known leader).", nil, nil)
	forcedUnconsumedDesc = prometheus.NewDesc("raftmq_retention_forced_unconsumed_messages_total",
		"Messages deleted by forced retention (disk above the force-clean ratio, segments deleted before they expired) "+
			"that a consumer group with an offset in their queue had not consumed, since the node started (the log names the groups).", nil, nil)
	clusterRefusedDesc = prometheus.NewDesc("raftmq_cluster_id_refused_total",
		"Raft streams and frames (source=raft) and forwarded requests (source=forward) refused because they came from another cluster (another group's cluster ID).", []string{"source"}, nil)
	followerLagDesc = prometheus.NewDesc("raftmq_raft_follower_lag_entries",
		"Leader only: log entries a follower does not have yet (leader's last index minus the follower's match index).", []string{"follower"}, nil)
	groupCommittedDesc = prometheus.NewDesc("raftmq_group_committed_messages_total",
		"Sum of a consumer group's committed offsets per topic: messages the group consumed and committed (its rate is the group's consume rate; "+
			"an offset reset back shows as a counter reset).", []string{"group", "topic"}, nil)
	groupLagDesc = prometheus.NewDesc("raftmq_group_lag_messages",
		"Messages stored after a consumer group's committed offsets, per group and topic, over the queues the group committed in "+
			"(pairs past the first 1,000 summed as _other/_other).", []string{"group", "topic"}, nil)
	gaugeDescs = func() map[string]*prometheus.Desc {
		out := map[string]*prometheus.Desc{}
		for name, help := range gaugeHelp {
			out[name] = prometheus.NewDesc(name, help, nil, nil)
		}
		return out
	}()
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range gaugeDescs {
		ch <- d
	}
	ch <- leaderChangesDesc
	ch <- forcedUnconsumedDesc
	ch <- clusterRefusedDesc
	ch <- followerLagDesc
	ch <- groupLagDesc
	ch <- groupCommittedDesc
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.gauges != nil {
		for name, v := range c.src.gauges() {
			if d, ok := gaugeDescs[name]; ok {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
			}
		}
	}
	if c.src.leaderChanges != nil {
		ch <- prometheus.MustNewConstMetric(leaderChangesDesc, prometheus.CounterValue, float64(c.src.leaderChanges()))
	}
	if c.src.forcedUnconsumed != nil {
		ch <- prometheus.MustNewConstMetric(forcedUnconsumedDesc, prometheus.CounterValue, float64(c.src.forcedUnconsumed()))
	}
	if c.src.clusterRefusals != nil {
		raft, forward := c.src.clusterRefusals()
		ch <- prometheus.MustNewConstMetric(clusterRefusedDesc, prometheus.CounterValue, float64(raft), "raft")
		ch <- prometheus.MustNewConstMetric(clusterRefusedDesc, prometheus.CounterValue, float64(forward), "forward")
	}
	if c.src.connections != nil {
		for proto, n := range c.src.connections() {
			ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(n), proto)
		}
	}
	if c.src.followerLag != nil {
		for id, lag := range c.src.followerLag() {
			ch <- prometheus.MustNewConstMetric(followerLagDesc, prometheus.GaugeValue, float64(lag), strconv.FormatUint(id, 10))
		}
	}
	if c.src.groupLags != nil {
		lags := c.src.groupLags()
		var other, otherCommitted int64
		for i, g := range lags {
			if i >= MaxLabelValues {
				other += g.Lag
				otherCommitted += g.Committed
				continue
			}
			ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(g.Lag), g.Group, g.Topic)
			ch <- prometheus.MustNewConstMetric(groupCommittedDesc, prometheus.CounterValue, float64(g.Committed), g.Group, g.Topic)
		}
		if len(lags) > MaxLabelValues {
			ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(other), OtherLabel, OtherLabel)
			ch <- prometheus.MustNewConstMetric(groupCommittedDesc, prometheus.CounterValue, float64(otherCommitted), OtherLabel, OtherLabel)
		}
	}
}

// RetentionStatus is the retention part of /status: the settings the
// node's store runs with.
type RetentionStatus struct {
	FileReservedTime string  `json:"fileReservedTime"`
	DeleteWhen       []int   `json:"deleteWhen"`
	CleanRatio       float64 `json:"diskCleanRatio"`
	ForceRatio       float64 `json:"diskForceCleanRatio"`
	FullRatio        float64 `json:"diskFullRatio"`
}

func retentionStatus(r store.RetentionConfig) RetentionStatus {
	return RetentionStatus{FileReservedTime: r.FileReservedTime.String(), DeleteWhen: r.DeleteWhen,
		CleanRatio: r.CleanRatio, ForceRatio: r.ForceRatio, FullRatio: r.FullRatio}
}

var connectionsDesc = prometheus.NewDesc("raftmq_connections", "Open connections by protocol: remoting (the client port, TLS or not), raft (streams to peers that are up), http.", []string{"protocol"}, nil)

// buildInfo is raftmq_build_info: 1, labelled with the binary's module
// version, VCS revision and Go version.
func buildInfo() prometheus.Collector {
	version, revision := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "raftmq_build_info", Help: "1, labelled with the build's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}
