package offsets

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestAppliedIndex(t *testing.T) {
	db := openTestDB(t, "")
	require.NoError(t, db.View(func(tx *Tx) error {
		index, term, err := tx.AppliedIndex()
		require.NoError(t, err)
		require.Zero(t, index)
		require.Zero(t, term)
		return nil
	}))
	update(t, db, func(tx *Tx) error { return tx.SetApplied(5, 1) })
	update(t, db, func(tx *Tx) error { return tx.SetApplied(5, 1) }) // same position again is fine

	for _, bad := range []struct {
		name        string
		index, term uint64
	}{
		{"lower index", 4, 1},
		{"same index, other term", 5, 2},
		{"higher index, lower term", 6, 0},
		{"zero", 0, 0},
	} {
		t.Run(bad.name, func(t *testing.T) {
			err := db.Update(func(tx *Tx) error { return tx.SetApplied(bad.index, bad.term) })
			require.ErrorIs(t, err, ErrAppliedRegress)
			require.ErrorContains(t, err, "offsets: ")
		})
	}
	update(t, db, func(tx *Tx) error { return tx.SetApplied(10, 3) })
	require.NoError(t, db.View(func(tx *Tx) error {
		index, term, err := tx.AppliedIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(10), index)
		require.Equal(t, uint64(3), term)
		return nil
	}))
}

func TestMeta(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		_, ok := tx.Meta("cq")
		require.False(t, ok)
		require.NoError(t, tx.SetMeta("cq", []byte("checkpoint-1")))
		require.NoError(t, tx.SetMeta("empty", nil))
		v, ok := tx.Meta("empty")
		require.True(t, ok, "an empty blob is present within the tx")
		require.Empty(t, v)
		require.ErrorIs(t, tx.SetMeta("", []byte("x")), ErrInvalidArgument)
		require.ErrorIs(t, tx.SetMeta(string(make([]byte, MaxMetaNameLen+1)), nil), ErrInvalidArgument)
		_, ok = tx.Meta("")
		require.False(t, ok)
		return nil
	})
	var kept []byte
	require.NoError(t, db.View(func(tx *Tx) error {
		v, ok := tx.Meta("cq")
		require.True(t, ok)
		kept = v
		v, ok = tx.Meta("empty")
		require.True(t, ok, "an empty blob is present after commit")
		require.Empty(t, v)
		return nil
	}))
	require.Equal(t, "checkpoint-1", string(kept), "Meta returns a copy usable after the tx")
	update(t, db, func(tx *Tx) error { return tx.DeleteMeta("cq") })
	require.NoError(t, db.View(func(tx *Tx) error {
		_, ok := tx.Meta("cq")
		require.False(t, ok)
		// The applied index lives in the same bucket but not in the blob namespace.
		_, ok = tx.Meta(string([]byte{metaKindApplied}))
		require.False(t, ok)
		return nil
	}))
}

