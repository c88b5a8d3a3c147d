package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Defaults for zero Options fields.
const (
	DefaultRequestTimeout = 5 * time.Second
	// routeTTL is how long a cached route is used before it is fetched
	// again on the next use. The Go and Java clients refresh every 30 s.
	routeTTL = 30 * time.Second
	// adminAttempts bounds the attempts of leader-only requests other than
	// sends (offset commits, topic creation, admin commands).
	adminAttempts = 4
	// adminBackoff is the first backoff between those attempts; it doubles.
	adminBackoff = 50 * time.Millisecond
)

// Options configure a Client.
type Options struct {
	// Addrs are client addresses ("host:port") of any nodes of the raft
	// group. More are learned from routes. At least one is required.
	Addrs []string
	// RequestTimeout bounds one attempt of a request (a long-polled pull
	// gets its hold time on top); 0 means DefaultRequestTimeout. It also
	// bounds a dial.
	RequestTimeout time.Duration
	// Dial opens TCP connections; nil uses a net.Dialer. The chaos harness
	// uses it to bind source addresses.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger gets connection and retry events; nil discards them.
	Logger *slog.Logger
	// MaxFrame limits frames in both directions; 0 means
	// remoting.DefaultMaxFrame (16 MiB).
	MaxFrame int

	// AccessKey and SecretKey, if set (both or neither), are the
	// credentials of an account of the group's ACL (RocketMQ's plain ACL):
	// every request the client sends then carries the ext fields
	// AccessKey, Signature (acl.Sign over its final ext fields and body)
	// and, if SecurityToken is set, SecurityToken. See "Credentials" in
	// the package documentation.
	AccessKey     string
	SecretKey     string
	SecurityToken string

	// TLS, if set, makes every connection TLS (after Dial): the nodes'
	// client ports must serve TLS (--tls-mode permissive or enforcing).
	// Without ServerName, a node's certificate must hold the host of its
	// address. LoadTLS builds one from files.
	TLS *tls.Config
}

// Client talks to one raftmq raft group: a pool with one connection per
// node address (redialled when it dies), a route cache per topic, and the
// address of the node believed to lead. Its methods are safe for
// concurrent use. Producers and consumers are made from it and share its
// connections.
type Client struct {
	timeout time.Duration
	log     *slog.Logger
	pool    *pool
	ids     *idGenerator
	routes  routeCache

	// leader is the client address of the node believed to lead, or "".
	// Set from routes (brokerAddrs["0"]) and from SERVICE_NOT_AVAILABLE
	// remarks; cleared when a request to it fails at the transport level.
	leader atomic.Pointer[string]
	// next rotates through nodes when no leader is known.
	next atomic.Uint32

	mu struct {
		sync.Mutex
		// nodes are the known client addresses: Options.Addrs and every
		// address seen in a route or a leader hint. Never shrinks.
		nodes []string
		// notify holds, per consumer group, the functions the push
		// consumers registered for NOTIFY_CONSUMER_IDS_CHANGED and
		// RESET_CONSUMER_CLIENT_OFFSET, by id.
		notify   map[string]map[uint64]func(groupNotice)
		notifyID uint64
		// checkers holds, per producer group, the TransactionProducer
		// that answers CHECK_TRANSACTION_STATE for it (at most one).
		checkers map[string]*TransactionProducer
	}
	closed atomic.Bool
}

// New returns a Client for the group whose nodes include opts.Addrs. It
// does not connect; the first request does.
func New(opts Options) (*Client, error) {
	if len(opts.Addrs) == 0 {
		return nil, errors.New("client: Options.Addrs is empty")
	}
	for _, a := range opts.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("client: bad address %q: %w", a, err)
		}
	}
	var cred *acl.Credentials
	switch {
	case opts.AccessKey != "" && opts.SecretKey != "":
		cred = &acl.Credentials{AccessKey: opts.AccessKey, SecretKey: opts.SecretKey, SecurityToken: opts.SecurityToken}
	case opts.AccessKey != "" || opts.SecretKey != "" || opts.SecurityToken != "":
		return nil, errors.New("client: Options.AccessKey and Options.SecretKey go together")
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ids, err := newIDGenerator()
	if err != nil {
		return nil, err
	}
	c := &Client{
		timeout: opts.RequestTimeout,
		log:     log,
		ids:     ids,
	}
	dial := opts.Dial
	if opts.TLS != nil {
		dial = remoting.TLSDialer(dial, opts.TLS)
	}
	c.pool = newPool(remoting.Options{MaxFrame: opts.MaxFrame, Dial: dial, Logger: log}, opts.RequestTimeout, cred, c.serveRequest)
	c.routes.init()
	c.mu.nodes = slices.Compact(slices.Sorted(slices.Values(opts.Addrs)))
	return c, nil
}

