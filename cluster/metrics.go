package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are one node's Prometheus metrics. Gauges that mirror raft and
// store state are read at scrape time (see Broker.collect).
type Metrics struct {
	Reg *prometheus.Registry

	Sends       *prometheus.CounterVec // by result
	SendLatency prometheus.Histogram   // request in to answer out, seconds
	Fsync       prometheus.Histogram   // one Ready's append + fsync, seconds
	BatchSize   prometheus.Histogram   // requests per proposed entry
	Pulls       prometheus.Counter
	Forwarded   prometheus.Counter
	// Delayed, timer, retried and transactional messages (leader).
	ScheduleDelivered prometheus.Counter
	ScheduleLateness  prometheus.Histogram   // due time to proposal, seconds
	TxnEnded          *prometheus.CounterVec // by action
	SendBack          *prometheus.CounterVec // by target: retry, dlq

	// The two Sends children, looked up once.
	sendsOK, sendsError prometheus.Counter
}

// NewMetrics registers the metrics in a fresh registry, with the Go and
// process collectors.
func NewMetrics(gauges func() map[string]float64) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Reg:   reg,
		Sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_sends_total", Help: "Send requests answered, by result."}, []string{"result"}),
		SendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_send_commit_seconds",
			Help: "Time from a send request to its answer after quorum commit and apply.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}),
		Fsync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_log_fsync_seconds",
			Help: "Time to append and fsync one raft Ready's entries.", Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16)}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_entry_requests",
			Help: "Send requests packed into one raft entry.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		Pulls:     prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_pulls_total", Help: "Pull requests answered."}),
		Forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_forwarded_total", Help: "Requests forwarded to the leader."}),
		ScheduleDelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_schedule_delivered_total",
			Help: "Delayed and timer messages delivered to their topic (as proposed by this node while leader)."}),
		ScheduleLateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_schedule_lateness_seconds",
			Help: "Time from a delayed message's due time to the proposal of its delivery.", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		TxnEnded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_transactions_ended_total",
			Help: "Transactions ended through this node while leader, by action (commit, rollback, discard)."}, []string{"action"}),
		SendBack: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_send_back_total",
			Help: "Messages consumers sent back, by target (retry, dlq)."}, []string{"target"}),
	}
	m.sendsOK, m.sendsError = m.Sends.WithLabelValues("ok"), m.Sends.WithLabelValues("error")
	reg.MustRegister(m.Sends, m.SendLatency, m.Fsync, m.BatchSize, m.Pulls, m.Forwarded,
		m.ScheduleDelivered, m.ScheduleLateness, m.TxnEnded, m.SendBack,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	if gauges != nil {
		reg.MustRegister(&gaugeCollector{f: gauges})
	}
	return m
}

// gaugeCollector exports values computed at scrape time.
type gaugeCollector struct{ f func() map[string]float64 }

var gaugeHelp = map[string]string{
	"raftmq_raft_term":         "Current raft term.",
	"raftmq_raft_leader":       "ID of the node this node believes leads (0: none).",
	"raftmq_raft_is_leader":    "1 if this node leads.",
	"raftmq_raft_commit_index": "Raft commit index.",
	"raftmq_applied_index":     "Index applied to consume queues, index and bbolt.",
	"raftmq_log_last_index":    "Last index in the local log.",
	"raftmq_disk_bytes":        "Bytes of commitlog segments on disk.",
	"raftmq_disk_used_ratio":   "Used fraction of the data file system.",
}

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for name, help := range gaugeHelp {
		ch <- prometheus.NewDesc(name, help, nil, nil)
	}
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	for name, v := range g.f() {
		help, ok := gaugeHelp[name]
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v)
	}
}
