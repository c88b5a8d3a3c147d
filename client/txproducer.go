package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// LocalTransactionState is a producer's verdict on a transaction's local
// part: whether the half message should be committed (delivered to its
// consumers), rolled back (discarded), or is not known yet.
type LocalTransactionState int

const (
	// Unknown leaves the half message pending: the broker asks again
	// later (CHECK_TRANSACTION_STATE). It is the zero value.
	Unknown LocalTransactionState = iota
	// CommitMessage makes the half message visible to consumers.
	CommitMessage
	// RollbackMessage discards the half message.
	RollbackMessage
)

func (s LocalTransactionState) String() string {
	switch s {
	case CommitMessage:
		return "COMMIT_MESSAGE"
	case RollbackMessage:
		return "ROLLBACK_MESSAGE"
	case Unknown:
		return "UNKNOW" // sic, as RocketMQ spells it
	}
	return fmt.Sprintf("LocalTransactionState(%d)", int(s))
}

// commitOrRollback is the END_TRANSACTION code of a state.
func (s LocalTransactionState) commitOrRollback() int32 {
	switch s {
	case CommitMessage:
		return remoting.TransactionCommitType
	case RollbackMessage:
		return remoting.TransactionRollbackType
	}
	return remoting.TransactionNotType
}

// TransactionListener runs and checks a TransactionProducer's local
// transactions. Both methods may be called concurrently; a panic counts as
// Unknown (and is logged).
type TransactionListener interface {
	// ExecuteLocalTransaction runs the local transaction of a half
	// message that the broker has stored: m is the message as sent, with
	// its UNIQ_KEY (the transaction id), TRAN_MSG and PGROUP properties.
	// It runs in the SendMessageInTransaction caller with its ctx.
	ExecuteLocalTransaction(ctx context.Context, m *Message) LocalTransactionState
	// CheckLocalTransaction answers a broker's question about a half
	// message still pending (its transaction ended Unknown, or its
	// END_TRANSACTION was lost): m is the half message as stored, with its
	// real topic. It runs on a goroutine of its own; ctx ends at Shutdown.
	CheckLocalTransaction(ctx context.Context, m *MessageExt) LocalTransactionState
}

// TransactionProducerOptions configure a TransactionProducer.
type TransactionProducerOptions struct {
	// Producer configures the half-message sends. Its Group is required:
	// the broker sends its check-backs to the producers of the group the
	// half message names (PGROUP). AutoBatch and Window are ignored: a
	// half message is always sent alone.
	Producer ProducerOptions
	// HeartbeatInterval is the period of the HEART_BEAT announcing the
	// producer group to every known node (default 30 s).
	HeartbeatInterval time.Duration
	// ClientID names this producer to the brokers; "" means
	// "<local IP>@<pid>@<random>".
	ClientID string
}

// TransactionSendResult is the outcome of SendMessageInTransaction: the
// half message's SendResult, and the state its local transaction ended
// in, which the producer reported with END_TRANSACTION.
type TransactionSendResult struct {
	SendResult
	// State is what ExecuteLocalTransaction returned.
	State LocalTransactionState
	// TransactionID is the half message's UNIQ_KEY (SendResult.MsgID).
	TransactionID string
}

// TransactionProducer sends messages in transactions, as RocketMQ's
// TransactionMQProducer: a half message, stored but invisible to
// consumers; then the local transaction (TransactionListener); then
// END_TRANSACTION, committing or rolling back the half message. It
// heartbeats its producer group to every known node, so that the broker
// can ask it about half messages left pending (CHECK_TRANSACTION_STATE,
// answered by CheckLocalTransaction and an END_TRANSACTION). Start it
// before sending and Shutdown it at the end; its methods are safe for
// concurrent use.
type TransactionProducer struct {
	c        *Client
	p        *Producer
	l        TransactionListener
	group    string
	interval time.Duration
	id       string // client id; set by Start

	state atomic.Int32 // pushNew, pushStarted, pushStopped
	// ctx ends at Shutdown; checks and the heartbeat loop run under it.
	ctx    context.Context
	cancel context.CancelFunc
	loop   sync.WaitGroup // the heartbeat loop
	checks sync.WaitGroup // check-backs being answered
}

