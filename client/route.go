package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// Route is a topic's route as the group reports it (GET_ROUTEINFO_BY_TOPIC).
type Route struct {
	Topic      string
	BrokerName string
	// WriteQueues and ReadQueues count the queues producers and consumers
	// use: ids 0..WriteQueues-1 and 0..ReadQueues-1.
	WriteQueues, ReadQueues int
	// Perm holds remoting.Perm* bits (6: read and write).
	Perm int
	// Leader is brokerAddrs["0"], the ready leader's client address, or ""
	// while the group has none (during an election).
	Leader string
	// Addrs maps broker ids to client addresses: 0 is the leader, other
	// nodes appear under their node id.
	Addrs map[int64]string
}

// Route returns topic's route: the cached one unless refresh is set or it
// is older than the cache lifetime (30 s). Fetching asks every known node
// at once and takes the first answer that names a leader. A topic no node
// knows gives an *Error with code TOPIC_NOT_EXIST.
func (c *Client) Route(ctx context.Context, topic string, refresh bool) (Route, error) {
	newer := time.Now().Add(-routeTTL)
	if refresh {
		newer = time.Now()
	}
	r, err := c.route(ctx, topic, newer, false)
	if err != nil {
		return Route{}, err
	}
	out := *r
	out.Addrs = maps.Clone(r.Addrs)
	return out, nil
}

// routeCache holds the routes of the topics in use. Concurrent fetches of
// one topic are merged.
type routeCache struct {
	mu sync.Mutex
	m  map[string]*routeEntry // guarded by mu
}

// routeEntry is one topic's cached route and the fetch in progress.
type routeEntry struct {
	route   *Route    // immutable once stored; nil before the first success
	fetched time.Time // when the fetch that produced route started
	// fetching is non-nil while a fetch runs and closed when it ends;
	// err and errAt then describe a failure.
	fetching chan struct{}
	err      error
	errAt    time.Time
}

func (rc *routeCache) init() { rc.m = make(map[string]*routeEntry) }

// route returns a route of topic fetched no earlier than newer, fetching
// it if needed. With allowStale, a failed fetch falls back to an older
// cached route if the failure was not an answer that the topic does not
// exist.
func (c *Client) route(ctx context.Context, topic string, newer time.Time, allowStale bool) (*Route, error) {
	rc := &c.routes
	for {
		rc.mu.Lock()
		e := rc.m[topic]
		if e == nil {
			e = &routeEntry{}
			rc.m[topic] = e
		}
		if e.route != nil && !e.fetched.Before(newer) {
			r := e.route
			rc.mu.Unlock()
			return r, nil
		}
		if ch := e.fetching; ch != nil {
			rc.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, fmt.Errorf("client: route of %s: %w", topic, ctx.Err())
			}
			rc.mu.Lock()
			r, err, errAt := e.route, e.err, e.errAt
			fresh := r != nil && !e.fetched.Before(newer)
			rc.mu.Unlock()
			switch {
			case fresh:
				return r, nil
			case err != nil && !errAt.Before(newer):
				return staleOr(r, err, allowStale)
			}
			continue // the fetch we waited for started too early
		}
		ch := make(chan struct{})
		e.fetching = ch
		rc.mu.Unlock()

		start := time.Now()
		r, err := c.fetchRoute(ctx, topic)

		rc.mu.Lock()
		if err == nil {
			e.route, e.fetched, e.err = r, start, nil
		} else {
			e.err, e.errAt = err, start
			r = e.route
		}
		e.fetching = nil
		close(ch)
		rc.mu.Unlock()
		if err != nil {
			return staleOr(r, err, allowStale)
		}
		return r, nil
	}
}

// staleOr returns r instead of err if allowed and sensible.
func staleOr(r *Route, err error, allowStale bool) (*Route, error) {
	var e *Error
	if allowStale && r != nil && !(errors.As(err, &e) && e.Code == remoting.TopicNotExist) && !errors.Is(err, ErrClosed) {
		return r, nil
	}
	return nil, err
}

