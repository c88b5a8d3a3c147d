package store

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
	"github.com/raftmq/raftmq/offsets"
)

// A retry in the same entry as its original is recognised: the index serves
// the original from its write buffer and the batch knows its queue offset,
// though its consume-queue unit is not written yet.
func TestDedupeWithinOneBatch(t *testing.T) {
	for _, slots := range []int{64, 1} { // 1: every key collides
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			cfg := testConfig(t, vfs.NewMem())
			cfg.IndexSlots = slots
			sa := openSA(t, cfg)
			defer sa.Close()
			createTopic(t, sa, "t", 3)
			_, err := sa.Put(msg("t", 2, 0, "", "EARLIER")) // the queues are not empty
			require.NoError(t, err)
			rs, err := sa.Put(
				msg("t", 0, 1, "", "K1"),
				msg("t", 1, 2, "", "K2"),
				msg("t", 2, 3, "", "K1"), // retry of #0, another queue
				msg("t", 9, 4, "", "K3"), // rejected: bad queue
				msg("t", 1, 5, "", "K3"), // not a duplicate of a rejected send
				msg("t", 0, 6, "", "K2"), // retry of #1
				msg("t", 2, 7, "", "EARLIER"),
			)
			require.NoError(t, err)
			require.Len(t, rs, 7)
			require.False(t, rs[0].Duplicate)
			require.False(t, rs[1].Duplicate)
			require.True(t, rs[2].Duplicate)
			require.Equal(t, rs[0].QueueID, rs[2].QueueID)
			require.Equal(t, rs[0].QueueOffset, rs[2].QueueOffset)
			require.Equal(t, rs[0].PhyOffset, rs[2].PhyOffset)
			require.Equal(t, rs[0].MsgID(), rs[2].MsgID())
			require.ErrorIs(t, rs[3].Err, ErrBadQueue)
			require.False(t, rs[4].Duplicate)
			require.NoError(t, rs[4].Err)
			require.True(t, rs[5].Duplicate)
			require.Equal(t, rs[1].QueueID, rs[5].QueueID)
			require.Equal(t, rs[1].QueueOffset, rs[5].QueueOffset)
			require.True(t, rs[6].Duplicate)
			require.Equal(t, int64(0), rs[6].QueueOffset)
			require.Equal(t, int32(2), rs[6].QueueID)

			require.Equal(t, int64(1), sa.MaxOffset("t", 0))
			require.Equal(t, int64(2), sa.MaxOffset("t", 1))
			require.Equal(t, int64(1), sa.MaxOffset("t", 2))
			for _, r := range []MessageResult{rs[0], rs[1], rs[4]} {
				g, err := sa.GetMessages("t", r.QueueID, r.QueueOffset, 1, 1<<20, nil)
				require.NoError(t, err)
				require.Equal(t, Found, g.Status)
				m, _, err := message.Decode(g.Records[0])
				require.NoError(t, err)
				require.Equal(t, r.UniqKey, m.UniqKey())
			}
			// And once written, from the consume queue as before.
			again, err := sa.Put(msg("t", 1, 8, "", "K2"))
			require.NoError(t, err)
			require.True(t, again[0].Duplicate)
			require.Equal(t, rs[1].QueueOffset, again[0].QueueOffset)
		})
	}
}

// Apply writes every buffered unit before it returns and before the
// applied index moves: what it reports is readable.
func TestApplyWritesUnitsBeforeReturning(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(t, fs)
	cfg.PersistInterval = time.Hour
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 4)
	var batch []*message.Message
	for i := 0; i < 130; i++ { // more than a file (50 units) per queue
		batch = append(batch, msg("t", int32(i%4), i, "TagA", fmt.Sprintf("U%d", i)))
	}
	rs, err := sa.Put(batch...)
	require.NoError(t, err)
	require.Len(t, rs, 130)
	for q := int32(0); q < 4; q++ {
		q, err := sa.cqs.Queue("t", q, false)
		require.NoError(t, err)
		require.Equal(t, sa.state.nextOffset(queueKey{"t", q.QueueID()}), q.MaxOffset(), "nothing left buffered")
	}
	for _, r := range rs {
		g, err := sa.GetMessages("t", r.QueueID, r.QueueOffset, 1, 1<<20, func(c int64) bool { return c == message.TagsCode("TagA") })
		require.NoError(t, err)
		require.Equal(t, Found, g.Status)
		m, _, err := message.Decode(g.Records[0])
		require.NoError(t, err)
		require.Equal(t, r.UniqKey, m.UniqKey())
	}
	require.Empty(t, sa.batch.queues)
	require.Empty(t, sa.batch.queued)
	require.NoError(t, sa.Close())
}

