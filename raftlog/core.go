package raftlog

// # The replication core
//
// Core is raft for one group as a plain value: an etcd RawNode plus the
// state raftmq keeps around it (the commit-only appends held back per
// follower, the role and leader-term tracking, the pending ReadIndex
// requests, the split of a Ready's messages into those sent before and
// those sent after its entries are durable). It has no goroutine, no
// channel, no lock and no clock: whoever owns it (Node's raft goroutine in
// the broker, the simulator in the tests) calls it from one goroutine, and
// everything it does happens inside those calls.
//
// The owner's loop is written once, in loop.go (loop.ready), which Node
// and the simulator both drive:
//
//	c.Tick() / c.Step(m) / c.Propose(ents) / c.ReadIndex(f) / ...
//	for c.HasReady() {
//		w := c.Ready()            // role change, read answers, message split, held appends
//		send(w.Send)              // early: the leader's appends, heartbeats, snapshots
//		install(w.Snapshot)       // the state machine restores it
//		persist(w.HardState)      // a new term or vote first, fsynced
//		persist(w.Entries)        // one append + fsync for the whole Ready
//		c.Appended(w.Entries)     // they are durable
//		send(w.After)             // answers and votes: only once durable
//		for each e in w.Committed { c.ApplyConfChange(e); persist the ConfState }
//		apply(w.Commit)           // hand the commit index to the applier
//		c.Advance()
//	}
//	if c.HeldTimerArmed() { arm a timer of CommitNotifyDelay unless armed }
//	on that timer: send(c.FireHeld())
//
// Every persistence step goes through the storage seam (Storage, hence the
// commitlog and the raftstate file) and is the owner's: it decides how to
// wait for a full disk (loop.persist and Node.waitSpace), and what to do
// with messages that arrive meanwhile (StepWhileStalled). Core only reads the storage, through
// raft, and never writes it.
//
// # Moving persistence off the owner goroutine
//
// etcd raft's AsyncStorageWrites replaces the synchronous Ready/Advance
// pair with messages: a Ready then carries a MsgStorageAppend (hard state,
// entries, snapshot, and the responses to deliver once they are durable)
// and a MsgStorageApply (committed entries), addressed to local
// pseudo-nodes; a storage goroutine performs each and steps the responses
// (MsgStorageAppendResp, MsgStorageApplyResp) back into raft, and the
// owner never calls Advance. Core's interface was cut along those lines:
// Work.HardState/Entries/Snapshot/After are exactly a MsgStorageAppend and
// its responses, Work.Committed/Commit a MsgStorageApply, and Appended is
// the place an append's completion is reported. Going async would mean:
// setting raft.Config.AsyncStorageWrites in NewCore; Ready builds Work from
// the two storage messages instead of from the Ready's fields: Send stays
// the messages to peers that need no local write (held appends still taken
// out), and After becomes the append message's Responses, raft's own
// version of the early/late split; Advance no longer calls the RawNode
// (raft forbids it in that mode); and Appended(ents) also steps the
// append's MsgStorageAppendResp into raft (and records firstOwnIndex as
// now), with a matching call for MsgStorageApplyResp once the applier is
// done. The owner then hands Work's persistence half to a writer goroutine
// and goes on stepping and ticking while the device writes, so the next
// Ready's entries overlap the previous fsync; a leader counts its own copy
// towards the quorum only once the append response is stepped, as it does
// now on Advance. The held appends, the role tracking and the read table
// do not change.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Core is the synchronous replication core (see the file comment). Its
// methods must be called from one goroutine at a time, its owner's, except
// LeaderTerm, FirstOwnIndex and LeaderChanges, which any goroutine may call.
type Core struct {
	id      uint64
	log     *slog.Logger
	rn      *raft.RawNode
	storage *Storage

	// holdOn is whether commit-only appends are held back
	// (CoreConfig.HoldCommits).
	holdOn bool

	// rd is the Ready handed out by Ready and not yet advanced.
	rd      raft.Ready
	inReady bool

	// held are the commit-only appends held back per follower; heldArmed
	// says the owner's timer should be (or is) running for them.
	held      map[uint64]*pb.Message
	heldArmed bool

	// leaderTerm is the term in which this node leads, 0 otherwise;
	// firstOwnIndex is the index of the first entry of that term once it
	// is durable here. leaderChanges counts the leaders learnt of, one per
	// term with a known leader; lastLead and lastLeadTerm are the last one.
	// The three atomics are read by other goroutines (Node.IsLeader,
	// LeaderReady, LeaderChanges).
	leaderTerm             atomic.Uint64
	firstOwnIndex          atomic.Uint64
	leaderChanges          atomic.Uint64
	lastLead, lastLeadTerm uint64

	// reads are the pending ReadIndex requests by request context;
	// readSeq numbers them, from a random start (NewCore).
	reads   map[uint64]func(index uint64)
	readSeq uint64

	// ticks counts Tick calls; heard is the tick at which a message from
	// each peer was last stepped. Status's Active is read from them, not
	// from raft's RecentActive, which CheckQuorum clears for every
	// follower at the end of each election timeout: read just after that,
	// a follower that answers every heartbeat would look inactive.
	ticks        uint64
	heard        map[uint64]uint64
	electionTick uint64
}