// routeGrace is how long a route fetch waits for an answer naming a
// leader once it has one without.
const routeGrace = 50 * time.Millisecond

// routeAnswer is one node's answer to a route query.
type routeAnswer struct {
	addr  string
	route *Route
	err   error
}

// fetchRoute asks every known node for topic's route at once, bounded by
// RequestTimeout and not by ctx (waiting callers share the result). It
// returns the first route naming a leader, else a route without one, else
// TOPIC_NOT_EXIST if a node answered so, else the first error.
func (c *Client) fetchRoute(ctx context.Context, topic string) (*Route, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel() // ends the queries still running once one has answered
	nodes := c.nodes()
	answers := make(chan routeAnswer, len(nodes))
	for _, addr := range nodes {
		go func() {
			r, err := c.queryRoute(ctx, addr, topic)
			answers <- routeAnswer{addr: addr, route: r, err: err}
		}()
	}
	var (
		leaderless *Route
		notExist   error
		firstErr   error
		grace      <-chan time.Time // runs once some node has answered
	)
collect:
	for range nodes {
		var a routeAnswer
		select {
		case a = <-answers:
		case <-grace:
			break collect
		}
		switch {
		case a.err == nil && a.route.Leader != "":
			c.learnRoute(a.route)
			return a.route, nil
		case a.err == nil:
			if leaderless == nil {
				leaderless = a.route
			}
		default:
			var e *Error
			if errors.As(a.err, &e) && e.Code == remoting.TopicNotExist {
				notExist = a.err
			} else if firstErr == nil {
				firstErr = a.err
			}
		}
		if grace == nil && (leaderless != nil || notExist != nil) {
			// An answer without a leader: give the others a moment to
			// name one, but do not wait out a partitioned node.
			t := time.NewTimer(routeGrace)
			defer t.Stop()
			grace = t.C
		}
	}
	switch {
	case leaderless != nil:
		c.learnRoute(leaderless)
		return leaderless, nil
	case notExist != nil:
		return nil, notExist
	case firstErr == nil:
		return nil, fmt.Errorf("client: route of %s: no nodes: %w", topic, ErrNoRoute)
	}
	return nil, fmt.Errorf("client: route of %s: no node answered (%w): %w", topic, ErrNoRoute, firstErr)
}

// learnRoute records the route's nodes and leader.
func (c *Client) learnRoute(r *Route) {
	addrs := make([]string, 0, len(r.Addrs))
	for _, a := range r.Addrs {
		addrs = append(addrs, a)
	}
	c.learn(addrs...)
	c.setLeader(r.Leader)
}

// queryRoute asks one node for topic's route.
func (c *Client) queryRoute(ctx context.Context, addr, topic string) (*Route, error) {
	h := remoting.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJSONOnly: true}
	resp, _, err := c.invoke(ctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.Encode(), nil), c.timeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, responseError(addr, resp)
	}
	rd, err := remoting.DecodeTopicRouteData(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("client: route of %s from %s: %w: %w", topic, addr, ErrProtocol, err)
	}
	return routeFromData(topic, &rd)
}

// routeFromData converts a route body. A raftmq group has one broker name;
// with several, the first queue data whose broker name has addresses is
// used.
func routeFromData(topic string, rd *remoting.TopicRouteData) (*Route, error) {
	for _, q := range rd.QueueDatas {
		for _, b := range rd.BrokerDatas {
			if b.BrokerName != q.BrokerName {
				continue
			}
			r := &Route{
				Topic:       topic,
				BrokerName:  q.BrokerName,
				WriteQueues: q.WriteQueueNums,
				ReadQueues:  q.ReadQueueNums,
				Perm:        q.Perm,
				Leader:      b.BrokerAddrs[remoting.MasterID],
				Addrs:       maps.Clone(b.BrokerAddrs),
			}
			if r.Addrs == nil {
				r.Addrs = map[int64]string{}
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("client: route of %s lists no queues with brokers: %w", topic, ErrProtocol)
}