// NewTransactionProducer returns a transaction producer sending through c;
// l runs and checks its local transactions. It does no I/O; Start does.
func (c *Client) NewTransactionProducer(o TransactionProducerOptions, l TransactionListener) (*TransactionProducer, error) {
	if o.Producer.Group == "" {
		return nil, errors.New("client: transaction producer: Producer.Group is required")
	}
	if err := checkProperty(message.PropertyProducerGroup, o.Producer.Group); err != nil {
		return nil, fmt.Errorf("client: transaction producer: %w", err)
	}
	if l == nil {
		return nil, fmt.Errorf("client: transaction producer %s: nil TransactionListener", o.Producer.Group)
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	o.Producer.AutoBatch = false
	tp := &TransactionProducer{
		c:        c,
		p:        c.NewProducer(o.Producer),
		l:        l,
		group:    o.Producer.Group,
		interval: o.HeartbeatInterval,
		id:       o.ClientID,
	}
	tp.ctx, tp.cancel = context.WithCancel(context.Background())
	return tp, nil
}

// Group returns the producer group.
func (tp *TransactionProducer) Group() string { return tp.group }

// ClientID returns the id the producer heartbeats with ("" before Start).
func (tp *TransactionProducer) ClientID() string { return tp.id }

// Start registers the producer as the answerer of its group's check-backs
// on this Client (one TransactionProducer per group and Client), sends the
// first HEART_BEAT to every known node (failing if none accepts it), and
// starts heartbeating every HeartbeatInterval.
func (tp *TransactionProducer) Start(ctx context.Context) error {
	if !tp.state.CompareAndSwap(pushNew, pushStarted) {
		return fmt.Errorf("client: transaction producer %s: Start called twice", tp.group)
	}
	if err := tp.start(ctx); err != nil {
		tp.state.Store(pushStopped)
		tp.cancel()
		tp.c.removeChecker(tp)
		return fmt.Errorf("client: transaction producer %s: start: %w", tp.group, err)
	}
	return nil
}

func (tp *TransactionProducer) start(ctx context.Context) error {
	if tp.id == "" {
		id, err := tp.c.newClientID(ctx)
		if err != nil {
			return err
		}
		tp.id = id
	}
	if err := tp.c.addChecker(tp); err != nil {
		return err
	}
	if err := tp.heartbeat(ctx); err != nil {
		return err
	}
	tp.loop.Add(1)
	go tp.heartbeatLoop()
	return nil
}

// Shutdown stops heartbeating and answering check-backs, waits for the
// check-backs being answered (until ctx ends; their context is cancelled
// first), and unregisters the producer group from every node
// (UNREGISTER_CLIENT). The Client stays open.
func (tp *TransactionProducer) Shutdown(ctx context.Context) error {
	if !tp.state.CompareAndSwap(pushStarted, pushStopped) {
		return fmt.Errorf("client: transaction producer %s: Shutdown without a running producer", tp.group)
	}
	tp.c.removeChecker(tp)
	tp.cancel()
	tp.loop.Wait()
	var errs []error
	done := make(chan struct{})
	go func() {
		tp.checks.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for check-backs: %w", ctx.Err()))
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tp.c.timeout)
	defer cancel()
	if err := tp.unregister(uctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("client: transaction producer %s: shutdown: %w", tp.group, err)
	}
	return nil
}

// SendMessageInTransaction sends m as a half message (properties
// TRAN_MSG=true and PGROUP=<group>, sysFlag TRANSACTION_PREPARED, with the
// Producer's retries), runs ExecuteLocalTransaction, and reports its state
// to the broker with END_TRANSACTION: commit (8), rollback (12) or unknown
// (0). m is not modified; a DELAY property is dropped, as RocketMQ does.
//
// If the half message cannot be sent, the local transaction does not run
// and the error is returned (wrapping ErrIndeterminate if the half message
// may be stored: the broker will then check it back, and the listener
// should answer RollbackMessage for a transaction it never ran).
//
// END_TRANSACTION for commit or rollback is sent as a request to the
// leader: a SUCCESS answer, or none within RequestTimeout (a broker may
// not answer), counts as done; a refusal is returned as an error, with
// the result filled in. Unknown is sent one-way: a RocketMQ broker answers
// nothing and changes nothing. A half message whose END_TRANSACTION went
// astray stays pending, and the broker checks it back.
func (tp *TransactionProducer) SendMessageInTransaction(ctx context.Context, m *Message) (TransactionSendResult, error) {
	if tp.state.Load() != pushStarted {
		return TransactionSendResult{}, fmt.Errorf("client: transaction producer %s: not started", tp.group)
	}
	if m == nil {
		return TransactionSendResult{}, errors.New("client: send in transaction: nil message")
	}
	half := *m
	half.Properties = maps.Clone(m.Properties)
	if half.Properties == nil {
		half.Properties = map[string]string{}
	}
	delete(half.Properties, message.PropertyDelayTimeLevel)
	half.Properties[message.PropertyTransactionPrepared] = "true"
	half.Properties[message.PropertyProducerGroup] = tp.group
	if half.Properties[message.PropertyUniqKey] == "" {
		// Known before the send, so that the listener sees it.
		half.Properties[message.PropertyUniqKey] = tp.c.ids.next()
	}
	res, err := tp.p.sendWith(ctx, &half, sendExtra{sysFlag: message.SysFlagTransactionPrepared})
	out := TransactionSendResult{SendResult: res, State: Unknown, TransactionID: res.MsgID}
	if err != nil {
		return out, fmt.Errorf("client: send in transaction: half message: %w", err)
	}
	out.State = tp.execute(ctx, &half)
	_, commitLogOffset, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return out, fmt.Errorf("client: send in transaction %s: the broker's message id: %w: %w", res.MsgID, ErrProtocol, err)
	}
	h := remoting.EndTransactionRequestHeader{
		ProducerGroup:        tp.group,
		TranStateTableOffset: res.QueueOffset,
		CommitLogOffset:      commitLogOffset,
		CommitOrRollback:     out.State.commitOrRollback(),
		MsgID:                res.MsgID,
		TransactionID:        res.MsgID,
		Topic:                m.Topic,
	}
	if err := tp.endTransaction(ctx, "", h); err != nil {
		return out, fmt.Errorf("client: send in transaction %s: end transaction (%s): %w", res.MsgID, out.State, err)
	}
	return out, nil
}