// Work is what one Ready asks of the owner, in the order it must be done
// (see the file comment). Its slices belong to the Ready: they are valid
// until Advance.
type Work struct {
	// Send are the messages that may go out before this Ready's entries
	// are durable (sendsEarly), held commit-only appends taken out.
	Send []*pb.Message
	// Snapshot, if not nil, is to be installed in the state machine before
	// anything else is persisted.
	Snapshot *pb.Snapshot
	// HardState, if not nil, is to be persisted (fsynced if term or vote
	// changed) before Entries.
	HardState *pb.HardState
	// Entries are to be appended and made durable, with one fsync.
	Entries []*pb.Entry
	// After are the messages to send once Entries and HardState are
	// durable: answers to appends, votes.
	After []*pb.Message
	// Committed are the newly committed entries; each goes through
	// ApplyConfChange before Commit is handed to the applier.
	Committed []*pb.Entry
	// Commit and CommitTerm are the index and term of the last of
	// Committed (0 when there are none).
	Commit, CommitTerm uint64
	// StatusChanged says the role or the hard state changed.
	StatusChanged bool
}

// Rand is a source of random numbers (math/rand/v2's *Rand is one).
type Rand interface {
	Uint64() uint64
}

// CoreConfig configures a Core: raft's settings and the state it starts
// from. Node builds one from its Config; the simulator builds its own.
type CoreConfig struct {
	ID      uint64
	Storage *Storage
	// Applied is the index the state machine has applied.
	Applied uint64
	// Bootstrap lists the initial voters, used only when the log is empty.
	Bootstrap []raft.Peer
	// ElectionTick and HeartbeatTick count ticks (raft.Config).
	ElectionTick, HeartbeatTick int
	// HoldCommits holds back commit-only appends to followers in
	// replicate state until the owner's timer fires (Work.Send leaves
	// them out; see Timing.CommitNotifyDelay).
	HoldCommits bool
	// MaxSizePerMsg and MaxInflightMsgs are raft's flow control per
	// follower.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// Rand is where the core draws the start of its read ids.
	Rand   Rand
	Logger *slog.Logger
}

