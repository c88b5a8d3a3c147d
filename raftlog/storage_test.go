package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/commitlog"
	"github.com/raftmq/raftmq/internal/vfs"
)

func openStorage(t *testing.T, fs vfs.FS) (*Storage, *commitlog.Log) {
	t.Helper()
	l, err := commitlog.Open(fs, "/n/log", commitlog.Options{SegmentSize: 4096})
	require.NoError(t, err)
	s, err := OpenStorage(fs, "/n", l)
	require.NoError(t, err)
	return s, l
}

func ents(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term), Type: pb.EntryType_EntryNormal.Enum(),
			Data: []byte(fmt.Sprintf("e%d-t%d-%s", i, term, make([]byte, i%300)))})
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
}

// The commitlog-backed Storage answers like raft's own MemoryStorage (the
// naive model) over random appends with conflicts.
func TestStorageMatchesMemoryStorage(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		s, l := openStorage(t, vfs.NewMem())
		m := raft.NewMemoryStorage()
		term := uint64(1)
		last := uint64(0)
		for step := 0; step < 40; step++ {
			from := last + 1
			if last > 0 && rng.IntN(4) == 0 {
				from = 1 + uint64(rng.IntN(int(last)))
				term++
			}
			n := uint64(1 + rng.IntN(5))
			es := ents(from, from+n-1, term)
			require.NoError(t, s.Append(es))
			require.NoError(t, m.Append(es))
			last = from + n - 1
			check(t, s, m, seed)
		}
		require.NoError(t, s.Close())
		require.NoError(t, l.Close())
	}
}

func check(t *testing.T, s *Storage, m *raft.MemoryStorage, seed uint64) {
	t.Helper()
	sf, _ := s.FirstIndex()
	mf, _ := m.FirstIndex()
	sl, _ := s.LastIndex()
	ml, _ := m.LastIndex()
	require.Equal(t, mf, sf, "seed %d first", seed)
	require.Equal(t, ml, sl, "seed %d last", seed)
	for i := uint64(0); i <= ml+1; i++ {
		st, serr := s.Term(i)
		mt, merr := m.Term(i)
		require.Equal(t, merr, serr, "seed %d term(%d) error", seed, i)
		require.Equal(t, mt, st, "seed %d term(%d)", seed, i)
	}
	se, serr := s.Entries(mf, ml+1, 2000)
	me, merr := m.Entries(mf, ml+1, 2000)
	require.Equal(t, merr, serr)
	require.Equal(t, len(me), len(se), "seed %d entries with maxSize", seed)
	for k := range me {
		require.Equal(t, me[k].GetIndex(), se[k].GetIndex())
		require.Equal(t, me[k].GetTerm(), se[k].GetTerm())
		require.Equal(t, me[k].GetType(), se[k].GetType())
		require.Equal(t, me[k].GetData(), se[k].GetData())
	}
	_, serr = s.Entries(ml+1, ml+2, 100)
	require.ErrorIs(t, serr, raft.ErrUnavailable)
}

func TestHardStateDurableAndTornSlot(t *testing.T) {
	fs := vfs.NewMem()
	s, l := openStorage(t, fs)
	require.NoError(t, s.Append(ents(1, 10, 2)))
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	require.NoError(t, s.SetConfState(cs))
	require.NoError(t, s.SetHardState(hardState(2, 1, 7)))
	require.NoError(t, s.SetHardState(hardState(3, 2, 9)))

	// A crash right after: fsynced state survives exactly.
	crashed := fs.CrashClone(rand.New(rand.NewPCG(1, 1)), 0)
	s2, l2 := openStorage(t, crashed)
	hs, gotCS, err := s2.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(hardState(3, 2, 9), hs), "got %v", hs)
	require.Equal(t, cs.Voters, gotCS.Voters)
	li, _ := s2.LastIndex()
	require.Equal(t, uint64(10), li)
	s2.Close()
	l2.Close()

	// Tear the newest slot: the previous state is used, never garbage.
	f, err := crashed.OpenReadWrite("/n/" + stateName)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff, 0xff}, int64(s.mu.seq%2)*stSlot+stOffHSLen+4)
	require.NoError(t, err)
	s3, l3 := openStorage(t, crashed)
	hs, _, _ = s3.InitialState()
	require.True(t, proto.Equal(hardState(2, 1, 7), hs), "got %v", hs)
	s3.Close()
	l3.Close()
	s.Close()
	l.Close()
}

