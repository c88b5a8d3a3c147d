package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/consumequeue"
	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// journalFixture opens a store whose queues hold more units than a
// checkpoint writes to their files: a first checkpoint (a new journal:
// every unit in the files), then sends, then checkpoints that journal the
// units, which stay in memory (files of 1,000 units, so no spill).
type journalFixture struct {
	t    *testing.T
	mem  *vfs.MemFS
	cfg  Config
	sa   *Standalone
	n    int
	sent []MessageResult
	body map[MessageResult][]byte
}

func newJournalFixture(t *testing.T) *journalFixture {
	f := &journalFixture{t: t, mem: vfs.NewMem(), body: map[MessageResult][]byte{}}
	f.cfg = testConfig(t, f.mem)
	f.cfg.PersistInterval = time.Hour // checkpoints only when the test says
	f.cfg.CQUnitsPerFile = 1000
	f.cfg.IndexSlots, f.cfg.IndexMaxEntries = 512, 4096
	f.sa = openSA(t, f.cfg)
	for i := range 4 {
		createTopic(t, f.sa, fmt.Sprintf("j%d", i), 8)
	}
	return f
}

func (f *journalFixture) put(count int) {
	for ; count > 0; count -= 50 {
		var batch []*message.Message
		for range min(count, 50) {
			batch = append(batch, msg(fmt.Sprintf("j%d", f.n%4), int32(f.n/4%8), f.n, "", fmt.Sprintf("U%d", f.n)))
			f.n++
		}
		rs, err := f.sa.Put(batch...)
		require.NoError(f.t, err)
		for i, r := range rs {
			require.NoError(f.t, r.Err)
			f.sent = append(f.sent, r)
			f.body[r] = batch[i].Body
		}
	}
}

// unitsInFiles counts the units the queues' files hold (as a restart
// with no journal would find them): those up to the first empty unit.
func (f *journalFixture) unitsInFiles() int64 {
	root := vfs.Join(f.cfg.Dir, "consumequeue")
	var n int64
	topics, err := f.mem.List(root)
	require.NoError(f.t, err)
	for _, topic := range topics {
		queues, err := f.mem.List(vfs.Join(root, topic))
		require.NoError(f.t, err)
		for _, q := range queues {
			dir := vfs.Join(root, topic, q)
			files, err := f.mem.List(dir)
			require.NoError(f.t, err)
			for _, name := range files {
				b, err := vfs.ReadFile(f.mem, vfs.Join(dir, name))
				require.NoError(f.t, err)
				for off := 0; off+consumequeue.UnitSize <= len(b); off += consumequeue.UnitSize {
					if binary.BigEndian.Uint32(b[off+8:]) == 0 {
						break
					}
					n++
				}
			}
		}
	}
	return n
}

// check reopens the store on fs and requires every sent message at its
// queue offset, and every queue to hold exactly the messages sent to it.
func (f *journalFixture) check(fs vfs.FS) {
	cfg := f.cfg
	cfg.FS = fs
	sa, err := OpenStandalone(cfg)
	require.NoError(f.t, err)
	defer sa.Close()
	per := map[queueKey]int64{}
	for _, r := range f.sent {
		per[queueKey{r.Topic, r.QueueID}]++
		got, err := sa.GetMessages(r.Topic, r.QueueID, r.QueueOffset, 1, 1<<30, nil)
		require.NoError(f.t, err)
		require.Equal(f.t, Found, got.Status, "sent message %+v missing", r)
		m, _, err := message.Decode(got.Records[0])
		require.NoError(f.t, err)
		require.Equal(f.t, f.body[r], m.Body)
	}
	for i := range 4 {
		for q := range int32(8) {
			topic := fmt.Sprintf("j%d", i)
			require.Equal(f.t, per[queueKey{topic, q}], sa.MaxOffset(topic, q), "%s/%d", topic, q)
		}
	}
}

// A power loss after a checkpoint that journaled the queues' tails, with
// the tails still only in memory (no spill, no new journal since), loses
// no unit: recovery replays the journal before it cuts the queues back.
// Without the replay the queues end below the checkpoint's offsets and
// the store refuses to open.
func TestCrashAfterJournalCheckpointLosesNoUnit(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			f := newJournalFixture(t)
			f.put(200)
			require.NoError(t, f.sa.Persist()) // the first: a new journal
			inFiles := f.unitsInFiles()
			require.Equal(t, int64(200), inFiles)
			for range 3 {
				f.put(300)
				require.NoError(t, f.sa.Persist())
			}
			require.Greater(t, f.sa.journal.size, int64(journalHeaderBytes), "the checkpoints journaled units")
			require.Less(t, f.unitsInFiles(), int64(f.n), "journaled units are not in the queues' files")
			f.put(int(seed) * 40) // applied after the checkpoint: replayed from the log
			f.check(crash(t, f.sa, f.mem, rng, rng.Float64()*float64(seed%2)))
		})
	}
}

// The journal's records are checked: a torn record that the checkpoint
// covers fails the open (ErrCorrupt) rather than losing units silently.
func TestJournalCorruptionIsReported(t *testing.T) {
	f := newJournalFixture(t)
	f.put(100)
	require.NoError(t, f.sa.Persist())
	f.put(100)
	require.NoError(t, f.sa.Persist())
	name := journalName(f.sa.journal.id)
	size := f.sa.journal.size
	clone := crash(t, f.sa, f.mem, rand.New(rand.NewPCG(1, 1)), 0)
	flipByte(t, clone, vfs.Join(f.cfg.Dir, name), size-5)
	cfg := f.cfg
	cfg.FS = clone
	_, err := OpenStandalone(cfg)
	require.ErrorContains(t, err, "checksum")
}