// NewCore builds the core of node cfg.ID over cfg.Storage: it raises the
// in-memory commit index to cfg.Applied, creates the RawNode and, on an
// empty log, bootstraps cfg.Bootstrap.
func NewCore(cfg CoreConfig) (*Core, error) {
	if cfg.ID == 0 {
		return nil, errors.New("raftlog: node ID 0 is reserved")
	}
	if cfg.Storage == nil || cfg.Rand == nil {
		return nil, errors.New("raftlog: a core needs a storage and a random source")
	}
	if cfg.ElectionTick <= 0 || cfg.HeartbeatTick <= 0 || cfg.MaxSizePerMsg == 0 || cfg.MaxInflightMsgs <= 0 {
		return nil, fmt.Errorf("raftlog: core settings unset: election tick %d, heartbeat tick %d, max message size %d, max in flight %d",
			cfg.ElectionTick, cfg.HeartbeatTick, cfg.MaxSizePerMsg, cfg.MaxInflightMsgs)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hs, _, err := cfg.Storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("raftlog: initial state: %w", err)
	}
	last, err := cfg.Storage.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("raftlog: last index: %w", err)
	}
	// The commit index is persisted lazily; entries the state machine has
	// applied were committed, so the commit index is at least that.
	if cfg.Applied > hs.GetCommit() {
		if cfg.Applied > last {
			return nil, fmt.Errorf("raftlog: applied index %d beyond the last log index %d", cfg.Applied, last)
		}
		cfg.Storage.raiseCommit(cfg.Applied)
	}
	rc := &raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTick,
		HeartbeatTick:             cfg.HeartbeatTick,
		Storage:                   cfg.Storage,
		Applied:                   cfg.Applied,
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxInflightMsgs:           cfg.MaxInflightMsgs,
		MaxCommittedSizePerReady:  64 << 20,
		MaxUncommittedEntriesSize: 256 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    &slogRaftLogger{l: cfg.Logger.With("raft", cfg.ID)},
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	if last == 0 && len(cfg.Bootstrap) > 0 {
		if err := rn.Bootstrap(cfg.Bootstrap); err != nil {
			return nil, fmt.Errorf("raftlog: bootstrap: %w", err)
		}
	}
	// Read ids start at a random point of their own, so that an answer
	// to a request of an earlier incarnation of this node (queued at the
	// leader or on the network across a restart) matches no request of
	// this one.
	return &Core{
		id:      cfg.ID,
		log:     cfg.Logger,
		rn:      rn,
		storage: cfg.Storage,
		holdOn:  cfg.HoldCommits,
		reads:   map[uint64]func(uint64){},
		readSeq: cfg.Rand.Uint64() &^ 0xFFFFFFFF,

		heard:        map[uint64]uint64{},
		electionTick: uint64(cfg.ElectionTick),
	}, nil
}

// Tick advances raft's logical clock by one tick.
func (c *Core) Tick() {
	c.ticks++
	c.rn.Tick()
}

// Step hands raft a message from a peer. Errors for unknown peers and
// local message types are ignored; others are logged at debug level.
func (c *Core) Step(m *pb.Message) {
	if from := m.GetFrom(); from != 0 && from != c.id {
		c.heard[from] = c.ticks
	}
	if err := c.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
		c.log.Debug("raftlog: step", "type", m.GetType(), "from", m.GetFrom(), "err", err)
	}
}

// Propose steps ents as one proposal: they share one Ready and one fsync.
// The error is raft's refusal (raft.ErrProposalDropped: no leader, not
// leader, leadership transfer in progress).
func (c *Core) Propose(ents []*pb.Entry) error {
	return c.rn.Step(&pb.Message{Type: pb.MessageType_MsgProp.Enum(), From: proto.Uint64(c.id), Entries: ents})
}

// ProposeConfChange proposes a membership change.
func (c *Core) ProposeConfChange(cc *pb.ConfChangeV2) error { return c.rn.ProposeConfChange(cc) }

// Campaign makes this node start an election.
func (c *Core) Campaign() error { return c.rn.Campaign() }

// TransferLeader asks this node, the leader, to hand leadership to to. A
// transfer to itself is a no-op; one to a node that is not a voter, or
// asked of a node that does not lead, is refused.
func (c *Core) TransferLeader(to uint64) error {
	st := c.rn.Status()
	if st.RaftState != raft.StateLeader {
		return fmt.Errorf("raftlog: node %d is not the leader (leader is %d)", c.id, st.Lead)
	}
	if _, ok := st.Config.Voters.IDs()[to]; !ok {
		return fmt.Errorf("raftlog: node %d is not a voting member of the group", to)
	}
	if to != c.id {
		c.rn.TransferLeader(to)
	}
	return nil
}

