package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// checkSpace refuses a write of about n bytes when this node cannot take
// it: the store's device is full (store.CheckWrite: over the full ratio,
// below the reserve, a derived writer waiting for space) or the raft
// goroutine is waiting for space to persist a Ready. The error wraps
// store.ErrDiskFull, answered SERVICE_NOT_AVAILABLE.
func (r *Replica) checkSpace(n int) error {
	if r.node.DiskStalled() {
		return fmt.Errorf("%w: the raft log cannot be written for lack of space; the broker's disk is full, writes resume when space frees", store.ErrDiskFull)
	}
	return r.st.CheckWrite(n)
}

// DiskFull reports whether this node refuses writes for lack of space.
func (r *Replica) DiskFull() bool { return r.node.DiskStalled() || r.st.DiskFull() }

// Disk-full hand-off. A leader whose disk is full (Replica.DiskFull: over
// the full ratio, below the reserve, a writer waiting for space) refuses
// every write, so a group whose leader is full refuses writes even when
// its other members have room. diskHandoff, on every node, moves the
// leadership away in that case: while this node leads and is full it asks
// each voter for its status (CLUSTER_STATUS over the client port, the
// request `admin cluster status` makes) and transfers leadership to a
// member that is active, has every committed entry, and is not full.
// Members are asked by the leader, when it needs to know; nothing is
// replicated and no follower acts on its own. A member that does not
// answer (down or cut off; under an ACL the question is signed with its
// admin account, signInternal) counts as
// unknown: it is chosen only when no member is known to have space.
// After an attempt the loop waits handoffCooldown before the next.

const (
	handoffTick     = 250 * time.Millisecond
	handoffCooldown = 2 * time.Second
	handoffAsk      = 500 * time.Millisecond
)

// diskState is the broker's view of its members' disks (hand-off).
type diskState struct {
	mu     sync.Mutex
	peers  map[uint64]peerDisk
	logged time.Time // last "no member to hand leadership to"
}

// peerDisk is what this node last learnt of a member's disk.
type peerDisk struct {
	full bool
	at   time.Time
}

func (b *Broker) diskHandoff() {
	t := time.NewTicker(handoffTick)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		n := b.rep.Node()
		// A node whose raft goroutine waits for space cannot transfer;
		// it stops heartbeating, and the others elect a leader.
		if !n.IsLeader() || n.DiskStalled() || !b.rep.DiskFull() || time.Since(last) < handoffCooldown {
			continue
		}
		st := n.Status()
		if st.Transferee != 0 {
			continue
		}
		to, why := b.handoffTarget(st)
		if to == 0 {
			b.logHandoff("cluster: disk full and no member to hand leadership to; refusing writes", "reason", why)
			continue
		}
		last = time.Now()
		b.log.Warn("cluster: disk full: handing leadership to a member with space", "to", to, "member", why)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := n.TransferLeader(ctx, to); err != nil {
			b.log.Warn("cluster: disk-full hand-off failed", "to", to, "err", err)
		}
		cancel()
	}
}

// handoffTarget picks the member to hand leadership to: an active voter
// with every committed entry whose disk is not full, else one whose disk
// state is unknown; 0 if none, with a reason.
func (b *Broker) handoffTarget(st rlStatus) (uint64, string) {
	active := map[uint64]bool{}
	for _, id := range st.Active {
		active[id] = true
	}
	var unknown uint64
	reason := "no active, caught-up voter"
	for _, id := range st.Voters {
		if id == b.cfg.ID || !active[id] || st.Progress[id] < st.Commit {
			continue
		}
		full, known := b.askDisk(id)
		switch {
		case known && !full:
			return id, "has space"
		case !known && unknown == 0:
			unknown = id
		default:
			reason = "every caught-up voter's disk is full"
		}
	}
	if unknown != 0 {
		return unknown, "disk state unknown"
	}
	return 0, reason
}

// askDisk asks member id for its status and records its disk state.
func (b *Broker) askDisk(id uint64) (full, known bool) {
	p, ok := b.peer(id)
	if !ok {
		return false, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), handoffAsk)
	defer cancel()
	conn, err := b.forwardConn(ctx, b.route(id, p).Client)
	if err != nil {
		return false, false
	}
	resp, err := conn.Invoke(ctx, b.signInternal(remoting.NewRequest(remoting.ClusterStatus, nil, nil)))
	if err != nil || resp.Code != remoting.Success {
		return false, false
	}
	var ns NodeStatus
	if err := json.Unmarshal(resp.Body, &ns); err != nil {
		return false, false
	}
	b.disk.mu.Lock()
	if b.disk.peers == nil {
		b.disk.peers = map[uint64]peerDisk{}
	}
	b.disk.peers[id] = peerDisk{full: ns.DiskFull, at: time.Now()}
	b.disk.mu.Unlock()
	return ns.DiskFull, true
}

// peerDiskFull reports whether member id said, within the last minute,
// that its disk is full (preferLeader does not hand leadership back to it).
func (b *Broker) peerDiskFull(id uint64) bool {
	b.disk.mu.Lock()
	defer b.disk.mu.Unlock()
	d, ok := b.disk.peers[id]
	return ok && d.full && time.Since(d.at) < time.Minute
}

// logHandoff logs at most once every 30 s.
func (b *Broker) logHandoff(msg string, args ...any) {
	b.disk.mu.Lock()
	due := time.Since(b.disk.logged) >= 30*time.Second
	if due {
		b.disk.logged = time.Now()
	}
	b.disk.mu.Unlock()
	if due {
		b.log.Warn(msg, args...)
	}
}

// untilSpace runs write again, with a backoff from 10 ms to 1 s, while it
// fails for lack of space (vfs.IsNoSpace), until it succeeds, fails
// otherwise, or the replica stops. Logged once when it starts waiting.
// Used for a snapshot install, which must not stop the node for lack of
// space: each step of it can be run again (Restore).
func (r *Replica) untilSpace(what string, write func() error) error {
	err := write()
	if !vfs.IsNoSpace(err) {
		return err
	}
	r.log.Error("cluster: disk full: waiting for space", "what", what, "err", err)
	wait := 10 * time.Millisecond
	for {
		select {
		case <-r.node.Stopping():
			return err
		case <-time.After(wait):
		}
		if err = write(); !vfs.IsNoSpace(err) {
			if err == nil {
				r.log.Info("cluster: disk space available again", "what", what)
			}
			return err
		}
		wait = min(2*wait, time.Second)
	}
}
