package console

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/admin"
	"github.com/raftmq/raftmq/cluster"
)

// The console's samples: display-only, in memory, never replicated. A
// topic or group is sampled while someone looked at it within watchFor;
// each keeps the samples of the last keepFor.
const (
	watchFor    = 10 * time.Minute
	keepFor     = 10 * time.Minute
	maxWatched  = 200 // topics, and groups, sampled at most
	minSpacing  = time.Second
	rateWindow  = time.Minute // a topic's rate is over its samples of the last minute
	maxPlotLine = 8           // lines of a lag plot: the total and up to 7 topics
)

// topicSample is a topic's sum of queue max offsets at a time.
type topicSample struct {
	at    time.Time
	total int64
}

// groupSample is a group's lag at a time, in total and per topic.
type groupSample struct {
	at      time.Time
	total   int64
	byTopic map[string]int64
}

type watch struct {
	seen time.Time      // last viewed
	cl   *client.Client // the client it was viewed with
}

type sampler struct {
	interval time.Duration

	mu          sync.Mutex
	topics      map[string][]topicSample
	groups      map[string][]groupSample
	watchTopics map[string]watch
	watchGroups map[string]watch
}

func newSampler(interval time.Duration) *sampler {
	return &sampler{interval: interval, topics: map[string][]topicSample{}, groups: map[string][]groupSample{},
		watchTopics: map[string]watch{}, watchGroups: map[string]watch{}}
}

// watchLocked records a view of key, dropping the least recently viewed
// key beyond maxWatched.
func watchLocked(m map[string]watch, key string, cl *client.Client, now time.Time) {
	m[key] = watch{seen: now, cl: cl}
	if len(m) <= maxWatched {
		return
	}
	var oldest string
	var at time.Time
	for k, w := range m {
		if at.IsZero() || w.seen.Before(at) {
			oldest, at = k, w.seen
		}
	}
	delete(m, oldest)
}

// forget drops the watches made with cl (a client being closed).
func (s *sampler) forget(cl *client.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range []map[string]watch{s.watchTopics, s.watchGroups} {
		for k, w := range m {
			if w.cl == cl {
				delete(m, k)
			}
		}
	}
}

// topic records a topic's status (seen on a page or sampled).
func (s *sampler) topic(st cluster.AdminTopicStatus, cl *client.Client, viewed bool, now time.Time) {
	var total int64
	for _, q := range st.Queues {
		total += q.MaxOffset
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if viewed {
		watchLocked(s.watchTopics, st.Topic, cl, now)
	}
	// A sample within minSpacing of the last is dropped (not put in its
	// place, which would let frequent views push the last sample forward
	// for ever).
	ss := s.topics[st.Topic]
	if n := len(ss); n == 0 || now.Sub(ss[n-1].at) >= minSpacing {
		ss = append(ss, topicSample{at: now, total: total})
	}
	s.topics[st.Topic] = trim(ss, now, func(t topicSample) time.Time { return t.at })
}

// group records a group's progress (seen on a page or sampled).
func (s *sampler) group(p cluster.AdminConsumerProgress, cl *client.Client, viewed bool, now time.Time) {
	g := groupSample{at: now, total: p.TotalLag, byTopic: map[string]int64{}}
	for _, q := range p.Queues {
		g.byTopic[q.Topic] += q.Lag
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if viewed {
		watchLocked(s.watchGroups, p.Group, cl, now)
	}
	ss := s.groups[p.Group]
	if n := len(ss); n == 0 || now.Sub(ss[n-1].at) >= minSpacing {
		ss = append(ss, g)
	}
	s.groups[p.Group] = trim(ss, now, func(g groupSample) time.Time { return g.at })
}

func trim[T any](ss []T, now time.Time, at func(T) time.Time) []T {
	i := 0
	for i < len(ss) && now.Sub(at(ss[i])) > keepFor {
		i++
	}
	return ss[i:]
}

// rate is a topic's messages per second over its samples of the last
// rateWindow, and the seconds it covers (0, 0 with fewer than two).
func (s *sampler) rate(topic string, now time.Time) (float64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.topics[topic]
	if len(ss) < 2 {
		return 0, 0
	}
	last := ss[len(ss)-1]
	first := ss[0]
	for _, t := range ss {
		if now.Sub(t.at) <= rateWindow {
			first = t
			break
		}
	}
	if first.at.Equal(last.at) {
		first = ss[len(ss)-2]
	}
	d := last.at.Sub(first.at).Seconds()
	if d <= 0 {
		return 0, 0
	}
	return float64(last.total-first.total) / d, d
}

// topicSeries is a topic's message rate between consecutive samples.
func (s *sampler) topicSeries(topic string) []topicSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]topicSample(nil), s.topics[topic]...)
}

// groupSeries is a group's samples.
func (s *sampler) groupSeries(group string) []groupSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]groupSample(nil), s.groups[group]...)
}

// sampleLoop samples the watched topics and groups every interval.
func (c *Console) sampleLoop() {
	t := time.NewTicker(c.sample.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.sampleOnce(time.Now())
	}
}

func (c *Console) sampleOnce(now time.Time) {
	s := c.sample
	type job struct {
		name string
		cl   *client.Client
	}
	var topics, groups []job
	s.mu.Lock()
	for k, w := range s.watchTopics {
		if now.Sub(w.seen) > watchFor {
			delete(s.watchTopics, k)
			continue
		}
		topics = append(topics, job{k, w.cl})
	}
	for k, w := range s.watchGroups {
		if now.Sub(w.seen) > watchFor {
			delete(s.watchGroups, k)
			continue
		}
		groups = append(groups, job{k, w.cl})
	}
	s.mu.Unlock()
	sort.Slice(topics, func(i, j int) bool { return topics[i].name < topics[j].name })
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	ctx, cancel := context.WithTimeout(context.Background(), c.sample.interval)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, j := range topics {
		st, err := admin.TopicStatus(ctx, j.cl, j.name)
		if err != nil {
			c.log.Debug("console: sample topic", "topic", j.name, "err", err)
			continue
		}
		s.topic(st, j.cl, false, time.Now())
	}
	for _, j := range groups {
		p, err := admin.ConsumerProgress(ctx, j.cl, j.name, "")
		if err != nil {
			c.log.Debug("console: sample group", "group", j.name, "err", err)
			continue
		}
		s.group(p, j.cl, false, time.Now())
	}
}