// ReadIndex starts a read-index request; answer is called from a later
// Ready with the index, unless the request is lost (no leader, a leader
// change) or forgotten. It returns the request's id for ForgetRead.
func (c *Core) ReadIndex(answer func(index uint64)) uint64 {
	c.readSeq++
	id := c.readSeq
	c.reads[id] = answer
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], id)
	c.rn.ReadIndex(rctx[:])
	return id
}

// ForgetRead drops a pending read-index request.
func (c *Core) ForgetRead(id uint64) { delete(c.reads, id) }

// PendingReads is the number of read-index requests not yet answered.
func (c *Core) PendingReads() int { return len(c.reads) }

// ReportUnreachable tells raft a message to id could not be sent.
func (c *Core) ReportUnreachable(id uint64) { c.rn.ReportUnreachable(id) }

// ReportSnapshot tells raft whether a snapshot reached id.
func (c *Core) ReportSnapshot(id uint64, failure bool) {
	st := raft.SnapshotFinish
	if failure {
		st = raft.SnapshotFailure
	}
	c.rn.ReportSnapshot(id, st)
}

// HasReady reports whether raft has work for the owner.
func (c *Core) HasReady() bool { return c.rn.HasReady() }

// Ready takes raft's next Ready and returns the work it asks for: it
// records a role change, answers the read-index requests it resolves,
// holds back commit-only appends and splits the messages into those sent
// at once and those sent once the entries are durable. The owner does the
// work in Work's field order, then calls Advance.
func (c *Core) Ready() Work {
	rd := c.rn.Ready()
	c.rd, c.inReady = rd, true
	if rd.SoftState != nil {
		c.roleChanged(rd.SoftState)
	}
	c.answerReads(rd.ReadStates)
	var w Work
	if len(rd.Messages) > 0 {
		early := make([]*pb.Message, 0, len(rd.Messages))
		for _, m := range rd.Messages {
			switch {
			case !sendsEarly(m):
				w.After = append(w.After, m)
			case c.hold(m):
			default:
				c.supersede(m)
				early = append(early, m)
			}
		}
		if len(early) > 0 {
			w.Send = early
		}
	}
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		w.Snapshot = rd.Snapshot
	}
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		w.HardState = rd.HardState
	}
	w.Entries = rd.Entries
	if k := len(rd.CommittedEntries); k > 0 {
		w.Committed = rd.CommittedEntries
		last := rd.CommittedEntries[k-1]
		w.Commit, w.CommitTerm = last.GetIndex(), last.GetTerm()
	}
	w.StatusChanged = rd.SoftState != nil || rd.HardState != nil
	return w
}

// Appended tells the core that ents, the entries of the current Work, are
// durable (with AsyncStorageWrites this is where MsgStorageAppendResp
// would be stepped).
func (c *Core) Appended(ents []*pb.Entry) {
	if lt := c.leaderTerm.Load(); lt != 0 && c.firstOwnIndex.Load() == 0 {
		for _, e := range ents {
			if e.GetTerm() == lt {
				c.firstOwnIndex.Store(e.GetIndex())
				break
			}
		}
	}
}

// ApplyConfChange applies e to raft's membership if it is a membership
// change, and returns the change and the new ConfState for the owner to
// persist (Storage.SetConfState) and announce; nil, nil for other entries.
func (c *Core) ApplyConfChange(e *pb.Entry) (*pb.ConfChangeV2, *pb.ConfState, error) {
	var cc pb.ConfChangeI
	switch e.GetType() {
	case pb.EntryType_EntryConfChange:
		var cv pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cv); err != nil {
			return nil, nil, fmt.Errorf("raftlog: decode membership change at %d: %w", e.GetIndex(), err)
		}
		cc = &cv
	case pb.EntryType_EntryConfChangeV2:
		var cv pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cv); err != nil {
			return nil, nil, fmt.Errorf("raftlog: decode membership change at %d: %w", e.GetIndex(), err)
		}
		cc = &cv
	default:
		return nil, nil, nil
	}
	cs := c.rn.ApplyConfChange(cc)
	return cc.AsV2(), cs, nil
}