// failingFS fails WriteAt on the paths containing sub while armed.
func failingFS(fs vfs.FS, sub string) (vfs.FS, *atomic.Bool) {
	var armed atomic.Bool
	return vfs.WithErrors(fs, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpWrite && strings.Contains(path, sub) {
			return fmt.Errorf("write %s: %w", path, vfs.ErrInjected)
		}
		return nil
	})), &armed
}

// A write error of derived state surfaces from the checkpoint that writes
// it, is sticky (no later Apply or Persist succeeds, so no checkpoint
// covers the lost writes), and loses nothing: the next open rebuilds from
// the log.
func TestApplyWriteErrorIsSticky(t *testing.T) {
	for _, c := range []struct {
		name, sub string
		persist   time.Duration
	}{
		{"one-consume-queue", "/consumequeue/t/1/", time.Hour},
		{"all-consume-queues", "/consumequeue/", time.Hour},
		{"index", "/index/", time.Hour},
		{"tail-journal", "/" + journalPrefix, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs, armed := failingFS(mem, c.sub)
			cfg := testConfig(t, fs)
			cfg.PersistInterval = c.persist
			sa := openSA(t, cfg)
			createTopic(t, sa, "t", 3)
			var want []*message.Message
			put := func(i int) ([]MessageResult, error) {
				var batch []*message.Message
				for k := 0; k < 5; k++ {
					batch = append(batch, msg("t", int32(k%3), i*5+k, "", fmt.Sprintf("U%d-%d", i, k)))
				}
				rs, err := sa.Put(batch...)
				if err == nil {
					want = append(want, batch...)
				}
				return rs, err
			}
			for i := 0; i < 4; i++ {
				_, err := put(i)
				require.NoError(t, err)
			}
			require.NoError(t, sa.Persist())
			applied := sa.AppliedIndex()
			before := sa.MaxOffset("t", 1)

			if strings.Contains(c.sub, "/consumequeue/") {
				// Only a checkpoint that starts a new tail journal writes
				// the units to the queues' files.
				sa.persistMu.Lock()
				sa.journal.rotate = true
				sa.persistMu.Unlock()
			}
			armed.Store(true)
			// Units and index entries are written at checkpoints, which run
			// beside Apply: Apply succeeds (the units are readable from
			// memory), and the error surfaces from the checkpoint, then
			// from every Apply.
			rs, err := put(4)
			require.NoError(t, err)
			require.Len(t, rs, 5)
			require.Greater(t, sa.AppliedIndex(), applied)
			if c.sub != "/index/" {
				require.Greater(t, sa.MaxOffset("t", 1), before, "the units are readable before they are written")
			}
			require.ErrorIs(t, sa.Persist(), vfs.ErrInjected, "the error surfaces from the checkpoint")
			armed.Store(false)
			_, err = put(5)
			require.ErrorIs(t, err, vfs.ErrInjected, "sticky")
			require.ErrorIs(t, sa.Persist(), vfs.ErrInjected, "no checkpoint after the failure")
			require.Error(t, sa.Close())

			// Everything committed to the log is there after a restart,
			// including the batches that failed to apply.
			cfg.FS = mem
			sa2 := openSA(t, cfg)
			defer sa2.Close()
			require.False(t, sa2.CleanStart())
			var total int64
			for q := int32(0); q < 3; q++ {
				total += sa2.MaxOffset("t", q)
			}
			require.Equal(t, int64(6*5), total)
			for _, m := range want {
				got, err := sa2.QueryByUniqKey("t", m.UniqKey())
				require.NoError(t, err)
				require.Equal(t, m.Body, got.Body)
			}
			rs, err = sa2.Put(msg("t", 0, 99, "", "U4-2"))
			require.NoError(t, err)
			require.True(t, rs[0].Duplicate, "the failed batch was applied on restart")
		})
	}
}

