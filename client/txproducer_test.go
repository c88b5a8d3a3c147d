package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// txListener records its calls and answers with fixed states.
type txListener struct {
	exec, check LocalTransactionState
	panicExec   bool

	mu      sync.Mutex
	execs   []*Message
	checks  []*MessageExt
	checked chan struct{} // cap 16: one signal per check
}

func newTxListener(exec, check LocalTransactionState) *txListener {
	return &txListener{exec: exec, check: check, checked: make(chan struct{}, 16)}
}

func (l *txListener) ExecuteLocalTransaction(_ context.Context, m *Message) LocalTransactionState {
	l.mu.Lock()
	l.execs = append(l.execs, m)
	l.mu.Unlock()
	if l.panicExec {
		panic("local transaction exploded")
	}
	return l.exec
}

func (l *txListener) CheckLocalTransaction(_ context.Context, m *MessageExt) LocalTransactionState {
	l.mu.Lock()
	l.checks = append(l.checks, m)
	l.mu.Unlock()
	l.checked <- struct{}{}
	return l.check
}

func (l *txListener) checkCalls() []*MessageExt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*MessageExt(nil), l.checks...)
}

// startTxProducer starts a transaction producer of group on a client of
// its own with the given request timeout; it is shut down at the end of
// the test if still running.
func startTxProducer(t *testing.T, g *fakeGroup, group string, timeout time.Duration, l TransactionListener) *TransactionProducer {
	t.Helper()
	c := newTestClient(t, g, timeout)
	tp, err := c.NewTransactionProducer(TransactionProducerOptions{Producer: ProducerOptions{Group: group}, HeartbeatInterval: 20 * time.Millisecond}, l)
	require.NoError(t, err)
	require.NoError(t, tp.Start(testCtx(t)))
	t.Cleanup(func() {
		if tp.state.Load() == pushStarted {
			require.NoError(t, tp.Shutdown(context.Background()))
		}
	})
	return tp
}

// endTransactions decodes the END_TRANSACTION requests node n got, with
// whether each was one-way.
func endTransactions(t *testing.T, n *fakeNode) ([]remoting.EndTransactionRequestHeader, []bool) {
	t.Helper()
	var hs []remoting.EndTransactionRequestHeader
	var oneway []bool
	for _, r := range n.requests(remoting.EndTransaction) {
		h, err := remoting.DecodeEndTransactionRequestHeader(r.ExtFields)
		require.NoError(t, err)
		hs = append(hs, h)
		oneway = append(oneway, r.IsOneway())
	}
	return hs, oneway
}