// Advance tells raft that the current Work is done.
func (c *Core) Advance() {
	if !c.inReady {
		return
	}
	c.rn.Advance(c.rd)
	c.rd, c.inReady = raft.Ready{}, false
}

// StepWhileStalled steps a message received while the owner waits for
// disk space to persist the current Work, so that a stalled node learns of
// a newer term and its leader, and a stalled leader stops claiming to lead
// once another is elected. etcd raft allows Step between Ready and Advance
// (its own node does it); whatever the step produces goes out with the
// next Ready, after this one is persisted. Appends that carry entries, and
// snapshots, are dropped: raft sends them again, and holding them in
// memory while the disk is full would only grow the unstable log. It
// reports whether the node stopped leading because of m.
func (c *Core) StepWhileStalled(m *pb.Message) (steppedDown bool) {
	switch {
	case m.GetType() == pb.MessageType_MsgSnap,
		m.GetType() == pb.MessageType_MsgApp && len(m.GetEntries()) > 0:
		return false
	}
	c.Step(m)
	if bs := c.rn.BasicStatus(); bs.RaftState != raft.StateLeader && c.leaderTerm.Load() != 0 {
		c.leaderTerm.Store(0)
		c.firstOwnIndex.Store(0)
		c.log.Info("raftlog: role (while waiting for space)", "role", bs.RaftState.String(), "leader", bs.Lead, "term", bs.GetTerm())
		return true
	}
	return false
}

// HeldTimerArmed reports whether commit-only appends are held and the
// owner's timer for them (Config.CommitNotifyDelay) should be running. It
// stays true until FireHeld; the owner arms its timer when it sees it
// become true and leaves a running timer alone.
func (c *Core) HeldTimerArmed() bool { return c.heldArmed }

// FireHeld is the owner's timer firing: it returns the held appends that
// nothing has superseded, to send now, and disarms.
func (c *Core) FireHeld() []*pb.Message {
	c.heldArmed = false
	if len(c.held) == 0 {
		return nil
	}
	msgs := make([]*pb.Message, 0, len(c.held))
	for _, m := range c.held {
		msgs = append(msgs, m)
	}
	// Map order is random: send in recipient order, so that a replay sends
	// the same bytes.
	slices.SortFunc(msgs, func(a, b *pb.Message) int { return cmp.Compare(a.GetTo(), b.GetTo()) })
	clear(c.held)
	return msgs
}

// Held returns the commit index of the append held per follower.
func (c *Core) Held() map[uint64]uint64 {
	out := make(map[uint64]uint64, len(c.held))
	for to, m := range c.held {
		out[to] = m.GetCommit()
	}
	return out
}

// hold keeps m back if it is an append carrying only a commit index, to a
// follower in replicate state, and holding is on (Config.CommitNotifyDelay);
// it reports whether it did. A newer held append to the same follower
// replaces the older one.
func (c *Core) hold(m *pb.Message) bool {
	if !c.holdOn || m.GetType() != pb.MessageType_MsgApp || len(m.GetEntries()) != 0 {
		return false
	}
	replicating := false
	c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == m.GetTo() {
			replicating = pr.State == tracker.StateReplicate
		}
	})
	if !replicating {
		return false
	}
	if c.held == nil {
		c.held = make(map[uint64]*pb.Message)
	}
	c.held[m.GetTo()] = m
	c.heldArmed = true
	return true
}

// supersede drops the append held for m's follower if m, about to be sent,
// is an append of the same term that tells it the same commit index or a
// later one. (A heartbeat carries a commit index too, but not always the
// whole of it; the held append is not worth the reasoning.)
func (c *Core) supersede(m *pb.Message) {
	if len(c.held) == 0 || m.GetType() != pb.MessageType_MsgApp {
		return
	}
	if h := c.held[m.GetTo()]; h != nil && m.GetTerm() == h.GetTerm() && m.GetCommit() >= h.GetCommit() {
		delete(c.held, m.GetTo())
	}
}

