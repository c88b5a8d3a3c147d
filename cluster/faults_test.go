//go:build mutant

package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/raftlog"
)

// The fault endpoint's tick-rate skew scales the node's own configured
// tick (raftlog's default when the broker sets none) and Reset restores it.
func TestFaultTickRateScalesConfiguredTick(t *testing.T) {
	for _, tick := range []time.Duration{0, 10 * time.Millisecond} {
		tb := startBrokersWith(t, func(c *Config) {
			c.FaultEndpoint = true
			c.Raft.TickInterval = tick
		})
		b := tb.leader()
		base := tick
		if base == 0 {
			base = raftlog.DefaultTickInterval
		}
		fault := func(fr FaultRequest) FaultState {
			t.Helper()
			body, err := json.Marshal(fr)
			require.NoError(t, err)
			resp := b.handleFault(remoting.NewRequest(remoting.Fault, nil, body))
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			var st FaultState
			require.NoError(t, json.Unmarshal(resp.Body, &st))
			return st
		}
		require.Equal(t, (base / 4).String(), fault(FaultRequest{TickRate: 4}).TickInterval)
		require.Equal(t, base/4, b.rep.Node().TickInterval())
		require.Equal(t, base.String(), fault(FaultRequest{Reset: true}).TickInterval)
		require.Equal(t, base, b.rep.Node().TickInterval())
	}
}