// execute runs ExecuteLocalTransaction, turning a panic into Unknown.
func (tp *TransactionProducer) execute(ctx context.Context, m *Message) (s LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.c.log.Error("client: ExecuteLocalTransaction panicked; the transaction stays unknown",
				"group", tp.group, "msgId", m.uniqKey(), "panic", r, "stack", string(debug.Stack()))
			s = Unknown
		}
	}()
	return tp.l.ExecuteLocalTransaction(ctx, m)
}

// check runs CheckLocalTransaction, turning a panic into Unknown.
func (tp *TransactionProducer) check(ctx context.Context, m *MessageExt) (s LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.c.log.Error("client: CheckLocalTransaction panicked; the transaction stays unknown",
				"group", tp.group, "msgId", m.MsgID, "panic", r, "stack", string(debug.Stack()))
			s = Unknown
		}
	}()
	return tp.l.CheckLocalTransaction(ctx, m)
}

// endTransaction sends END_TRANSACTION h to addr, or to the leader if addr
// is "", following leader hints. Unknown (commitOrRollback 0) goes
// one-way. Commit and rollback go as requests: SUCCESS, or no answer
// within RequestTimeout, is done (a broker may answer nothing); a refusal
// is an error. The connection is not evicted when no answer comes.
func (tp *TransactionProducer) endTransaction(ctx context.Context, addr string, h remoting.EndTransactionRequestHeader) error {
	c := tp.c
	var (
		lastErr error
		avoid   string
		target  = addr
	)
	for attempt := 1; attempt <= adminAttempts; attempt++ {
		if target == "" {
			target = c.writeTarget(avoid)
		}
		next, err := tp.endAttempt(ctx, target, h)
		if err == nil {
			return nil
		}
		lastErr = err
		switch {
		case next == endRetryNow:
			target = c.leaderAddr() // the node named
			continue
		case next == endRetry && ctx.Err() == nil && !c.closed.Load():
			avoid, target = target, ""
		default:
			return lastErr
		}
		if attempt == adminAttempts {
			break
		}
		if err := sleep(ctx, backoff(attempt, adminBackoff, time.Second, c.ids.jitter)); err != nil {
			return fmt.Errorf("%w (after: %w)", err, lastErr)
		}
	}
	return lastErr
}