// Close closes every connection. Requests in flight fail (writes with
// ErrIndeterminate), and later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.pool.close()
	return nil
}

// serveRequest handles a request a broker sends on the pool's connection
// to addr (remoting.Options.OnRequest; its own goroutine). Three are
// served:
//
//   - NOTIFY_CONSUMER_IDS_CHANGED wakes the push consumers of the group
//     named;
//   - RESET_CONSUMER_CLIENT_OFFSET (an operator reset the group's offsets
//     by time) restarts those consumers' queues of the topic at the new
//     offsets;
//   - CHECK_TRANSACTION_STATE goes to the TransactionProducer of the
//     half message's producer group (PGROUP), which answers addr with an
//     END_TRANSACTION (txproducer.go).
//
// RocketMQ brokers send both one-way; they are answered SUCCESS
// otherwise. Other requests are answered REQUEST_CODE_NOT_SUPPORTED unless
// one-way.
func (c *Client) serveRequest(addr string, req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.NotifyConsumerIDsChanged:
		return c.serveNotify(req)
	case remoting.ResetConsumerClientOffset:
		return c.serveReset(req)
	case remoting.CheckTransactionState:
		return c.serveCheckTransaction(addr, req)
	}
	if req.IsOneway() {
		return nil
	}
	return remoting.NewNotSupportedResponse(req)
}

