package cluster

import (
	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// FaultRequest is the JSON body of a FAULT (9005) request. The broker
// accepts it only when built with -tags mutant (internal/failpoint) and
// started with fault injection enabled (Config.FaultEndpoint, the hidden
// broker flag --fault-endpoint), which the chaos harness does for its
// clock nemesis. Zero fields leave a setting unchanged.
type FaultRequest struct {
	// TickRate scales raft's tick rate: 2 ticks twice as fast (elections
	// and heartbeats come sooner), 0.5 half as fast. 1 restores it.
	TickRate float64 `json:"tickRate,omitempty"`
	// ClockOffsetMillis shifts the node's wall clock (message store
	// timestamps, retention) by this many milliseconds. Reset sets it to 0.
	ClockOffsetMillis int64 `json:"clockOffsetMillis,omitempty"`
	// DiskBallastBytes pretends this many bytes of the node's data disk
	// are taken (vfs.BallastFS: usage counts them, writes they leave no
	// room for fail with no space); -1 removes the ballast, as Reset does.
	DiskBallastBytes int64 `json:"diskBallastBytes,omitempty"`
	// Reset clears every fault first.
	Reset bool `json:"reset,omitempty"`
}

// FaultState is the answer: the faults now in effect.
type FaultState struct {
	TickInterval      string `json:"tickInterval"`
	ClockOffsetMillis int64  `json:"clockOffsetMillis"`
	DiskBallastBytes  int64  `json:"diskBallastBytes"`
}

// handleFault answers a FAULT request: injectFault (failpoints_mutant.go)
// carries it out in a build with -tags mutant; the default build refuses it.
func (b *Broker) handleFault(req *remoting.Command) *remoting.Command {
	if failpoint.Built {
		return b.injectFault(req)
	}
	return remoting.NewResponse(req, remoting.NoPermission, "fault injection: "+failpoint.ErrNotBuilt.Error())
}