func TestConsumerOffsets(t *testing.T) {
	db := openTestDB(t, "")
	type entry struct {
		group, topic string
		q            int32
		off          int64
	}
	// Inserted out of order; "b" vs "aa" would sort the other way under
	// length-prefixed names.
	in := []entry{
		{"b", "T", 0, 5}, {"aa", "T", 1, 11}, {"aa", "T", 0, 10}, {"a", "Z", 2, 3},
		{"a", "T", 10, 100}, {"a", "T", 2, 20}, {"aa", "S", 0, 1},
	}
	update(t, db, func(tx *Tx) error {
		for _, e := range in {
			require.NoError(t, tx.SetConsumerOffset(e.group, e.topic, e.q, e.off))
		}
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		off, ok, err := tx.ConsumerOffset("aa", "T", 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(11), off)
		_, ok, err = tx.ConsumerOffset("aa", "T", 2)
		require.NoError(t, err)
		require.False(t, ok)
		_, ok, err = tx.ConsumerOffset("a", "a", 0) // not a prefix match of "aa"
		require.NoError(t, err)
		require.False(t, ok)

		m, err := tx.ConsumerOffsets("a", "T")
		require.NoError(t, err)
		require.Equal(t, map[int32]int64{2: 20, 10: 100}, m)
		m, err = tx.ConsumerOffsets("nobody", "T")
		require.NoError(t, err)
		require.Empty(t, m)

		var got []entry
		require.NoError(t, tx.ForEachConsumerOffset(func(g, tp string, q int32, off int64) error {
			got = append(got, entry{g, tp, q, off})
			return nil
		}))
		require.Equal(t, []entry{
			{"a", "T", 2, 20}, {"a", "T", 10, 100}, {"a", "Z", 2, 3},
			{"aa", "S", 0, 1}, {"aa", "T", 0, 10}, {"aa", "T", 1, 11},
			{"b", "T", 0, 5},
		}, got)

		stop := errors.New("stop")
		n := 0
		err = tx.ForEachConsumerOffset(func(string, string, int32, int64) error { n++; return stop })
		require.Equal(t, stop, err, "fn's error is returned unchanged")
		require.Equal(t, 1, n)
		return nil
	}))

	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.SetConsumerOffset("aa", "T", 1, 12)) // overwrite, may go back too
		off, _, err := tx.ConsumerOffset("aa", "T", 1)
		require.NoError(t, err)
		require.Equal(t, int64(12), off)

		n, err := tx.DeleteConsumerOffsets("aa", "T")
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = tx.DeleteConsumerOffsets("a", "")
		require.NoError(t, err)
		require.Equal(t, 3, n)
		n, err = tx.DeleteConsumerOffsets("", "")
		require.NoError(t, err)
		require.Zero(t, n)
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		var groups []string
		require.NoError(t, tx.ForEachConsumerOffset(func(g, tp string, _ int32, _ int64) error {
			groups = append(groups, g+"/"+tp)
			return nil
		}))
		require.Equal(t, []string{"aa/S", "b/T"}, groups)
		return nil
	}))
}

func TestConsumerOffsetInvalid(t *testing.T) {
	db := openTestDB(t, "")
	for _, c := range []struct {
		name, group, topic string
		q                  int32
		off                int64
	}{
		{"empty group", "", "T", 0, 0},
		{"empty topic", "g", "", 0, 0},
		{"at in group", "g@x", "T", 0, 0},
		{"at in topic", "g", "T@x", 0, 0},
		{"space", "g", "a b", 0, 0},
		{"nul byte", "g\x00", "T", 0, 0},
		{"long topic", "g", string(make([]byte, MaxTopicNameLen+1)), 0, 0},
		{"negative queue", "g", "T", -1, 0},
		{"negative offset", "g", "T", 0, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := db.Update(func(tx *Tx) error { return tx.SetConsumerOffset(c.group, c.topic, c.q, c.off) })
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorContains(t, err, "offsets: set consumer offset")
		})
	}
	err := db.Update(func(tx *Tx) error { return tx.SetQueueOffset("T", -2, 0) })
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestQueueOffsets(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		next, err := tx.QueueOffset("T", 0)
		require.NoError(t, err)
		require.Zero(t, next, "an unknown queue starts at 0")
		require.NoError(t, tx.SetQueueOffset("T", 1, 7))
		require.NoError(t, tx.SetQueueOffset("T", 0, 9))
		require.NoError(t, tx.SetQueueOffset("S", 300, 1))
		require.NoError(t, tx.SetQueueOffset("T", 1, 8))
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		next, err := tx.QueueOffset("T", 1)
		require.NoError(t, err)
		require.Equal(t, int64(8), next)
		var got []string
		require.NoError(t, tx.ForEachQueueOffset(func(topic string, q int32, next int64) error {
			got = append(got, fmt.Sprintf("%s:%d:%d", topic, q, next))
			return nil
		}))
		require.Equal(t, []string{"S:300:1", "T:0:9", "T:1:8"}, got)
		return nil
	}))
}

func TestReadOnlyTxRejectsWrites(t *testing.T) {
	db := openTestDB(t, "")
	err := db.View(func(tx *Tx) error { return tx.SetQueueOffset("T", 0, 1) })
	require.ErrorIs(t, err, bolt.ErrTxNotWritable)
	require.ErrorContains(t, err, "offsets: put queue offset")
}