// What endTransaction does after a failed attempt.
const (
	endFail     = iota // give up
	endRetry           // another node, after a backoff
	endRetryNow        // the leader a node named, at once
)

// endAttempt is one END_TRANSACTION to addr.
func (tp *TransactionProducer) endAttempt(ctx context.Context, addr string, h remoting.EndTransactionRequestHeader) (int, error) {
	c := tp.c
	if c.closed.Load() {
		return endFail, ErrClosed
	}
	conn, err := c.pool.get(ctx, addr)
	if err != nil {
		return endRetry, err
	}
	req := remoting.NewRequest(remoting.EndTransaction, h.Encode(), nil)
	if h.CommitOrRollback == remoting.TransactionNotType {
		if err := conn.Oneway(req); err != nil {
			return endRetry, fmt.Errorf("client: END_TRANSACTION to %s: %w", addr, err)
		}
		return endFail, nil
	}
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	resp, err := conn.Invoke(actx, req)
	timedOut := actx.Err() != nil && ctx.Err() == nil
	cancel()
	switch {
	case err != nil && timedOut:
		c.log.Debug("client: END_TRANSACTION got no answer; taking it as done", "addr", addr, "msgId", h.MsgID,
			"commitOrRollback", h.CommitOrRollback, "fromCheck", h.FromTransactionCheck)
		return endFail, nil
	case err != nil:
		err = fmt.Errorf("client: END_TRANSACTION to %s: %w", addr, err)
		if unsent(err) {
			return endFail, err
		}
		return endFail, indeterminate(err)
	case resp.Code == remoting.Success:
		return endFail, nil
	}
	e := responseError(addr, resp)
	switch e.Code {
	case remoting.ServiceNotAvailable:
		if hint, ok := e.LeaderHint(); ok && hint != addr {
			c.setLeader(hint)
			return endRetryNow, e
		}
		c.leaderFailed(addr)
		return endRetry, e
	case remoting.SystemBusy:
		return endRetry, e
	}
	return endFail, e
}

// heartbeatData is the producer's HEART_BEAT body.
func (tp *TransactionProducer) heartbeatData() ([]byte, error) {
	hb := remoting.HeartbeatData{ClientID: tp.id, ProducerDataSet: []remoting.ProducerData{{GroupName: tp.group}}}
	return hb.Encode()
}

// heartbeat sends HEART_BEAT to every known node at once, on the pool's
// connections (on which the nodes send their check-backs). It fails only
// if no node accepted it.
func (tp *TransactionProducer) heartbeat(ctx context.Context) error {
	body, err := tp.heartbeatData()
	if err != nil {
		return err
	}
	return tp.c.toEveryNode(ctx, "heartbeat", func() *remoting.Command {
		return remoting.NewRequest(remoting.HeartBeat, nil, body)
	}, false)
}

