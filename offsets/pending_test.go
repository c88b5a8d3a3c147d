package offsets

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestScheduleOffsets(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.SetScheduleOffset(2, 7))
		require.NoError(t, tx.SetScheduleOffset(0, 3))
		require.NoError(t, tx.SetScheduleOffset(2, 9))
		require.ErrorIs(t, tx.SetScheduleOffset(-1, 1), ErrInvalidArgument)
		require.ErrorIs(t, tx.SetScheduleOffset(1, -1), ErrInvalidArgument)
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		v, err := tx.ScheduleOffset(2)
		require.NoError(t, err)
		require.EqualValues(t, 9, v)
		v, err = tx.ScheduleOffset(5)
		require.NoError(t, err)
		require.Zero(t, v)
		var got [][2]int64
		require.NoError(t, tx.ForEachScheduleOffset(func(q int32, next int64) error {
			got = append(got, [2]int64{int64(q), next})
			return nil
		}))
		require.Equal(t, [][2]int64{{0, 3}, {2, 9}}, got)
		return nil
	}))
}

func TestTransactions(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.PutTransaction(300, []byte("c")))
		require.NoError(t, tx.PutTransaction(5, []byte("a")))
		require.NoError(t, tx.PutTransaction(40, []byte("b")))
		require.NoError(t, tx.DeleteTransaction(40))
		require.NoError(t, tx.DeleteTransaction(41)) // absent
		require.ErrorIs(t, tx.PutTransaction(-1, nil), ErrInvalidArgument)
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		var offs []int64
		var vals []string
		require.NoError(t, tx.ForEachTransaction(func(off int64, v []byte) error {
			offs, vals = append(offs, off), append(vals, string(v))
			return nil
		}))
		require.Equal(t, []int64{5, 300}, offs)
		require.Equal(t, []string{"a", "c"}, vals)
		return nil
	}))
}

// A database written by a version 1 build (no schedule or transactions
// bucket) is upgraded when opened, and keeps what it held.
func TestOpenUpgradesFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, testOptions(t))
	require.NoError(t, err)
	update(t, db, func(tx *Tx) error { return tx.SetConsumerOffset("g", "T", 1, 42) })
	require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error {
		require.NoError(t, tx.DeleteBucket([]byte(bucketSchedule)))
		require.NoError(t, tx.DeleteBucket([]byte(bucketTransactions)))
		require.NoError(t, tx.DeleteBucket([]byte(bucketPop)))
		return tx.Bucket([]byte(bucketMeta)).Put(metaFormatKey(), encodeFormat(1))
	}))
	require.NoError(t, db.Close())

	db, err = Open(path, testOptions(t))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *Tx) error {
		off, ok, err := tx.ConsumerOffset("g", "T", 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 42, off)
		_, err = tx.ScheduleOffset(0)
		return err
	}))
	update(t, db, func(tx *Tx) error { return tx.SetScheduleOffset(0, 1) })
	require.NoError(t, db.bolt.View(func(tx *bolt.Tx) error {
		v, err := decodeFormat(tx.Bucket([]byte(bucketMeta)).Get(metaFormatKey()))
		require.NoError(t, err)
		require.Equal(t, formatVersion, v)
		return nil
	}))
}

func TestPopQueues(t *testing.T) {
	db := openTestDB(t, "")
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.PutPopQueue("g", "T", 1, []byte("b")))
		require.NoError(t, tx.PutPopQueue("g", "T", 0, []byte("a")))
		require.NoError(t, tx.PutPopQueue("h", "T", 0, []byte("c")))
		require.NoError(t, tx.DeletePopQueue("h", "T", 0))
		require.NoError(t, tx.DeletePopQueue("h", "T", 9)) // absent
		require.ErrorIs(t, tx.PutPopQueue("", "T", 0, nil), ErrInvalidArgument)
		require.ErrorIs(t, tx.PutPopQueue("g", "T", -1, nil), ErrInvalidArgument)
		return nil
	})
	require.NoError(t, db.View(func(tx *Tx) error {
		var got []string
		require.NoError(t, tx.ForEachPopQueue(func(g, topic string, q int32, v []byte) error {
			got = append(got, fmt.Sprintf("%s/%s/%d=%s", g, topic, q, v))
			return nil
		}))
		require.Equal(t, []string{"g/T/0=a", "g/T/1=b"}, got)
		return nil
	}))
}

// A version 2 database (no pop bucket) is upgraded when opened.
func TestOpenUpgradesFormat2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, testOptions(t))
	require.NoError(t, err)
	update(t, db, func(tx *Tx) error { return tx.SetScheduleOffset(3, 8) })
	require.NoError(t, db.bolt.Update(func(tx *bolt.Tx) error {
		require.NoError(t, tx.DeleteBucket([]byte(bucketPop)))
		return tx.Bucket([]byte(bucketMeta)).Put(metaFormatKey(), encodeFormat(2))
	}))
	require.NoError(t, db.Close())
	db, err = Open(path, testOptions(t))
	require.NoError(t, err)
	defer db.Close()
	update(t, db, func(tx *Tx) error { return tx.PutPopQueue("g", "T", 0, []byte("x")) })
	require.NoError(t, db.View(func(tx *Tx) error {
		v, err := tx.ScheduleOffset(3)
		require.NoError(t, err)
		require.EqualValues(t, 8, v)
		return nil
	}))
}