// sendsEarly reports whether a message may go out before this Ready's
// entries are durable: the leader's appends, heartbeats and snapshots
// (the leader writes its log in parallel with replicating it; raft thesis
// §10.2.1). Responses and votes wait for the fsync.
func sendsEarly(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap, pb.MessageType_MsgTimeoutNow:
		return true
	}
	return false
}

func (c *Core) roleChanged(ss *raft.SoftState) {
	if ss.RaftState != raft.StateLeader {
		clear(c.held) // another term's appends: nothing to tell anyone
	}
	bs := c.rn.BasicStatus()
	if ss.RaftState == raft.StateLeader {
		if c.leaderTerm.Load() != bs.GetTerm() {
			c.firstOwnIndex.Store(0)
			c.leaderTerm.Store(bs.GetTerm())
		}
	} else {
		c.leaderTerm.Store(0)
		c.firstOwnIndex.Store(0)
	}
	if ss.Lead != 0 && (ss.Lead != c.lastLead || bs.GetTerm() != c.lastLeadTerm) {
		c.lastLead, c.lastLeadTerm = ss.Lead, bs.GetTerm()
		c.leaderChanges.Add(1)
	}
	c.log.Info("raftlog: role", "role", ss.RaftState.String(), "leader", ss.Lead, "term", bs.GetTerm())
}

// answerReads hands the read states of a Ready to their waiters.
func (c *Core) answerReads(rs []raft.ReadState) {
	for _, r := range rs {
		if len(r.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(r.RequestCtx)
		if f, ok := c.reads[id]; ok {
			delete(c.reads, id)
			f(r.Index)
		}
	}
}

// LeaderTerm is the term in which this node leads, 0 when it does not.
func (c *Core) LeaderTerm() uint64 { return c.leaderTerm.Load() }

// FirstOwnIndex is the index of the first entry of LeaderTerm durable on
// this node (0 until there is one).
func (c *Core) FirstOwnIndex() uint64 { return c.firstOwnIndex.Load() }

// LeaderChanges is how many leaders this node has learnt of: one per term
// in which it knew a leader.
func (c *Core) LeaderChanges() uint64 { return c.leaderChanges.Load() }

// BasicStatus is raft's basic status (term, vote, commit, role, leader).
func (c *Core) BasicStatus() raft.BasicStatus { return c.rn.BasicStatus() }

// heardWithin is whether a message from peer id was stepped within the
// last n ticks.
func (c *Core) heardWithin(id, n uint64) bool {
	at, ok := c.heard[id]
	return ok && c.ticks-at <= n
}

// RoleLearner is Status.Role of a learner: a member that receives the log
// but does not vote yet.
const RoleLearner = "StateLearner"

// Status builds the node's Status (Applied and AppliedTerm are left to
// the owner).
func (c *Core) Status() *Status {
	bs := c.rn.BasicStatus()
	st := &Status{
		ID: c.id, Term: bs.GetTerm(), Vote: bs.GetVote(), Leader: bs.Lead, Role: bs.RaftState.String(),
		Commit: bs.GetCommit(), Transferee: bs.LeadTransferee,
	}
	st.LastIndex, _ = c.storage.LastIndex()
	li := c.rn.Status()
	for id := range li.Config.Voters.IDs() {
		st.Voters = append(st.Voters, id)
	}
	slices.Sort(st.Voters)
	for id := range li.Config.Learners {
		st.Learners = append(st.Learners, id)
	}
	slices.Sort(st.Learners)
	if slices.Contains(st.Learners, c.id) {
		st.Role = RoleLearner // raft calls a learner a follower
	}
	if bs.RaftState == raft.StateLeader {
		st.Progress = make(map[uint64]uint64, len(li.Progress))
		for id, pr := range li.Progress {
			st.Progress[id] = pr.Match
			if id == c.id || c.heardWithin(id, c.electionTick) {
				st.Active = append(st.Active, id)
			}
		}
		slices.Sort(st.Active)
	}
	return st
}
