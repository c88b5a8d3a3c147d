package raftlog

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pack keeps the requests' order, merges runs of the merge kind up to the
// batch size and gives every other request an entry of its own, each entry
// with a fresh id under the node's epoch.
func TestPackRequests(t *testing.T) {
	const epoch = 0xABCD_0000_0000
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		8, time.Second, epoch<<16)
	req := func(kind byte, data string) *Request {
		return &Request{Kind: kind, Data: []byte(data), Waiter: newTestWaiter()}
	}
	reqs := []*Request{req(0, "aaa"), req(0, "bbbb"), req(1, "cc"), req(0, "ddddd"), req(0, "eeeeee"), req(0, "f")}
	ents, bs := tb.pack(reqs, time.Unix(1, 0))
	type ent struct {
		kind byte
		data string
		reqs int
	}
	var got []ent
	ids := map[uint64]bool{}
	for i, e := range ents {
		d := e.GetData()
		id := binary.BigEndian.Uint64(d[1:plainHeaderSize])
		require.Equal(t, bs[i].ID, id, "entry %d carries its batch's id", i)
		require.Equal(t, uint64(epoch<<16), id&^0xFFFFFFFF, "entry %d: id under the epoch", i)
		require.False(t, ids[id], "id %x used twice", id)
		ids[id] = true
		got = append(got, ent{d[0], string(d[plainHeaderSize:]), len(bs[i].Requests)})
		require.Same(t, bs[i], tb.byID[id], "entry %d is tracked", i)
	}
	require.Equal(t, []ent{{0, "aaabbbb", 2}, {1, "cc", 1}, {0, "ddddd", 1}, {0, "eeeeeef", 2}}, got)
	require.Len(t, tb.live, 4)
}

// A request with headroom alone becomes its entry in place; merged with
// others, only its payload (after the room) is copied.
func TestPackRequestsWithHeadroom(t *testing.T) {
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		1<<20, time.Second, 1<<32)
	room := func(data string) *Request {
		b := append(make([]byte, plainHeaderSize), data...)
		return &Request{Data: b, Headroom: true, Waiter: newTestWaiter()}
	}
	alone := room("alone")
	backing := &alone.Data[0]
	ents, bs := tb.pack([]*Request{alone, {Kind: 1, Data: []byte("cmd"), Waiter: newTestWaiter()}, room("x"), {Data: []byte("y"), Waiter: newTestWaiter()}, room("z")}, time.Unix(1, 0))
	require.Len(t, ents, 3)
	require.Same(t, backing, &ents[0].GetData()[0], "a lone request with headroom was copied")
	require.Equal(t, "alone", string(ents[0].GetData()[plainHeaderSize:]))
	require.Equal(t, bs[0].ID, plainBatchID(ents[0].GetData()))
	require.Equal(t, "cmd", string(ents[1].GetData()[plainHeaderSize:]))
	require.Equal(t, "xyz", string(ents[2].GetData()[plainHeaderSize:]))
	require.Equal(t, bs[2].ID, plainBatchID(ents[2].GetData()))
}

// A request is answered by the state machine at the index its entry was
// applied at, on the leader that proposed it.
func TestRequestsAnsweredAtTheirIndex(t *testing.T) {
	g := newStepGroup(t, 3)
	g.elect(1)
	wa := g.propose(1, "a")
	wb := g.propose(1, "b")
	g.quiet()
	for _, c := range []struct {
		w    *testWaiter
		data string
	}{{wa, "a"}, {wb, "b"}} {
		idx, err := await(t, c.w, c.data+" not answered")
		require.NoError(t, err)
		data, _ := g.sms[1].snapshot()
		require.Equal(t, c.data, data[idx], "%s answered with index %d", c.data, idx)
	}
}

// An entry a cut-off leader persisted and a new leader overwrote fails with
// ErrLost once this node applies the index: not before (while it may still
// commit) and not with the other entry's answer.
func TestOverwrittenRequestFailsWithErrLost(t *testing.T) {
	g := newStepGroup(t, 3)
	g.elect(1)
	g.setCut(1, true)
	lost := g.propose(1, "lost")
	_, _, ok := lost.outcome()
	require.False(t, ok, "a proposal that cannot commit was answered")
	nl := g.electAmong(2, 3)
	won := g.propose(nl, "won")
	g.quiet()
	g.setCut(1, false)
	for range DefaultHeartbeatTick { // a heartbeat brings node 1 into the new term
		g.tick(nl, 0)
	}
	g.quiet()
	g.propose(nl, "after")
	g.quiet()
	_, err := await(t, lost, "the overwritten proposal was never answered")
	require.ErrorIs(t, err, ErrLost)
	idx, err := await(t, won)
	require.NoError(t, err)
	data, _ := g.sms[1].snapshot()
	require.Equal(t, "won", data[idx], "node 1 applied the new leader's entry")
}

