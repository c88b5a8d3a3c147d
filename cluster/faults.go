package cluster

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/internal/mutant"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// FaultRequest is the JSON body of a FAULT (9005) request. The broker
// accepts it only when built with -tags mutant (internal/mutant) and
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

// skewClock is the store's clock with an adjustable offset (only with the
// fault endpoint, so only in builds with -tags mutant).
type skewClock struct{ offset atomic.Int64 } // nanoseconds

func (c *skewClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (b *Broker) handleFault(req *remoting.Command) *remoting.Command {
	if !mutant.Enabled {
		// Everything below is compiled out of the default build.
		return remoting.NewResponse(req, remoting.NoPermission, "fault injection: "+mutant.ErrNotBuilt.Error())
	}
	if !b.cfg.FaultEndpoint {
		return remoting.NewResponse(req, remoting.NoPermission, "fault injection is not enabled on this broker (--fault-endpoint)")
	}
	var fr FaultRequest
	if err := json.Unmarshal(req.Body, &fr); err != nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, "fault: bad body: "+err.Error())
	}
	if fr.TickRate < 0 || fr.TickRate > 100 {
		return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("fault: tick rate %g outside (0, 100]", fr.TickRate))
	}
	base := b.rep.Node().Timing().TickInterval
	if fr.ClockOffsetMillis != 0 && b.clock == nil {
		return remoting.NewResponse(req, remoting.InvalidParameter, "fault: this broker's store has its own clock; it cannot be skewed")
	}
	if fr.Reset {
		if b.clock != nil {
			b.clock.offset.Store(0)
		}
		b.rep.Node().SetTickInterval(base)
		b.ballast.SetBallast(0)
	}
	if fr.DiskBallastBytes != 0 {
		b.ballast.SetBallast(fr.DiskBallastBytes)
	}
	if fr.TickRate > 0 {
		b.rep.Node().SetTickInterval(time.Duration(float64(base) / fr.TickRate))
	}
	if fr.ClockOffsetMillis != 0 {
		b.clock.offset.Store(int64(time.Duration(fr.ClockOffsetMillis) * time.Millisecond))
	}
	b.log.Warn("cluster: fault injected", "tickRate", fr.TickRate, "clockOffsetMillis", fr.ClockOffsetMillis, "diskBallastBytes", fr.DiskBallastBytes, "reset", fr.Reset)
	st := FaultState{TickInterval: b.rep.Node().TickInterval().String(), DiskBallastBytes: b.ballast.Ballast()}
	if b.clock != nil {
		st.ClockOffsetMillis = time.Duration(b.clock.offset.Load()).Milliseconds()
	}
	body, _ := json.Marshal(st)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// memOffsets is the offsets-in-memory mutant's consumer offset table: local
// to one node, never replicated.
type memOffsets struct {
	mu sync.Mutex
	m  map[string]int64
}

func memKey(group, topic string, q int32) string {
	return fmt.Sprintf("%s\x00%s\x00%d", group, topic, q)
}

func (o *memOffsets) set(group, topic string, q int32, off int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]int64{}
	}
	o.m[memKey(group, topic, q)] = off
}

func (o *memOffsets) get(group, topic string, q int32) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	off, ok := o.m[memKey(group, topic, q)]
	return off, ok
}