// TestTransactionProducer: SendMessageInTransaction sends a half message
// (TRAN_MSG, PGROUP, sysFlag prepared), runs the local transaction and
// reports its state with END_TRANSACTION (commit 8 and rollback 12 as
// requests, unknown 0 one-way) carrying the half message's queue offset,
// commit log offset and UNIQ_KEY. A CHECK_TRANSACTION_STATE from the
// broker then gets CheckLocalTransaction's verdict in an END_TRANSACTION
// with fromTransactionCheck=true and the check's offsets.
func TestTransactionProducer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state LocalTransactionState
		code  int32
		panic bool
	}{
		{"commit", CommitMessage, remoting.TransactionCommitType, false},
		{"rollback", RollbackMessage, remoting.TransactionRollbackType, false},
		{"unknown", Unknown, remoting.TransactionNotType, false},
		{"panic", Unknown, remoting.TransactionNotType, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGroup(t, 1)
			g.addTopic("T", 2)
			l := newTxListener(tc.state, CommitMessage)
			l.panicExec = tc.panic
			tp := startTxProducer(t, g, "PG", time.Second, l)

			m := &Message{Topic: "T", QueueID: 1, Body: []byte("order-1"), Tags: "TagA",
				Properties: map[string]string{"app": "v", message.PropertyDelayTimeLevel: "3"}}
			res, err := tp.SendMessageInTransaction(testCtx(t), m)
			require.NoError(t, err)
			require.Equal(t, tc.state, res.State)
			require.Equal(t, res.MsgID, res.TransactionID)
			require.Regexp(t, uniqKeyRE, res.MsgID)
			require.Equal(t, map[string]string{"app": "v", message.PropertyDelayTimeLevel: "3"}, m.Properties, "m not modified")

			// The half message.
			n := g.nodes[0]
			sends := sendsTo(t, n, "T")
			require.Len(t, sends, 1)
			require.Equal(t, "PG", sends[0].ProducerGroup)
			require.Equal(t, int32(message.SysFlagTransactionPrepared), sends[0].SysFlag&message.SysFlagTransactionMask)
			props, err := message.DecodeProperties(sends[0].Properties)
			require.NoError(t, err)
			require.Equal(t, "true", props[message.PropertyTransactionPrepared])
			require.Equal(t, "PG", props[message.PropertyProducerGroup])
			require.Equal(t, res.MsgID, props[message.PropertyUniqKey])
			require.NotContains(t, props, message.PropertyDelayTimeLevel)
			stored := g.records("T", 1)
			require.Len(t, stored, 1)
			half := stored[0]

			// The listener saw it, with its transaction id.
			l.mu.Lock()
			require.Len(t, l.execs, 1)
			require.Equal(t, res.MsgID, l.execs[0].Properties[message.PropertyUniqKey])
			require.Equal(t, "true", l.execs[0].Properties[message.PropertyTransactionPrepared])
			l.mu.Unlock()

			// END_TRANSACTION.
			require.Eventually(t, func() bool { hs, _ := endTransactions(t, n); return len(hs) == 1 }, 5*time.Second, 5*time.Millisecond)
			hs, oneway := endTransactions(t, n)
			require.Equal(t, remoting.EndTransactionRequestHeader{
				ProducerGroup: "PG", TranStateTableOffset: half.QueueOffset, CommitLogOffset: half.PhysicalOffset,
				CommitOrRollback: tc.code, FromTransactionCheck: false, MsgID: res.MsgID, TransactionID: res.MsgID, Topic: "T",
			}, hs[0])
			require.Equal(t, tc.state == Unknown, oneway[0], "only unknown goes one-way")

			// The producer heartbeats its group, on the connection the
			// broker sends checks on; then the broker checks the half
			// message back.
			hbs := n.requests(remoting.HeartBeat)
			require.NotEmpty(t, hbs)
			hb, err := remoting.DecodeHeartbeatData(hbs[0].Body)
			require.NoError(t, err)
			require.Equal(t, tp.ClientID(), hb.ClientID)
			require.Equal(t, []remoting.ProducerData{{GroupName: "PG"}}, hb.ProducerDataSet)
			require.Empty(t, hb.ConsumerDataSet)
			require.Eventually(t, func() bool { return len(n.requests(remoting.HeartBeat)) >= 3 }, 5*time.Second, 5*time.Millisecond,
				"heartbeats every HeartbeatInterval")

			sent, err := g.checkTransaction("PG", half.PhysicalOffset)
			require.NoError(t, err)
			require.Equal(t, 1, sent)
			require.Eventually(t, func() bool { hs, _ := endTransactions(t, n); return len(hs) == 2 }, 5*time.Second, 5*time.Millisecond)
			hs, oneway = endTransactions(t, n)
			require.Equal(t, remoting.EndTransactionRequestHeader{
				ProducerGroup: "PG", TranStateTableOffset: half.QueueOffset, CommitLogOffset: half.PhysicalOffset,
				CommitOrRollback: remoting.TransactionCommitType, FromTransactionCheck: true, MsgID: res.MsgID,
				TransactionID: res.MsgID, Topic: "T",
			}, hs[1])
			require.False(t, oneway[1])
			checks := l.checkCalls()
			require.Len(t, checks, 1)
			require.Equal(t, "T", checks[0].Topic)
			require.Equal(t, int32(1), checks[0].QueueID)
			require.Equal(t, res.MsgID, checks[0].MsgID)
			require.Equal(t, "order-1", string(checks[0].Body))

			require.NoError(t, tp.Shutdown(testCtx(t)))
			unreg := n.requests(remoting.UnregisterClient)
			require.Len(t, unreg, 1)
			uh, err := remoting.DecodeUnregisterClientRequestHeader(unreg[0].ExtFields)
			require.NoError(t, err)
			require.Equal(t, remoting.UnregisterClientRequestHeader{ClientID: tp.ClientID(), ProducerGroup: "PG"}, uh)
		})
	}
}

