package cluster

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// delayedSend is a send of body to topic queue 0 with extra properties.
func delayedSend(topic, body, uniq string, props map[string]string) *remoting.Command {
	p := map[string]string{message.PropertyUniqKey: uniq}
	for k, v := range props {
		p[k] = v
	}
	h := remoting.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: message.EncodeProperties(p)}
	return remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte(body))
}

// queued returns the messages of topic queue 0 on b, by UNIQ_KEY, with how
// often each is there.
func queued(t *testing.T, b *Broker, topic string) map[string][]message.Message {
	t.Helper()
	st := b.Replica().Store()
	out := map[string][]message.Message{}
	for off := st.MinOffset(topic, 0); off < st.MaxOffset(topic, 0); {
		gr, err := st.GetMessages(topic, 0, off, 64, 1<<20, nil)
		require.NoError(t, err)
		for _, rec := range gr.Records {
			m, _, err := message.Decode(rec)
			require.NoError(t, err)
			out[m.Properties[message.PropertyUniqKey]] = append(out[m.Properties[message.PropertyUniqKey]], m)
		}
		off = gr.NextBeginOffset
	}
	return out
}

// Delayed and timer messages are delivered once each, never before they
// are due, while the leader that stored them is stopped and another takes
// over mid-way: the schedule's progress is replicated, so the new leader
// neither skips nor repeats a delivery.
func TestDelayedDeliveryAcrossLeaderChange(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)

	due := map[string]int64{} // UNIQ_KEY -> earliest delivery (ms)
	for i := range 40 {
		delay := 200 + 40*i // 0.2 to 1.8 s
		u := fmt.Sprint("T", i)
		due[u] = time.Now().UnixMilli() + int64(delay)
		resp := invoke(t, c, delayedSend("T", u, u, map[string]string{message.PropertyTimerDelayMS: strconv.Itoa(delay)}))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	for i := range 5 {
		u := fmt.Sprint("L", i)
		due[u] = time.Now().UnixMilli() + 1000
		resp := invoke(t, c, delayedSend("T", u, u, map[string]string{message.PropertyDelayTimeLevel: "1"}))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	// Nothing is delivered before it is due. The sends take a while on a
	// loaded machine, so the first may be due already: check each message
	// against its own time rather than expecting none yet.
	for u, ms := range queued(t, l, "T") {
		for _, m := range ms {
			require.GreaterOrEqual(t, m.StoreTimestamp, due[u], "%s delivered before it was due", u)
		}
	}

	time.Sleep(700 * time.Millisecond)
	old := l.cfg.ID
	require.NoError(t, l.Close())
	delete(tb.bs, old)
	nl := tb.leader()
	require.NotEqual(t, old, nl.cfg.ID)
	tb.start(old)

	counts := func() map[uint64]int64 {
		out := map[uint64]int64{}
		for id, b := range tb.bs {
			out[id] = b.Replica().Store().MaxOffset("T", 0)
		}
		return out
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done := true
		for _, n := range counts() {
			done = done && n >= int64(len(due))
		}
		if done {
			break
		}
		require.True(t, time.Now().Before(deadline), "not every delayed message was delivered on every node within 15 s: %v of %d", counts(), len(due))
	}
	time.Sleep(300 * time.Millisecond) // a repeated delivery would land by now
	for id, b := range tb.bs {
		got := queued(t, b, "T")
		require.Len(t, got, len(due), "node %d", id)
		for u, ms := range got {
			require.Len(t, ms, 1, "node %d: %s delivered %d times", id, u, len(ms))
			require.GreaterOrEqual(t, ms[0].StoreTimestamp, due[u], "node %d: %s delivered early", id, u)
			require.Empty(t, ms[0].Properties[message.PropertyTimerDelayMS], "a delivered copy keeps no delay")
			require.Equal(t, u, string(ms[0].Body))
		}
	}
}

// A transaction ends once: a half message is invisible, commit delivers
// it, a second commit or a rollback afterwards changes nothing, and a
// rollback of another discards it, across a change of leader.
func TestTransactionsEndOnceAcrossLeaderChange(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	half := func(u string) remoting.SendMessageResponseHeader {
		req := delayedSend("T", u, u, map[string]string{message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: "pg"})
		resp := invoke(t, c, req)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		h, err := remoting.DecodeSendMessageResponseHeader(resp.ExtFields)
		require.NoError(t, err)
		return h
	}
	end := func(c *remoting.Conn, h remoting.SendMessageResponseHeader, how int32) *remoting.Command {
		_, phy, err := message.ParseOffsetMsgID(h.MsgID)
		require.NoError(t, err)
		eh := remoting.EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: h.QueueOffset, CommitLogOffset: phy,
			CommitOrRollback: how, MsgID: h.TransactionID}
		return invoke(t, c, remoting.NewRequest(remoting.EndTransaction, eh.Encode(), nil))
	}
	hc, hr := half("C"), half("R")
	require.Zero(t, l.Replica().Store().MaxOffset("T", 0), "a half message is invisible")
	require.Len(t, l.Replica().Store().PendingTransactions(), 2)
	require.Equal(t, remoting.Success, end(c, hc, remoting.TransactionCommitType).Code)

	old := l.cfg.ID
	require.NoError(t, l.Close())
	delete(tb.bs, old)
	nl := tb.leader()
	nc := dial(t, nl.ClientAddr())
	require.NotEqual(t, remoting.Success, end(nc, hc, remoting.TransactionRollbackType).Code, "a committed transaction cannot be rolled back")
	require.NotEqual(t, remoting.Success, end(nc, hc, remoting.TransactionCommitType).Code, "nor committed twice")
	require.Equal(t, remoting.Success, end(nc, hr, remoting.TransactionRollbackType).Code)
	tb.start(old)
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if b.Replica().Store().MaxOffset(txn.OpTopic, 0) < 2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	for id, b := range tb.bs {
		got := queued(t, b, "T")
		require.Len(t, got, 1, "node %d", id)
		require.Len(t, got["C"], 1, "node %d", id)
		require.Empty(t, got["C"][0].Properties[message.PropertyTransactionPrepared])
		require.Equal(t, txn.SysFlagCommit, got["C"][0].SysFlag&txn.SysFlagTypeMask)
		require.Empty(t, b.Replica().Store().PendingTransactions(), "node %d", id)
	}
}