// Apply keeps a record of each topic and queue it applied messages to (one
// map lookup per message); a change of the topic table (creation with other
// queues or permissions, deletion) is seen by the next message, and a
// queue written after a checkpoint is in the next one.
func TestApplyFollowsTopicChanges(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	createTopic(t, sa, "t", 2)
	put := func(q int32, i int) MessageResult {
		t.Helper()
		rs, err := sa.Put(msg("t", q, i, "", ""))
		require.NoError(t, err)
		require.Len(t, rs, 1)
		return rs[0]
	}
	require.NoError(t, put(1, 0).Err)
	require.ErrorIs(t, put(3, 1).Err, ErrBadQueue)

	createTopic(t, sa, "t", 4) // more queues
	r := put(3, 2)
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.QueueOffset)
	require.Equal(t, int64(1), put(1, 3).QueueOffset)

	tc := offsets.NewTopicConfig("t", 4)
	tc.Perm = offsets.PermRead
	require.NoError(t, sa.Exec(&Command{Op: OpCreateTopic, Topic: &tc}))
	require.ErrorIs(t, put(1, 4).Err, ErrNotWritable)

	require.NoError(t, sa.Exec(&Command{Op: OpDeleteTopic, Name: "t"}))
	require.ErrorIs(t, put(1, 5).Err, ErrUnknownTopic)

	createTopic(t, sa, "t", 4)
	require.NoError(t, sa.Persist())
	require.Equal(t, int64(2), put(1, 6).QueueOffset) // queue 1 dirty again after the checkpoint
	require.Equal(t, int64(1), put(3, 7).QueueOffset)
	require.NoError(t, sa.Close())

	sa = openSA(t, cfg)
	defer sa.Close()
	require.Equal(t, int64(3), sa.MaxOffset("t", 1))
	require.Equal(t, int64(2), sa.MaxOffset("t", 3))
	require.Equal(t, int64(3), put(1, 8).QueueOffset)
}

// A stored message's TopicAux is its topic's slot: the same for every
// message of the topic, through changes of its config, and a new, empty
// one once the topic is deleted and made again; none for a message not
// stored.
func TestTopicAuxSlot(t *testing.T) {
	sa := openSA(t, testConfig(t, vfs.NewMem()))
	defer sa.Close()
	createTopic(t, sa, "t", 2)
	createTopic(t, sa, "u", 2)
	put := func(topic string, q int32, i int, uniq string) *MessageResult {
		t.Helper()
		rs, err := sa.Put(msg(topic, q, i, "", uniq))
		require.NoError(t, err)
		require.Len(t, rs, 1)
		return &rs[0]
	}
	r0 := put("t", 0, 0, "K0")
	aux := r0.TopicAux()
	require.NotNil(t, aux)
	require.Nil(t, aux.Load())
	aux.Store("counters of t")
	require.Same(t, aux, put("t", 1, 1, "").TopicAux(), "another queue of t")
	u := put("u", 0, 2, "").TopicAux()
	require.NotSame(t, aux, u)
	require.Nil(t, u.Load())

	createTopic(t, sa, "t", 4) // more queues: the same topic
	require.Same(t, aux, put("t", 3, 3, "").TopicAux())

	require.Nil(t, put("t", 9, 4, "").TopicAux(), "a bad queue")
	dup := put("t", 0, 5, "K0")
	require.True(t, dup.Duplicate)
	require.Nil(t, dup.TopicAux(), "a duplicate")

	require.NoError(t, sa.Exec(&Command{Op: OpDeleteTopic, Name: "t"}))
	require.Nil(t, put("t", 0, 6, "").TopicAux(), "no topic")
	createTopic(t, sa, "t", 2)
	again := put("t", 0, 7, "").TopicAux()
	require.NotNil(t, again)
	require.NotSame(t, aux, again)
	require.Nil(t, again.Load(), "the re-made topic's slot is empty")
	require.Equal(t, "counters of t", aux.Load(), "the old slot is left alone")
}
