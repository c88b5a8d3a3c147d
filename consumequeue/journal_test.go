package consumequeue

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func encodeUnits(from, to, gen int64) []byte {
	var b []byte
	for i := from; i < to; i++ {
		u := unitAt(i, gen)
		b = binary.BigEndian.AppendUint64(b, uint64(u.PhyOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(u.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(u.TagsCode))
	}
	return b
}

func decodeAll(t *testing.T, b []byte) []JournalRecord {
	t.Helper()
	var rs []JournalRecord
	for len(b) > 0 {
		r, n, err := DecodeJournalRecord(b)
		require.NoError(t, err)
		rs = append(rs, r)
		b = b[n:]
	}
	return rs
}

// MarkJournal journals the units in memory that no earlier record holds,
// writes a queue that has no file yet (or a tail over its budget) instead,
// and the records, replayed into the queue as a power loss left it, give
// back every unit.
func TestMarkJournalAndReplay(t *testing.T) {
	mem := vfs.NewMem()
	opts := Options{UnitsPerFile: 10000, OwnerSyncsFS: true}
	set, err := OpenSet(mem, "/cq", opts)
	require.NoError(t, err)
	q, err := set.Queue("TopicTest", 3, true)
	require.NoError(t, err)
	putRange(t, q, 0, 30, 0)
	b, _, written, err := set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	require.Empty(t, b, "a queue without a file is written to it")
	require.Equal(t, 1, written)

	var journal []byte
	putRange(t, q, 30, 100, 0)
	b, _, written, err = set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	require.Equal(t, 1, written)
	rs := decodeAll(t, b)
	require.Len(t, rs, 1)
	require.Equal(t, JournalRecord{Topic: "TopicTest", QueueID: 3, Start: 30, Units: encodeUnits(30, 100, 0)}, rs[0])
	journal = append(journal, b...)

	b, _, written, err = set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	require.Empty(t, b, "nothing new")
	require.Equal(t, 0, written)

	putRange(t, q, 100, 110, 0)
	b, _, _, err = set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	rs = decodeAll(t, b)
	require.Len(t, rs, 1)
	require.Equal(t, int64(100), rs[0].Start)
	require.Len(t, rs[0].Units, 10*UnitSize)
	journal = append(journal, b...)
	require.NoError(t, mem.SyncFS("/cq"))

	// A power loss now keeps the file's 30 units; the journal has the rest.
	clone := mem.CrashClone(rand.New(rand.NewPCG(1, 2)), 0)
	set2, err := OpenSet(clone, "/cq", opts)
	require.NoError(t, err)
	q2, err := set2.Find("TopicTest", 3)
	require.NoError(t, err)
	require.Equal(t, int64(30), q2.MaxOffset())
	for _, r := range decodeAll(t, journal) {
		require.NoError(t, q2.ReplayJournal(r.Start, r.Units))
	}
	require.Equal(t, int64(110), q2.MaxOffset())
	checkRange(t, q2, 0, 110, 0)
	// Replaying again changes nothing.
	for _, r := range decodeAll(t, journal) {
		require.NoError(t, q2.ReplayJournal(r.Start, r.Units))
	}
	checkRange(t, q2, 0, 110, 0)
	// A record that differs from the units held (a torn write) wins from
	// its first different unit on.
	require.NoError(t, q2.ReplayJournal(20, encodeUnits(20, 40, 1)))
	require.Equal(t, int64(40), q2.MaxOffset())
	checkRange(t, q2, 0, 20, 0)
	checkRange(t, q2, 20, 40, 1)
	// A record past the end: units lost.
	require.ErrorIs(t, q2.ReplayJournal(41, encodeUnits(41, 42, 1)), ErrCorrupt)
	require.NoError(t, set2.Close())

	// Over its share of the budget, a tail is written to the file.
	putRange(t, q, 110, 400, 0)
	b, _, written, err = set.MarkJournal(nil, 4096)
	require.NoError(t, err)
	require.Empty(t, b)
	require.Equal(t, 1, written)
	require.NoError(t, set.Close())
}

func TestJournalRecordChecksum(t *testing.T) {
	mem := vfs.NewMem()
	set, err := OpenSet(mem, "/cq", Options{UnitsPerFile: 10000, OwnerSyncsFS: true})
	require.NoError(t, err)
	defer set.Close()
	q, err := set.Queue("TopicTest", 3, true)
	require.NoError(t, err)
	putRange(t, q, 0, 1, 0)
	_, _, _, err = set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	putRange(t, q, 1, 5, 0)
	b, _, _, err := set.MarkJournal(nil, 1<<20)
	require.NoError(t, err)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		_, _, err := DecodeJournalRecord(c)
		require.ErrorIs(t, err, ErrCorrupt, "byte %d flipped", i)
	}
	_, _, err = DecodeJournalRecord(b[:len(b)-1])
	require.ErrorIs(t, err, ErrCorrupt)
}
