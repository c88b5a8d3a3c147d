package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// On a real three-node group, sampled sends come out with every stage in
// order, the stages adding up to the total, which is within what the
// client waited; the second follower's ack is seen on the leader too.
func TestSendTraceOnGroup(t *testing.T) {
	https := freeAddrs(t, 3)
	tb := startBrokersWith(t, func(c *Config) { c.HTTPAddr = https[c.ID-1] })
	l := tb.leader()
	c := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "traced", DefaultTopic: "TBW102", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	resp := invoke(t, c, remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = invoke(t, c, sendCmd("traced", 0, "first", "u0"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	req, err := http.NewRequest(http.MethodPost, "http://"+l.cfg.HTTPAddr+"/debug/sendtrace?every=1", nil)
	require.NoError(t, err)
	hr, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	hr.Body.Close()
	require.Equal(t, http.StatusNoContent, hr.StatusCode)

	const n = 20
	var slowest time.Duration
	for i := range n {
		start := time.Now()
		resp := invoke(t, c, sendCmd("traced", int32(i%4), "body", fmt.Sprintf("u%d", i+1)))
		slowest = max(slowest, time.Since(start))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	var rep SendTraceReport
	require.Eventually(t, func() bool {
		code, body, _ := httpGet(t, l.cfg.HTTPAddr, "/debug/sendtrace", nil)
		require.Equal(t, http.StatusOK, code)
		rep = SendTraceReport{}
		require.NoError(t, json.Unmarshal([]byte(body), &rep))
		// The second follower's ack is stamped whenever it arrives, which on
		// a loaded machine can be after the last answer: wait for one.
		return len(rep.Samples) == n && slices.ContainsFunc(rep.Samples, func(s SendTraceSample) bool { return s.SecondAck >= 0 })
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, raftlog.StageNames[:], rep.Stages)
	require.EqualValues(t, 1, rep.Every)
	secondAcks := 0
	for i, s := range rep.Samples {
		require.Len(t, s.StagesUS, raftlog.NumStages-1)
		sum := 0.0
		for j, d := range s.StagesUS {
			require.GreaterOrEqual(t, d, 0.0, "sample %d: stage %s before the previous", i, rep.Stages[j+1])
			sum += d
		}
		require.InDelta(t, s.TotalUS, sum, 0.01, "sample %d: stages add up to the total", i)
		require.Positive(t, s.StagesUS[raftlog.StageFsynced-1], "sample %d: a real fsync takes time", i)
		require.LessOrEqual(t, s.TotalUS, float64(slowest.Microseconds())+1, "sample %d: within the client's wait", i)
		if s.SecondAck >= 0 {
			secondAcks++
			fsynced := 0.0
			for _, d := range s.StagesUS[:raftlog.StageFsynced] {
				fsynced += d
			}
			require.Greater(t, s.SecondAck, fsynced, "sample %d: an ack follows the leader's own append", i)
		}
	}
	require.Positive(t, secondAcks, "the second follower's acks are seen on the leader")
}

// Tracing off costs a send one atomic load: no allocation.
func TestSendTraceOffAllocatesNothing(t *testing.T) {
	var s sendTraces
	now := time.Now()
	allocs := testing.AllocsPerRun(1000, func() {
		if s.sample(now) != nil {
			t.Fatal("sampled while off")
		}
	})
	require.Zero(t, allocs)
	s.reset(2)
	require.Nil(t, s.sample(now))
	require.NotNil(t, s.sample(now), "one in two")
}