func TestCompactAndSnapshotMetadata(t *testing.T) {
	fs := vfs.NewMem()
	s, l := openStorage(t, fs)
	require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(4)})) // raft's order: the term first
	require.NoError(t, s.Append(ents(1, 200, 4)))
	at, err := s.Compact(150)
	require.NoError(t, err)
	require.Greater(t, at, uint64(0))
	require.Less(t, at, uint64(150))
	first, _ := s.FirstIndex()
	require.Equal(t, at+1, first)
	tm, err := s.Term(at)
	require.NoError(t, err)
	require.Equal(t, uint64(4), tm)
	_, err = s.Term(at - 1)
	require.ErrorIs(t, err, raft.ErrCompacted)
	_, err = s.Entries(at, at+2, 1<<20)
	require.ErrorIs(t, err, raft.ErrCompacted)
	_, err = s.Snapshot()
	require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable)
	s.SnapshotData = func() (uint64, []byte, error) { return 170, []byte("state"), nil }
	snap, err := s.Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(170), snap.GetMetadata().GetIndex())
	require.Equal(t, uint64(4), snap.GetMetadata().GetTerm())
	require.Equal(t, []byte("state"), snap.GetData())
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())

	// Survives reopen.
	s, l = openStorage(t, fs)
	first2, _ := s.FirstIndex()
	require.Equal(t, first, first2)

	// Installing a snapshot resets the log at the leader's position.
	md := &pb.SnapshotMetadata{Index: proto.Uint64(1000), Term: proto.Uint64(9), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}
	require.NoError(t, s.ApplySnapshot(md, 3*4096+777))
	fi, _ := s.FirstIndex()
	li, _ := s.LastIndex()
	require.Equal(t, uint64(1001), fi)
	require.Equal(t, uint64(1000), li)
	tm, _ = s.Term(1000)
	require.Equal(t, uint64(9), tm)
	require.NoError(t, s.Append(ents(1001, 1003, 9)))
	p, err := l.Position(1001)
	require.NoError(t, err)
	require.Equal(t, int64(3*4096+777), p)
	require.ErrorIs(t, s.ApplySnapshot(&pb.SnapshotMetadata{Index: proto.Uint64(500), Term: proto.Uint64(9)}, 0), raft.ErrSnapOutOfDate)
	s.Close()
	l.Close()
}

// A state file whose term is behind its log lost synced writes (or was
// never synced): opening it fails rather than letting the node vote again
// in a term it already voted in.
func TestStateBehindLogIsCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	s, l := openStorage(t, fs)
	require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(3), Vote: proto.Uint64(2)}))
	require.NoError(t, s.Append(ents(1, 10, 3)))
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())
	s, l = openStorage(t, fs) // consistent: opens
	require.NoError(t, s.Append(ents(11, 12, 5)))
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())

	l, err := commitlog.Open(fs, "/n/log", commitlog.Options{SegmentSize: 4096})
	require.NoError(t, err)
	defer l.Close()
	_, err = OpenStorage(fs, "/n", l)
	require.ErrorIs(t, err, ErrStateCorrupt)
	require.ErrorContains(t, err, "term 3 but the log's entry 12 has term 5")
}