func (tp *TransactionProducer) heartbeatLoop() {
	defer tp.loop.Done()
	t := time.NewTicker(tp.interval)
	defer t.Stop()
	for {
		select {
		case <-tp.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(tp.ctx, tp.c.timeout)
		if err := tp.heartbeat(ctx); err != nil && tp.ctx.Err() == nil {
			tp.c.log.Warn("client: transaction producer heartbeat failed", "group", tp.group, "err", err)
		}
		cancel()
	}
}

// unregister sends UNREGISTER_CLIENT for the producer group to every
// known node.
func (tp *TransactionProducer) unregister(ctx context.Context) error {
	h := remoting.UnregisterClientRequestHeader{ClientID: tp.id, ProducerGroup: tp.group}
	return tp.c.toEveryNode(ctx, "unregister", func() *remoting.Command {
		return remoting.NewRequest(remoting.UnregisterClient, h.Encode(), nil)
	}, true)
}

// toEveryNode sends a request made by mk to every known node at once. It
// fails if every node failed, or, with all, if any did.
func (c *Client) toEveryNode(ctx context.Context, what string, mk func() *remoting.Command, all bool) error {
	nodes := c.nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, addr := range nodes {
		wg.Go(func() {
			resp, _, err := c.invoke(ctx, addr, mk(), c.timeout)
			if err == nil && resp.Code != remoting.Success {
				err = responseError(addr, resp)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed == 0 || !all && failed < len(nodes) {
		return nil
	}
	return fmt.Errorf("%s: %d of %d nodes failed: %w", what, failed, len(nodes), errors.Join(errs...))
}

// addChecker makes tp the answerer of its group's check-backs.
func (c *Client) addChecker(tp *TransactionProducer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other := c.mu.checkers[tp.group]; other != nil && other != tp {
		return fmt.Errorf("another transaction producer of group %s runs on this client", tp.group)
	}
	if c.mu.checkers == nil {
		c.mu.checkers = map[string]*TransactionProducer{}
	}
	c.mu.checkers[tp.group] = tp
	return nil
}

// removeChecker undoes addChecker, if tp is still registered.
func (c *Client) removeChecker(tp *TransactionProducer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.checkers[tp.group] == tp {
		delete(c.mu.checkers, tp.group)
	}
}

// serveCheckTransaction handles a broker's CHECK_TRANSACTION_STATE from
// addr (on the connection's request goroutine): it decodes the header and
// the half message (one record in the stored format), hands the message to
// the TransactionProducer of its PGROUP, if this Client has one, and
// ignores it otherwise, as RocketMQ's Go client does. The producer asks
// its listener and answers addr with END_TRANSACTION
// (fromTransactionCheck=true, offsets copied from the check).
func (c *Client) serveCheckTransaction(addr string, req *remoting.Command) *remoting.Command {
	reply := func(code int32, remark string) *remoting.Command {
		if req.IsOneway() {
			return nil
		}
		return remoting.NewResponse(req, code, remark)
	}
	h, err := remoting.DecodeCheckTransactionStateRequestHeader(req.ExtFields)
	if err != nil {
		c.log.Warn("client: bad CHECK_TRANSACTION_STATE", "addr", addr, "err", err)
		return reply(remoting.InvalidParameter, err.Error())
	}
	ms, err := DecodeMessages(req.Body, "", 0)
	if err == nil && len(ms) != 1 {
		err = fmt.Errorf("%d messages in the body, want 1", len(ms))
	}
	if err != nil {
		c.log.Warn("client: bad CHECK_TRANSACTION_STATE body", "addr", addr, "msgId", h.MsgID, "err", err)
		return reply(remoting.InvalidParameter, err.Error())
	}
	m := ms[0]
	group, _ := m.Property(message.PropertyProducerGroup)
	c.mu.Lock()
	tp := c.mu.checkers[group]
	if tp != nil {
		tp.checks.Add(1) // before Shutdown's Wait: it removes tp under c.mu first
	}
	c.mu.Unlock()
	if tp == nil {
		c.log.Debug("client: CHECK_TRANSACTION_STATE for a producer group without a producer here; ignored",
			"addr", addr, "group", group, "msgId", h.MsgID)
		return reply(remoting.Success, "")
	}
	defer tp.checks.Done()
	tp.answerCheck(addr, h, m)
	return reply(remoting.Success, "")
}

// answerCheck asks the listener about m and answers addr.
func (tp *TransactionProducer) answerCheck(addr string, h remoting.CheckTransactionStateRequestHeader, m *MessageExt) {
	state := tp.check(tp.ctx, m)
	if tp.ctx.Err() != nil {
		return // shut down meanwhile: the broker asks again
	}
	topic := h.Topic
	if topic == "" {
		topic = m.Topic
	}
	eh := remoting.EndTransactionRequestHeader{
		ProducerGroup:        tp.group,
		TranStateTableOffset: h.TranStateTableOffset,
		CommitLogOffset:      h.CommitLogOffset,
		CommitOrRollback:     state.commitOrRollback(),
		FromTransactionCheck: true,
		MsgID:                m.MsgID, // UNIQ_KEY, else the offsetMsgId, as Java's
		TransactionID:        h.TransactionID,
		Topic:                topic,
	}
	ctx, cancel := context.WithTimeout(tp.ctx, tp.c.timeout*adminAttempts)
	defer cancel()
	if err := tp.endTransaction(ctx, addr, eh); err != nil {
		tp.c.log.Warn("client: answering a transaction check failed; the broker will ask again",
			"addr", addr, "group", tp.group, "msgId", m.MsgID, "state", state, "err", err)
	}
}