// A store written before the tail journal (no meta key, every checkpointed
// unit in the queues' files) opens and replays nothing; so does one whose
// journal a snapshot install dropped.
func TestOpenWithoutTailJournal(t *testing.T) {
	f := newJournalFixture(t)
	f.put(300)
	require.NoError(t, f.sa.Persist())
	f.put(300)
	// The old checkpoint: every tail written to its file, no journal.
	f.sa.persistMu.Lock()
	f.sa.applyMu.Lock()
	require.NoError(t, f.sa.persistLocked())
	f.sa.applyMu.Unlock()
	f.sa.persistMu.Unlock()
	require.NoError(t, f.sa.db.Update(func(tx *offsets.Tx) error { return tx.DeleteMeta(metaTailJournal) }))
	require.NoError(t, f.mem.Remove(vfs.Join(f.cfg.Dir, journalName(f.sa.journal.id))))
	f.put(77)
	f.check(crash(t, f.sa, f.mem, rand.New(rand.NewPCG(2, 2)), 0.5))
}

// A clean stop starts a new journal: every unit is in the queues' files,
// as a store written before the journal has them.
func TestCloseLeavesUnitsInFiles(t *testing.T) {
	f := newJournalFixture(t)
	f.put(200)
	require.NoError(t, f.sa.Persist())
	f.put(300)
	require.NoError(t, f.sa.Persist())
	require.Less(t, f.unitsInFiles(), int64(f.n))
	require.NoError(t, f.sa.Close())
	require.Equal(t, int64(f.n), f.unitsInFiles())
	f.check(f.mem)
}

// A snapshot's database names no tail journal (the follower that installs
// it has none of the leader's), and the leader, which dropped the key,
// still recovers every unit after a power loss.
func TestSnapshotLeavesTheJournalOut(t *testing.T) {
	f := newJournalFixture(t)
	f.put(200)
	require.NoError(t, f.sa.Persist())
	f.put(200)
	require.NoError(t, f.sa.Persist())
	_, found, err := f.sa.readJournalMark()
	require.NoError(t, err)
	require.True(t, found)
	_, snap, err := f.sa.Snapshot()
	require.NoError(t, err)
	info, err := DecodeSnapshot(snap)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "snap.db")
	require.NoError(t, offsets.RestoreSnapshot(path, bytes.NewReader(info.DB)))
	db, err := offsets.Open(path, offsets.Options{NoSync: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *offsets.Tx) error {
		_, ok := tx.Meta(metaTailJournal)
		require.False(t, ok, "the snapshot names the leader's tail journal")
		return nil
	}))
	require.NoError(t, db.Close())
	f.put(100)
	f.check(crash(t, f.sa, f.mem, rand.New(rand.NewPCG(3, 3)), 0))
}

// store inspect reads the tail journal an unclean stop left behind: each
// queue's max offset after its replay, beside the files' own (behind it),
// and a journal whose covered bytes are corrupt is a problem, as it stops
// the next open. Without inspectJournal the report has no journal.
func TestInspectReadsTailJournal(t *testing.T) {
	cfg := testConfig(t, vfs.Default())
	cfg.PersistInterval = time.Hour // checkpoints only when the test says
	cfg.CQUnitsPerFile = 1000
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 2)
	sent := 0
	put := func(n int) {
		for range n {
			_, err := sa.Put(msg("t", int32(sent%2), sent, "", fmt.Sprintf("U%d", sent)))
			require.NoError(t, err)
			sent++
		}
	}
	put(20)
	require.NoError(t, sa.Persist()) // the first: a new journal, every unit in the files
	put(60)
	require.NoError(t, sa.Persist()) // journaled, kept in memory
	name, size := journalName(sa.journal.id), sa.journal.size
	close(sa.stop) // stopped uncleanly: no Close, which would write the tails
	sa.wg.Wait()
	require.NoError(t, sa.db.Close())

	rep, err := InspectDir(vfs.Default(), cfg.Dir, nil)
	require.NoError(t, err)
	require.NotNil(t, rep.Journal)
	require.Equal(t, name, rep.Journal.File)
	require.Equal(t, size, rep.Journal.Covered)
	require.Equal(t, 60, rep.Journal.Units)
	require.Equal(t, []InspectOffset{{Topic: "t", QueueID: 0, Offset: 40}, {Topic: "t", QueueID: 1, Offset: 40}}, rep.Journal.Queues)
	for _, q := range rep.Queues {
		require.Less(t, q.MaxOffset, int64(40), "queue %s/%s: its files hold what the journal has", q.Topic, q.QueueID)
	}
	var out bytes.Buffer
	rep.Write(&out)
	require.Contains(t, out.String(), "max offset after replay t/1")

	flipByte(t, vfs.Default(), filepath.Join(cfg.Dir, name), size-5)
	rep, err = InspectDir(vfs.Default(), cfg.Dir, nil)
	require.ErrorIs(t, err, ErrInspectFailed)
	require.Contains(t, rep.Problems[len(rep.Problems)-1], name)
}

// flipByte inverts the byte at off of the file at path.
func flipByte(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(path)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