// A Storage holds its log's writer until Close: a second storage over the
// same log fails (opening nothing), and opens once the first is closed.
func TestOpenStorageTakesTheLogWriter(t *testing.T) {
	fs := vfs.NewMem()
	s, l := openStorage(t, fs)
	defer l.Close()
	require.NoError(t, s.SetHardState(hardState(1, 1, 0)))
	require.NoError(t, s.Append(ents(1, 3, 1)))
	_, err := l.Writer()
	require.ErrorIs(t, err, commitlog.ErrWriterTaken, "the storage holds the writer")

	s2, err := OpenStorage(fs, "/n2", l)
	require.ErrorIs(t, err, commitlog.ErrWriterTaken)
	require.Nil(t, s2)
	_, err = fs.Stat("/n2")
	require.ErrorIs(t, err, vfs.ErrNotExist, "a refused OpenStorage creates nothing")

	require.NoError(t, s.Close())
	require.Error(t, s.Append(ents(4, 4, 1)), "a closed storage's writer is released")
	require.Equal(t, uint64(3), l.LastIndex())
	s2, err = OpenStorage(fs, "/n", l)
	require.NoError(t, err, "the writer is free once the first storage is closed")
	require.NoError(t, s2.Append(ents(4, 5, 1)))
	require.Equal(t, uint64(5), l.LastIndex())
	require.NoError(t, s2.Close())
}

// The commitlog's single-writer rule as a broker uses it (commitlog/doc.go,
// "One writer"): raft's goroutine appends (conflicts truncate), hands a
// snapshot install to another goroutine and waits for it, retention
// compacts on a third, and readers call raft.Storage's methods on others.
// Every entry a reader gets is one that was written at its index and term,
// and none that a completed truncation or snapshot removed. Under -race it
// also checks that nobody touches the log's writer state unordered.
func TestStorageReadersDuringWrites(t *testing.T) {
	dir := t.TempDir() // real files
	l, err := commitlog.Open(vfs.Default(), vfs.Join(dir, "log"), commitlog.Options{SegmentSize: 4096})
	require.NoError(t, err)
	s, err := OpenStorage(vfs.Default(), dir, l)
	require.NoError(t, err)
	type cut struct{ from, term uint64 }
	var (
		evMu   sync.Mutex
		events []cut
		stop   atomic.Bool
		wg     sync.WaitGroup
		reads  atomic.Int64
		snaps  atomic.Int64
		cuts   atomic.Int64
	)
	fail := func(format string, args ...any) {
		stop.Store(true)
		t.Errorf(format, args...)
	}
	record := func(c cut) {
		evMu.Lock()
		events = append(events, c)
		evMu.Unlock()
	}
	require.NoError(t, s.SetHardState(hardState(1, 0, 0)))
	install := make(chan func() error)
	installed := make(chan error)

	// The applier: installs the snapshots raft's goroutine hands it.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for f := range install {
			installed <- f()
		}
	}()
	// Raft's goroutine.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(install)
		rng := rand.New(rand.NewPCG(7, 7))
		term, next := uint64(1), uint64(1)
		start := time.Now()
		// Run for 400 ms, and on a loaded machine until there were a
		// few truncations and snapshots (within 15 s).
		for !stop.Load() && (time.Since(start) < 400*time.Millisecond || snaps.Load() < 3 || cuts.Load() < 3) && time.Since(start) < 15*time.Second {
			first, _ := s.FirstIndex()
			switch r := rng.IntN(100); {
			case r < 3 && next > 50:
				term++
				idx := next + 10
				md := &pb.SnapshotMetadata{Index: proto.Uint64(idx), Term: proto.Uint64(term), ConfState: &pb.ConfState{Voters: []uint64{1}}}
				pos := l.EndPosition() + 4096
				install <- func() error { return s.ApplySnapshot(md, pos) }
				if err := <-installed; err != nil {
					fail("install snapshot at %d: %v", idx, err)
					return
				}
				snaps.Add(1)
				record(cut{from: idx + 1, term: term})
				next = idx + 1
				continue
			case r < 8 && next > first+6:
				term++
				from := next - 1 - uint64(rng.IntN(5))
				if err := s.SetHardState(hardState(term, 0, 0)); err != nil {
					fail("hard state: %v", err)
					return
				}
				es := ents(from, from+uint64(rng.IntN(4)), term)
				if err := s.Append(es); err != nil {
					fail("conflicting append at %d: %v", from, err)
					return
				}
				record(cut{from: from, term: term})
				cuts.Add(1)
				next = from + uint64(len(es))
				continue
			}
			es := ents(next, next+uint64(rng.IntN(8)), term)
			if err := s.Append(es); err != nil {
				fail("append at %d: %v", next, err)
				return
			}
			next += uint64(len(es))
		}
		stop.Store(true)
	}()
	// Retention.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if last, _ := s.LastIndex(); last > 100 {
				if _, err := s.Compact(last - 100); err != nil {
					fail("compact: %v", err)
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// Readers.
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				evMu.Lock()
				evs := append([]cut(nil), events...)
				evMu.Unlock()
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last < first {
					continue
				}
				es, err := s.Entries(first, last+1, 1<<20)
				if err != nil && !errors.Is(err, raft.ErrCompacted) && !errors.Is(err, raft.ErrUnavailable) {
					fail("entries [%d, %d]: %v", first, last, err)
					return
				}
				for _, e := range es {
					var i, tm uint64
					if _, err := fmt.Sscanf(string(e.GetData()), "e%d-t%d-", &i, &tm); err != nil || i != e.GetIndex() || tm != e.GetTerm() {
						fail("entry %d term %d holds %q", e.GetIndex(), e.GetTerm(), e.GetData()[:min(16, len(e.GetData()))])
						return
					}
					for _, c := range evs {
						if i >= c.from && tm < c.term {
							fail("entry %d term %d: removed by a cut from %d in term %d", i, tm, c.from, c.term)
							return
						}
					}
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, reads.Load())
	require.Positive(t, snaps.Load())
	require.Positive(t, cuts.Load())
	t.Logf("%d reads, %d truncations, %d snapshots", reads.Load(), cuts.Load(), snaps.Load())
	require.NoError(t, s.Close())
	require.NoError(t, l.Close())
}