// A request marked Expires fails with a deadline error once it has waited
// WaitTimeout on the owner's clock; one without waits on, and is answered
// when its entry commits after all.
func TestExpiringRequestsTimeOutOnTheOwnersClock(t *testing.T) {
	g := newStepGroup(t, 3)
	g.elect(1)
	g.setCut(1, true)
	exp := g.submit(1, &Request{Data: []byte("expires"), Expires: true})
	stay := g.propose(1, "stays")
	g.tick(1, DefaultWaitTimeout-time.Millisecond)
	_, _, ok := exp.outcome()
	require.False(t, ok, "timed out before WaitTimeout")
	// The owner looks every tenth of the wait.
	g.tick(1, DefaultWaitTimeout/10)
	_, err := await(t, exp, "not timed out a tenth of WaitTimeout after it")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, _, ok = stay.outcome()
	require.False(t, ok, "a request without Expires was timed out")

	g.setCut(1, false)
	for range DefaultHeartbeatTick { // a heartbeat: the followers catch up
		g.tick(1, 0)
	}
	g.quiet()
	_, err = await(t, stay, "the request was not answered after its entry committed")
	require.NoError(t, err)
}

// Requests raft refuses fail with ErrDropped; on stop, queued and never
// persisted ones fail with ErrStopped, persisted ones with an unknown
// outcome (they may commit elsewhere).
func TestRequestFailuresOnDropAndStop(t *testing.T) {
	g := newStepGroup(t, 3)
	g.elect(1)
	// A leader transferring leadership refuses proposals.
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	g.setCut(2, true)
	require.NoError(t, g.nodes[1].TransferLeader(ctx, 2))
	g.settle(1)
	dropped := g.propose(1, "dropped")
	_, err := await(t, dropped, "a refused proposal was not failed")
	require.ErrorIs(t, err, ErrDropped)

	g2 := newStepGroup(t, 3)
	g2.elect(1)
	g2.setCut(1, true)
	persisted := g2.propose(1, "persisted")
	g2.nodes[1].Stop()
	_, err = await(t, persisted)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	w := newTestWaiter()
	require.ErrorIs(t, g2.nodes[1].Submit(ctx, &Request{Data: []byte("late"), Waiter: w}), ErrStopped)
}

// A batch that never got an index (raft discarded it unpersisted) fails
// with ErrLost after unindexedExpiry; a persisted one is not failed by age.
func TestUnindexedBatchesExpire(t *testing.T) {
	tb := newBatchTable(Framing{AppendHeader: appendPlainHeader, BatchID: plainBatchID, HeaderSize: plainHeaderSize},
		1<<20, time.Second, 1<<32)
	t0 := time.Unix(100, 0)
	wa, wb := newTestWaiter(), newTestWaiter()
	ents, _ := tb.pack([]*Request{{Kind: 1, Data: []byte("a"), Waiter: wa}, {Kind: 1, Data: []byte("b"), Waiter: wb}}, t0)
	ents[1].Index = new(uint64(7))
	tb.appended(ents[1:])
	tb.sweep(t0.Add(unindexedExpiry-time.Second), 0)
	_, _, ok := wa.outcome()
	require.False(t, ok)
	tb.sweep(t0.Add(unindexedExpiry), 0)
	_, err := await(t, wa)
	require.ErrorIs(t, err, ErrLost)
	_, _, ok = wb.outcome()
	require.False(t, ok, "a persisted batch was failed for its age")
	require.Len(t, tb.live, 1)
	tb.sweep(t0.Add(2*unindexedExpiry), 7)
	require.Empty(t, tb.live, "an applied batch is still tracked")
}

// electAmong lets the leader lease of ids' followers run out (CheckQuorum)
// and elects one of them.
func (g *stepGroup) electAmong(ids ...uint64) uint64 {
	g.t.Helper()
	for range DefaultElectionTick {
		for _, id := range ids {
			g.tick(id, 0)
		}
	}
	g.quiet()
	for range 50 {
		for _, id := range ids {
			if g.nodes[id].IsLeader() {
				return id
			}
		}
		g.tick(ids[0], 0)
		g.quiet()
	}
	g.t.Fatalf("none of %v became leader", ids)
	return 0
}

// await waits for w's outcome (the applier answers on its own goroutine).
func await(t *testing.T, w *testWaiter, msg ...any) (uint64, error) {
	t.Helper()
	select {
	case <-w.done:
		return w.index, w.err
	case <-time.After(stepTimeout):
		require.FailNow(t, "no outcome", msg...)
		return 0, nil
	}
}

func (g *stepGroup) setCut(id uint64, cut bool) {
	g.net.mu.Lock()
	defer g.net.mu.Unlock()
	g.net.cut[id] = cut
}