// TestTransactionProducerIgnoresOtherGroupsChecks: a check about a half
// message whose PGROUP is another group is ignored: no
// CheckLocalTransaction, no END_TRANSACTION; a check about one of its own,
// sent after it on the same connection, is answered.
func TestTransactionProducerIgnoresOtherGroupsChecks(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	l := newTxListener(Unknown, RollbackMessage)
	tp := startTxProducer(t, g, "PG", time.Second, l)
	n := g.nodes[0]

	// A half message of group OTHER, stored by another producer.
	c := newTestClient(t, g, time.Second)
	other := c.NewProducer(ProducerOptions{Group: "OTHER"})
	_, err := other.sendWith(testCtx(t), &Message{Topic: "T", Body: []byte("theirs"), Properties: map[string]string{
		message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "OTHER"}},
		sendExtra{sysFlag: message.SysFlagTransactionPrepared})
	require.NoError(t, err)
	res, err := tp.SendMessageInTransaction(testCtx(t), &Message{Topic: "T", Body: []byte("ours")})
	require.NoError(t, err)
	stored := g.records("T", 0)
	require.Len(t, stored, 2)
	require.Eventually(t, func() bool { hs, _ := endTransactions(t, n); return len(hs) == 1 }, 5*time.Second, 5*time.Millisecond)

	sent, err := g.checkTransaction("PG", stored[0].PhysicalOffset) // theirs
	require.NoError(t, err)
	require.Equal(t, 1, sent)
	sent, err = g.checkTransaction("PG", stored[1].PhysicalOffset) // ours
	require.NoError(t, err)
	require.Equal(t, 1, sent)
	require.Eventually(t, func() bool { hs, _ := endTransactions(t, n); return len(hs) == 2 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // a wrongly answered check would show by now
	hs, _ := endTransactions(t, n)
	require.Len(t, hs, 2)
	require.True(t, hs[1].FromTransactionCheck)
	require.Equal(t, res.MsgID, hs[1].MsgID)
	require.Equal(t, remoting.TransactionRollbackType, hs[1].CommitOrRollback)
	require.Equal(t, stored[1].PhysicalOffset, hs[1].CommitLogOffset)
	checks := l.checkCalls()
	require.Len(t, checks, 1)
	require.Equal(t, "ours", string(checks[0].Body))
}

// TestTransactionProducerEndTransactionAnswers: an END_TRANSACTION the
// broker does not answer counts as done after RequestTimeout (and the
// connection stays usable); one it refuses is an error, with the result
// filled in; a follower's SERVICE_NOT_AVAILABLE naming the leader is
// followed.
func TestTransactionProducerEndTransactionAnswers(t *testing.T) {
	t.Run("no answer", func(t *testing.T) {
		g := newFakeGroup(t, 1)
		g.addTopic("T", 1)
		g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
			return nil, req.Code == remoting.EndTransaction // no response at all
		})
		tp := startTxProducer(t, g, "PG", 200*time.Millisecond, newTxListener(CommitMessage, CommitMessage))
		res, err := tp.SendMessageInTransaction(testCtx(t), &Message{Topic: "T", Body: []byte("a")})
		require.NoError(t, err)
		require.Equal(t, CommitMessage, res.State)
		res, err = tp.SendMessageInTransaction(testCtx(t), &Message{Topic: "T", Body: []byte("b")})
		require.NoError(t, err, "the connection still works")
		require.Len(t, g.nodes[0].requests(remoting.EndTransaction), 2)
	})
	t.Run("refused", func(t *testing.T) {
		g := newFakeGroup(t, 1)
		g.addTopic("T", 1)
		g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
			if req.Code == remoting.EndTransaction {
				return remoting.NewResponse(req, remoting.IllegalOperation, "half message not found"), true
			}
			return nil, false
		})
		tp := startTxProducer(t, g, "PG", time.Second, newTxListener(RollbackMessage, CommitMessage))
		res, err := tp.SendMessageInTransaction(testCtx(t), &Message{Topic: "T", Body: []byte("a")})
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, remoting.IllegalOperation, e.Code)
		require.False(t, errors.Is(err, ErrIndeterminate))
		require.Equal(t, RollbackMessage, res.State)
		require.NotEmpty(t, res.OffsetMsgID)
		require.Len(t, g.nodes[0].requests(remoting.EndTransaction), 1, "a definite refusal is not retried")
	})
	t.Run("follows the leader", func(t *testing.T) {
		g := newFakeGroup(t, 2)
		g.addTopic("T", 1)
		g.setLeader(0)
		// The half message goes to node 0, which then loses the
		// leadership to node 1 before END_TRANSACTION.
		tp := startTxProducer(t, g, "PG", time.Second, newTxListener(CommitMessage, CommitMessage))
		g.nodes[0].setHook(func(_ *fakeNode, req *remoting.Command) (*remoting.Command, bool) {
			if req.Code == remoting.SendMessageV2 {
				resp := g.serve(g.nodes[0], req)
				g.setLeader(1) // once stored
				return resp, true
			}
			return nil, false
		})
		_, err := tp.SendMessageInTransaction(testCtx(t), &Message{Topic: "T", Body: []byte("a")})
		require.NoError(t, err)
		require.Len(t, g.nodes[0].requests(remoting.EndTransaction), 1, "refused by the old leader, naming the new one")
		require.Len(t, g.nodes[1].requests(remoting.EndTransaction), 1)
	})
}