// In the background, Snapshot never waits for the application: it answers
// "temporarily unavailable" while the build runs, hands the finished
// snapshot to the next call, and builds a new one when the log was
// compacted past the one it has.
func TestSnapshotInBackground(t *testing.T) {
	s, l := openStorage(t, vfs.NewMem())
	defer l.Close()
	require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(4)}))
	require.NoError(t, s.Append(ents(1, 200, 4)))
	release := make(chan struct{})
	var at atomic.Uint64
	at.Store(120)
	var builds atomic.Int32
	s.SnapshotInBackground = true
	s.SnapshotData = func() (uint64, []byte, error) {
		builds.Add(1)
		<-release
		return at.Load(), []byte("state"), nil
	}
	// Two calls while it builds: neither waits, one build.
	for range 2 {
		_, err := s.Snapshot()
		require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable)
	}
	release <- struct{}{}
	var snap *pb.Snapshot
	require.Eventually(t, func() bool {
		var err error
		snap, err = s.Snapshot()
		return err == nil
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(120), snap.GetMetadata().GetIndex())
	require.Equal(t, uint64(4), snap.GetMetadata().GetTerm())
	require.Equal(t, int32(1), builds.Load())

	// Handed out once: the next call builds again. When that build is
	// done the log is compacted past its index, so its result is dropped
	// and a third build starts.
	_, err := s.Snapshot()
	require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable)
	release <- struct{}{}
	s.snap.Lock()
	b := s.snap.build
	s.snap.Unlock()
	<-b.done
	require.NoError(t, b.err)
	compacted, err := s.Compact(190)
	require.NoError(t, err)
	require.Greater(t, compacted, uint64(121))
	at.Store(195)
	_, err = s.Snapshot()
	require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable, "a snapshot the log was compacted past was handed out")
	require.Eventually(t, func() bool { return builds.Load() == 3 }, 5*time.Second, time.Millisecond)
	release <- struct{}{}
	require.Eventually(t, func() bool {
		var err error
		snap, err = s.Snapshot()
		return err == nil
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(195), snap.GetMetadata().GetIndex())
	require.NoError(t, s.Close())
}