// serveNotify handles NOTIFY_CONSUMER_IDS_CHANGED.
func (c *Client) serveNotify(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeNotifyConsumerIDsChangedRequestHeader(req.ExtFields)
	if err != nil {
		c.log.Warn("client: bad NOTIFY_CONSUMER_IDS_CHANGED", "err", err)
		if req.IsOneway() {
			return nil
		}
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	c.notifyGroup(h.ConsumerGroup, groupNotice{})
	if req.IsOneway() {
		return nil
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// groupNotice is what a broker told a consumer group's clients: its
// consumers changed (reset nil), or its offsets were reset.
type groupNotice struct {
	reset *offsetReset
}

// offsetReset is a RESET_CONSUMER_CLIENT_OFFSET: the group's new offsets
// of topic's queues, by queue id.
type offsetReset struct {
	topic   string
	offsets map[int32]int64
}

// notifyGroup runs the functions registered for group with n.
func (c *Client) notifyGroup(group string, n groupNotice) {
	c.mu.Lock()
	fns := make([]func(groupNotice), 0, len(c.mu.notify[group]))
	for _, f := range c.mu.notify[group] {
		fns = append(fns, f)
	}
	c.mu.Unlock()
	for _, f := range fns {
		f(n)
	}
}

// serveReset handles RESET_CONSUMER_CLIENT_OFFSET, which a broker sends
// the online consumers of a group after an operator reset its offsets of a
// topic by time (the offsets are already committed through the log).
func (c *Client) serveReset(req *remoting.Command) *remoting.Command {
	h, err := remoting.DecodeResetOffsetRequestHeader(req.ExtFields)
	var table map[remoting.MessageQueue]int64
	if err == nil {
		table, err = remoting.DecodeResetOffsetBody(req.Body)
	}
	if err != nil {
		c.log.Warn("client: bad RESET_CONSUMER_CLIENT_OFFSET", "err", err)
		if req.IsOneway() {
			return nil
		}
		return remoting.NewResponse(req, remoting.InvalidParameter, err.Error())
	}
	r := &offsetReset{topic: h.Topic, offsets: map[int32]int64{}}
	for mq, off := range table {
		if mq.Topic == h.Topic {
			r.offsets[mq.QueueID] = off
		}
	}
	c.log.Info("client: the broker reset a group's offsets", "group", h.Group, "topic", h.Topic, "queues", len(r.offsets))
	c.notifyGroup(h.Group, groupNotice{reset: r})
	if req.IsOneway() {
		return nil
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// onNotify registers f to run (on a connection's request goroutine; it
// must not block) whenever a broker notifies that group's consumers
// changed or its offsets were reset. The returned function unregisters it.
func (c *Client) onNotify(group string, f func(groupNotice)) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.notify == nil {
		c.mu.notify = map[string]map[uint64]func(groupNotice){}
	}
	if c.mu.notify[group] == nil {
		c.mu.notify[group] = map[uint64]func(groupNotice){}
	}
	c.mu.notifyID++
	id := c.mu.notifyID
	c.mu.notify[group][id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.mu.notify[group], id)
		if len(c.mu.notify[group]) == 0 {
			delete(c.mu.notify, group)
		}
	}
}

// NewMsgID returns a fresh UNIQ_KEY: 32 upper-case hex digits, unique per
// call across clients. Producers set one on every message that has none;
// callers that retry a Send themselves set their own, so that the broker
// recognises the retry.
func (c *Client) NewMsgID() string { return c.ids.next() }

// Invoke sends req to addr and waits for the response, ctx, or
// RequestTimeout, whichever comes first. Any response is returned as it
// is, whatever its code. It is the low-level escape hatch: no retries, no
// leader following. A failure after the request was handed to the
// connection wraps ErrIndeterminate. It sets req's opaque and flags, unless
// the client has credentials: then it sends a signed copy and leaves req
// as it is.
func (c *Client) Invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	resp, written, err := c.invoke(ctx, addr, req, c.timeout)
	if err != nil && written {
		err = indeterminate(err)
	}
	return resp, err
}

// invoke is one attempt with an explicit timeout. written reports whether
// a failed request had been handed to the connection (so it may have
// reached the broker): timeouts and lost connections. A timeout evicts the
// connection (see pool.evict).
func (c *Client) invoke(ctx context.Context, addr string, req *remoting.Command, timeout time.Duration) (resp *remoting.Command, written bool, err error) {
	if c.closed.Load() {
		return nil, false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("client: request code %d to %s: %w", req.Code, addr, err)
	}
	conn, err := c.pool.get(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	resp, err = conn.Invoke(actx, req)
	timedOut := actx.Err() != nil && ctx.Err() == nil
	cancel()
	if err == nil {
		return resp, false, nil
	}
	if timedOut {
		c.pool.evict(addr, conn)
	}
	err = fmt.Errorf("client: request code %d to %s: %w", req.Code, addr, err)
	if c.closed.Load() {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return nil, !unsent(err), err
}

// leaderAddr returns the believed leader's address, or "".
func (c *Client) leaderAddr() string {
	if p := c.leader.Load(); p != nil {
		return *p
	}
	return ""
}

// setLeader records addr as the leader and as a known node.
func (c *Client) setLeader(addr string) {
	if addr == "" {
		return
	}
	if p := c.leader.Load(); p == nil || *p != addr {
		c.leader.Store(&addr)
		c.log.Debug("client: leader", "addr", addr)
	}
	c.learn(addr)
}

// leaderFailed forgets addr as the leader, if it still is.
func (c *Client) leaderFailed(addr string) {
	if p := c.leader.Load(); p != nil && *p == addr {
		c.leader.CompareAndSwap(p, nil)
	}
}

// learn adds addresses to the known nodes.
func (c *Client) learn(addrs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range addrs {
		if a != "" && !slices.Contains(c.mu.nodes, a) {
			c.mu.nodes = append(c.mu.nodes, a)
		}
	}
}

// nodes returns a copy of the known node addresses.
// heartbeatAll sends the heartbeat body to every node at once; it succeeds
// when any node accepts it (the leader among them registers the group).
func (c *Client) heartbeatAll(ctx context.Context, body []byte) error {
	nodes := c.nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, addr := range nodes {
		wg.Go(func() {
			resp, _, err := c.invoke(ctx, addr, remoting.NewRequest(remoting.HeartBeat, nil, body), c.timeout)
			if err == nil && resp.Code != remoting.Success {
				err = responseError(addr, resp)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("heartbeat: no node accepted it: %w", errors.Join(errs...))
}

func (c *Client) nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.nodes)
}

// anyNode returns a known node, rotating between calls, skipping avoid
// when there is another.
func (c *Client) anyNode(avoid string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.mu.nodes)
	for range 2 {
		a := c.mu.nodes[int(c.next.Add(1)-1)%n]
		if a != avoid || n == 1 {
			return a
		}
	}
	return c.mu.nodes[0]
}

// writeTarget returns where to send a leader-only request: the believed
// leader, else any node (a follower forwards the request, or answers
// SERVICE_NOT_AVAILABLE naming the leader). avoid is an address that just
// failed.
func (c *Client) writeTarget(avoid string) string {
	if a := c.leaderAddr(); a != "" && a != avoid {
		return a
	}
	return c.anyNode(avoid)
}

// backoff returns the pause before attempt n (n >= 1): base doubled per
// attempt, capped at max, with "equal jitter" (half fixed, half random) so
// that many retrying senders spread out.
func backoff(n int, base, limit time.Duration, rnd func(int64) int64) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rnd(int64(d-half)))
}

// sleep waits for d or ctx.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// invokeLeader sends a leader-only request, made afresh by mk for each
// attempt, following leader hints. It retries answers that are retryable
// and definite (SERVICE_NOT_AVAILABLE, NO_PERMISSION, SYSTEM_BUSY), and
// connection failures before the request was written; if idempotent, it
// also retries indeterminate outcomes (timeouts, lost connections,
// SYSTEM_ERROR). It returns the response for any other code, for the
// caller to interpret, or the last error; an error after an indeterminate
// attempt wraps ErrIndeterminate.
func (c *Client) invokeLeader(ctx context.Context, mk func() *remoting.Command, idempotent bool) (*remoting.Command, string, error) {
	return c.invokeLeaderTimeout(ctx, mk, idempotent, c.timeout)
}

// invokeLeaderTimeout is invokeLeader with timeout for each attempt (a
// long-polling request waits longer than the client's timeout).
func (c *Client) invokeLeaderTimeout(ctx context.Context, mk func() *remoting.Command, idempotent bool, timeout time.Duration) (*remoting.Command, string, error) {
	var (
		lastErr error
		unknown bool // some attempt had an indeterminate outcome
		avoid   string
		rnd     = c.ids.jitter
	)
	for attempt := 1; attempt <= adminAttempts; attempt++ {
		addr := c.writeTarget(avoid)
		resp, written, err := c.invoke(ctx, addr, mk(), timeout)
		retry := false
		switch {
		case err != nil:
			lastErr = err
			c.leaderFailed(addr)
			avoid = addr
			if written {
				unknown = true
				retry = idempotent && ctx.Err() == nil
			} else {
				retry = !errors.Is(err, ErrClosed) && ctx.Err() == nil
			}
		case resp.Code == remoting.Success:
			return resp, addr, nil
		default:
			e := responseError(addr, resp)
			lastErr = e
			switch {
			case e.Code == remoting.ServiceNotAvailable:
				if hint, ok := e.LeaderHint(); ok && hint != addr {
					c.setLeader(hint)
					retry = true
					continue
				}
				c.leaderFailed(addr)
				avoid = addr
				retry = true
			case e.Code == remoting.SystemBusy, e.Code == remoting.NoPermission:
				retry = true
			case e.Indeterminate():
				unknown = true
				retry = idempotent
				c.leaderFailed(addr)
			default:
				return resp, addr, nil
			}
		}
		if !retry || attempt == adminAttempts {
			break
		}
		if err := sleep(ctx, backoff(attempt, adminBackoff, time.Second, rnd)); err != nil {
			lastErr = fmt.Errorf("%w (after: %w)", err, lastErr)
			break
		}
	}
	if unknown {
		return nil, "", indeterminate(lastErr)
	}
	return nil, "", lastErr
}