// TestTransactionProducerLifecycle: a group is required, Start is needed
// before sending, and one Client has one producer per group answering its
// checks.
func TestTransactionProducerLifecycle(t *testing.T) {
	g := newFakeGroup(t, 1)
	g.addTopic("T", 1)
	c := newTestClient(t, g, time.Second)
	_, err := c.NewTransactionProducer(TransactionProducerOptions{}, newTxListener(CommitMessage, CommitMessage))
	require.Error(t, err)
	_, err = c.NewTransactionProducer(TransactionProducerOptions{Producer: ProducerOptions{Group: "PG"}}, nil)
	require.Error(t, err)
	a, err := c.NewTransactionProducer(TransactionProducerOptions{Producer: ProducerOptions{Group: "PG"}}, newTxListener(CommitMessage, CommitMessage))
	require.NoError(t, err)
	_, err = a.SendMessageInTransaction(testCtx(t), &Message{Topic: "T"})
	require.ErrorContains(t, err, "not started")
	require.NoError(t, a.Start(testCtx(t)))
	b, err := c.NewTransactionProducer(TransactionProducerOptions{Producer: ProducerOptions{Group: "PG"}}, newTxListener(CommitMessage, CommitMessage))
	require.NoError(t, err)
	require.ErrorContains(t, b.Start(testCtx(t)), "another transaction producer")
	require.NoError(t, a.Shutdown(testCtx(t)))
	require.Error(t, a.Shutdown(testCtx(t)))
	_, err = a.SendMessageInTransaction(testCtx(t), &Message{Topic: "T"})
	require.ErrorContains(t, err, "not started")
}