// A client's own send of a retry (its fallback when
// CONSUMER_SEND_MSG_BACK fails) goes to the dead-letter topic once the
// copy's reconsume count is past the maximum (the group's 16, or the
// maxReconsumeTimes the client sends); below it, it waits as a delayed
// message like any retry.
func TestRetrySendPastMaxGoesToDLQ(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "%RETRY%g", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)).Code)
	send := func(uniq string, reconsume, max int32) {
		props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: uniq, message.PropertyDelayTimeLevel: "3",
			message.PropertyRetryTopic: "T"})
		h := remoting.SendMessageRequestHeader{ProducerGroup: "CLIENT_INNER_PRODUCER", Topic: "%RETRY%g", DefaultTopic: "TBW102",
			DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: props,
			ReconsumeTimes: reconsume, MaxReconsumeTimes: max}
		resp := invoke(t, c, remoting.NewRequest(remoting.SendMessage, h.Encode(), []byte(uniq)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	send("A", 16, 0) // the 16th retry: still a retry
	send("B", 17, 0) // past the group's 16
	send("C", 2, 1)  // past the client's 1
	st := l.Replica().Store()
	require.Eventually(t, func() bool { return st.MaxOffset("%DLQ%g", 0) == 2 }, 5*time.Second, 10*time.Millisecond)
	tc, ok := st.Topic("%DLQ%g")
	require.True(t, ok)
	require.EqualValues(t, 6, tc.Perm, "a dead-letter topic is read and written, as RocketMQ creates it")
	dead := queued(t, l, "%DLQ%g")
	require.Len(t, dead, 2)
	require.Contains(t, dead, "B")
	require.Contains(t, dead, "C")
	require.Empty(t, dead["B"][0].Properties[message.PropertyDelayTimeLevel], "a dead letter is not delayed")
	require.EqualValues(t, 17, dead["B"][0].ReconsumeTimes)
	require.Zero(t, st.MaxOffset("%RETRY%g", 0), "the 16th retry waits in the schedule")
	require.EqualValues(t, 1, st.MaxOffset(schedule.Topic, schedule.LevelQueue(3)), "the 16th retry waits at delay level 3")
}
