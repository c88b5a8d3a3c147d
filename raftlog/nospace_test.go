package raftlog

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/raftmq/raftmq/internal/vfs"
)

type nopTransport struct{}

func (nopTransport) Send([]*pb.Message) {}

type countingSM struct{ applied atomic.Uint64 }

func (c *countingSM) Apply(index uint64, _ []*Batch) error { c.applied.Store(index); return nil }
func (c *countingSM) Restore(s *pb.Snapshot) error         { return nil }

// A raft state write that fails for lack of space leaves the state as it
// was, so that the retry writes it (not "unchanged, nothing to do").
func TestSetHardStateNoSpaceRetries(t *testing.T) {
	mem := vfs.NewMem()
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if strings.HasSuffix(path, "raftstate") {
			return tg.MaybeError(op, path)
		}
		return nil
	}))
	s, _ := openStorage(t, fs)
	require.NoError(t, s.SetHardState(hardState(2, 1, 0)))
	tg.Arm(vfs.OpWrite)
	require.True(t, vfs.IsNoSpace(s.SetHardState(hardState(3, 2, 0))))
	tg.Disarm()
	require.NoError(t, s.SetHardState(hardState(3, 2, 0)))
	// What is on disk: a second storage over the same log, once the first
	// gave the log's writer back.
	require.NoError(t, s.Close())
	s2, err := OpenStorage(mem, "/n", s.log)
	require.NoError(t, err)
	defer s2.Close()
	hs, _, err := s2.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(3), hs.GetTerm())
	require.Equal(t, uint64(2), hs.GetVote())
}

// A node whose log append finds the disk full neither stops nor applies:
// it waits, reports DiskStalled, and goes on by itself once space frees.
func TestNodeWaitsForSpace(t *testing.T) {
	mem := vfs.NewMem()
	tg := &vfs.Toggle{Err: vfs.ErrNoSpace}
	fs := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if strings.Contains(path, "/log/") {
			return tg.MaybeError(op, path)
		}
		return nil
	}))
	st, _ := openStorage(t, fs)
	sm := &countingSM{}
	n, err := NewNode(Config{ID: 1, Storage: st, SM: sm,
		Bootstrap: []raft.Peer{{ID: 1}}, Timing: Timing{TickInterval: 5 * time.Millisecond}})
	require.NoError(t, err)
	n.Start(nopTransport{})
	defer n.Stop()
	require.Eventually(t, n.IsLeader, 5*time.Second, 5*time.Millisecond)
	ctx := context.Background()
	require.NoError(t, n.Submit(ctx, &Request{Data: []byte("a"), Waiter: newTestWaiter()}))
	require.Eventually(t, func() bool { return sm.applied.Load() >= 3 }, 5*time.Second, 5*time.Millisecond)
	before := sm.applied.Load()

	tg.Arm(vfs.OpWrite, vfs.OpCreate)
	require.NoError(t, n.Submit(ctx, &Request{Data: []byte("b"), Waiter: newTestWaiter()}))
	require.Eventually(t, n.DiskStalled, 5*time.Second, 5*time.Millisecond)
	require.False(t, n.LeaderReady(), "a leader waiting for space is not ready")
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, before, sm.applied.Load(), "an entry that is not durable was applied")
	select {
	case <-n.Done():
		t.Fatalf("node stopped on a full disk: %v", n.Err())
	default:
	}

	tg.Disarm()
	require.Eventually(t, func() bool { return sm.applied.Load() > before }, 5*time.Second, 5*time.Millisecond)
	require.False(t, n.DiskStalled())
	require.NoError(t, n.Err())
}

// A snapshot that cannot be made for lack of space is "temporarily
// unavailable" to raft (which panics on other errors), not a failure.
func TestSnapshotNoSpaceIsTemporary(t *testing.T) {
	s, _ := openStorage(t, vfs.NewMem())
	s.SnapshotData = func() (uint64, []byte, error) { return 0, nil, fmt.Errorf("checkpoint: %w", vfs.ErrNoSpace) }
	_, err := s.Snapshot()
	require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable)
}
