package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// TestPopTrace: with every pop and batch ack sampled, the leader keeps a
// complete trace of each answered one, whose stages are in order and add
// up to at most the request's time; off, it keeps none.
func TestPopTrace(t *testing.T) {
	tb := startBrokers(t)
	l := tb.leader()
	cl := dial(t, l.ClientAddr())
	popSetup(t, cl, 1, 6, nil)

	// Off: nothing is kept.
	resp, msgs := popReq(t, cl, 0, 2, time.Minute, 0, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Len(t, msgs, 2)
	require.Empty(t, l.pop.traces.report().Kinds)

	l.pop.traces.reset(1)
	for range 2 {
		t0 := time.Now()
		resp, msgs := popReq(t, cl, 0, 2, time.Minute, 0, nil)
		took := time.Since(t0)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		require.Len(t, msgs, 2)
		var acks []remoting.BatchAck
		for _, m := range msgs {
			e, err := remoting.ParseExtraInfo(m.ck)
			require.NoError(t, err)
			a := remoting.BatchAck{ConsumerGroup: "g", Topic: "T", QueueID: 0, StartOffset: m.offset, PopTime: e.PopTime, InvisibleTime: e.InvisibleTime}
			a.SetOffsets([]int64{m.offset})
			acks = append(acks, a)
		}
		body, err := json.Marshal(remoting.BatchAckBody{BrokerName: "raftmq", Acks: acks})
		require.NoError(t, err)
		resp = invoke(t, cl, remoting.NewRequest(remoting.BatchAckMessage, nil, body))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)

		r := l.pop.traces.report()
		require.Equal(t, uint64(1), r.Every)
		require.Equal(t, popTraceStages, r.Stages)
		p := r.Kinds["pop"]
		require.NotZero(t, p.Count, "no complete pop trace: %+v", r)
		require.Len(t, p.P50US, len(popTraceStages))
		for _, v := range p.P50US {
			require.GreaterOrEqual(t, v, 0.0)
		}
		require.LessOrEqual(t, p.TotalP99, float64(took.Microseconds())+1, "a pop's stages add up to more than its round trip")
		require.NotZero(t, r.Kinds["ack"].Count, "no complete batch ack trace: %+v", r)
	}
	r := l.pop.traces.report()
	require.Equal(t, 2, r.Kinds["pop"].Count)
	require.Equal(t, 2, r.Kinds["ack"].Count)
	// The tail (at or above the p95) holds the slowest; each of its traces
	// names one largest stage; a pop's entry carries its pop op, and every
	// entry at least the request's one op.
	for k, st := range r.Kinds {
		require.GreaterOrEqual(t, st.Tail.Count, 1, k)
		require.Len(t, st.Tail.MeanUS, len(popTraceStages), k)
		n := 0
		for stage, c := range st.Tail.Largest {
			require.Contains(t, popTraceStages, stage)
			n += c
		}
		require.Equal(t, st.Tail.Count, n, k)
		require.GreaterOrEqual(t, st.All.Ops, 1.0, k)
		require.GreaterOrEqual(t, st.Tail.Beside.Ops, 1.0, k)
		for _, f := range []float64{st.All.GC, st.All.Checkpoint, st.All.WithPop, st.Tail.Beside.GC, st.Tail.Beside.Checkpoint} {
			require.True(t, f >= 0 && f <= 1, "%s: fraction %v", k, f)
		}
	}
	require.Equal(t, 1.0, r.Kinds["pop"].All.WithPop, "a pop's entry carries its pop op")
}