func TestDedupe(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		for _, e := range []struct {
			key string
			ts  int64
		}{{"k30", 30}, {"k10", 10}, {"k20", 20}, {"k40", 40}, {"k20b", 20}, {"k50", 50}} {
			require.NoError(t, tx.PutDedupe(e.key, e.ts, []byte("res-"+e.key)))
		}
		v, ok, err := tx.Dedupe("k20")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "res-k20", string(v))
		_, ok, err = tx.Dedupe("missing")
		require.NoError(t, err)
		require.False(t, ok)
		// A retried put moves the entry to its new timestamp.
		require.NoError(t, tx.PutDedupe("k10", 45, []byte("res-k10-again")))
		require.ErrorIs(t, tx.PutDedupe("", 1, nil), ErrInvalidArgument)
		require.ErrorIs(t, tx.PutDedupe("k", -1, nil), ErrInvalidArgument)
		require.ErrorIs(t, tx.PutDedupe(string(make([]byte, MaxDedupeKeyLen+1)), 1, nil), ErrInvalidArgument)
		return nil
	})
	require.Len(t, dump(t, db)[bucketDedupeByTime], 6, "one index entry per key")

	expire := func(before int64) (n int) {
		update(t, db, func(tx *Tx) (err error) { n, err = tx.ExpireDedupe(before); return err })
		return n
	}
	require.Zero(t, expire(0))
	require.Zero(t, expire(20), "strictly before")
	require.Equal(t, 2, expire(21), "k20 and k20b")
	require.Equal(t, 2, expire(41), "k30 and k40; k10 moved to 45")
	require.NoError(t, db.View(func(tx *Tx) error {
		for key, want := range map[string]bool{"k10": true, "k20": false, "k20b": false, "k30": false, "k40": false, "k50": true} {
			v, ok, err := tx.Dedupe(key)
			require.NoError(t, err)
			require.Equal(t, want, ok, key)
			if key == "k10" {
				require.Equal(t, "res-k10-again", string(v))
			}
		}
		return nil
	}))
	d := dump(t, db)
	require.Len(t, d[bucketDedupe], 2)
	require.Len(t, d[bucketDedupeByTime], 2)
	require.Equal(t, 2, expire(1<<62))
	require.Zero(t, expire(1<<62))
}

func TestDedupeForEachAndClear(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.PutDedupe("b", 7, []byte("rb")))
		require.NoError(t, tx.PutDedupe("a", 9, []byte("ra")))
		return nil
	})
	var got []string
	require.NoError(t, db.View(func(tx *Tx) error {
		return tx.ForEachDedupe(func(k []byte, ts int64, res []byte) error {
			got = append(got, fmt.Sprintf("%s@%d=%s", k, ts, res))
			return nil
		})
	}))
	require.Equal(t, []string{"a@9=ra", "b@7=rb"}, got)
	var n int
	update(t, db, func(tx *Tx) (err error) { n, err = tx.ClearDedupe(); return err })
	require.Equal(t, 2, n)
	d := dump(t, db)
	require.Empty(t, d[bucketDedupe])
	require.Empty(t, d[bucketDedupeByTime])
}

func TestDedupeExpireOrderMany(t *testing.T) {
	db := openTestDB(t, "")
	const n = 500
	update(t, db, func(tx *Tx) error {
		for i := range n {
			ts := int64((i * 7919) % n) // a permutation of 0..n-1
			require.NoError(t, tx.PutDedupe(fmt.Sprintf("key-%d", i), ts, nil))
		}
		return nil
	})
	total := 0
	for before := int64(0); before <= n; before += 50 {
		var got int
		update(t, db, func(tx *Tx) (err error) { got, err = tx.ExpireDedupe(before); return err })
		want := 50
		if before == 0 {
			want = 0
		}
		require.Equal(t, want, got, "before %d", before)
		total += got
		require.Len(t, dump(t, db)[bucketDedupe], n-total)
	}
	require.Equal(t, n, total)
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, testOptions(t))
	require.NoError(t, err)
	populate(t, db)
	before := dump(t, db)
	require.NoError(t, db.Close())

	db = openTestDB(t, path)
	require.Equal(t, before, dump(t, db))
	require.NoError(t, db.View(func(tx *Tx) error {
		index, term, err := tx.AppliedIndex()
		require.NoError(t, err)
		require.Equal(t, [2]uint64{42, 3}, [2]uint64{index, term})
		c, ok, err := tx.Topic("OrderTopic")
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, c.Order)
		require.Equal(t, "FIFO", c.Attributes["message.type"])
		off, ok, err := tx.ConsumerOffset("g1", "OrderTopic", 11)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(110), off)
		v, ok, err := tx.Dedupe("producer-1/2")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "result-2", string(v))
		return nil
	}))
	err = db.Update(func(tx *Tx) error { return tx.SetApplied(41, 3) })
	require.ErrorIs(t, err, ErrAppliedRegress, "the applied index survives a reopen")
}

func TestUpdateIsAtomic(t *testing.T) {
	db := openTestDB(t, "")
	populate(t, db)
	before := dump(t, db)
	boom := errors.New("boom")
	err := db.Update(func(tx *Tx) error {
		require.NoError(t, tx.SetApplied(43, 3))
		require.NoError(t, tx.SetMeta("cq-checkpoint", []byte("new")))
		require.NoError(t, tx.SetConsumerOffset("g1", "TopicTest", 0, 999))
		require.NoError(t, tx.SetConsumerOffset("g9", "TopicTest", 0, 1))
		require.NoError(t, tx.SetQueueOffset("TopicTest", 0, 999))
		require.NoError(t, tx.PutTopic(NewTopicConfig("NewTopic", 2)))
		_, err := tx.DeleteTopic("TopicTest")
		require.NoError(t, err)
		require.NoError(t, tx.PutSubscriptionGroup(NewSubscriptionGroupConfig("g9")))
		_, err = tx.DeleteConsumerOffsets("g2", "")
		require.NoError(t, err)
		require.NoError(t, tx.PutDedupe("producer-2/1", 3000, []byte("x")))
		_, err = tx.ExpireDedupe(1500)
		require.NoError(t, err)
		return boom
	})
	require.Equal(t, boom, err, "fn's error is returned unchanged")
	require.Equal(t, before, dump(t, db), "nothing of a failed Update is applied")

	require.Panics(t, func() {
		_ = db.Update(func(tx *Tx) error {
			require.NoError(t, tx.SetApplied(44, 3))
			panic("apply bug")
		})
	})
	require.Equal(t, before, dump(t, db), "nothing of a panicking Update is applied")
}

func TestOpenLocked(t *testing.T) {
	db := openTestDB(t, "")
	opts := testOptions(t)
	opts.Timeout = 50 * time.Millisecond
	_, err := Open(db.Path(), opts)
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, "another raftmq process holds "+db.Path())
}

func TestOpenRejectsUnknownFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, testOptions(t))
	require.NoError(t, err)
	require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put(metaFormatKey(), encodeFormat(formatVersion+1))
	}))
	require.NoError(t, db.Close())
	_, err = Open(path, testOptions(t))
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("format version %d", formatVersion+1))
}

func TestCorruptValue(t *testing.T) {
	db := openTestDB(t, "")
	require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketConsumerOffsets)).Put(encodeConsumerOffsetKey("g", "T", 0), []byte{1, 2})
	}))
	err := db.View(func(tx *Tx) error {
		_, _, err := tx.ConsumerOffset("g", "T", 0)
		return err
	})
	require.ErrorIs(t, err, ErrCorrupt)
	err = db.View(func(tx *Tx) error {
		return tx.ForEachConsumerOffset(func(string, string, int32, int64) error { return nil })
	})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "g/T/0")
}

func TestOpenRejectsForeignBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	b, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, b.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("someone-elses"))
		return err
	}))
	require.NoError(t, b.Close())
	_, err = Open(path, testOptions(t))
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "not a raftmq state database")
}
