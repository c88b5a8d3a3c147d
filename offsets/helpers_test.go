package offsets

import (
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// testNow is the fixed clock of test databases.
func testNow() time.Time { return time.UnixMilli(1_700_000_000_123) }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testOptions(t testing.TB) Options {
	return Options{NoSync: true, Logger: testLogger(t), Now: testNow}
}

// openTestDB opens path (a fresh file in t.TempDir() if empty) and, at
// cleanup, runs bbolt's consistency check if the DB is still open, then
// closes it.
func openTestDB(t testing.TB, path string) *DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "state.db")
	}
	db, err := Open(path, testOptions(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		err := db.bolt.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("consistency check of %s: %v", path, err)
			}
			return nil
		})
		if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
			return
		}
		require.NoError(t, err)
		require.NoError(t, db.Close())
	})
	return db
}

// dump returns every bucket's raw contents, keys and values in hex.
func dump(t testing.TB, db *DB) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string]string{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error {
				m[hex.EncodeToString(k)] = hex.EncodeToString(v)
				return nil
			})
		})
	})
	require.NoError(t, err)
	return out
}

// update runs fn in an Update and requires success.
func update(t testing.TB, db *DB, fn func(tx *Tx) error) {
	t.Helper()
	require.NoError(t, db.Update(fn))
}

// populate writes a little of everything.
func populate(t testing.TB, db *DB) {
	t.Helper()
	update(t, db, func(tx *Tx) error {
		require.NoError(t, tx.SetApplied(42, 3))
		require.NoError(t, tx.SetMeta("cq-checkpoint", []byte{1, 2, 3}))
		order := NewTopicConfig("OrderTopic", 8)
		order.Order = true
		order.Attributes["message.type"] = "FIFO"
		for _, c := range []TopicConfig{NewTopicConfig("TopicTest", 4), order, NewTopicConfig("%RETRY%g1", 1)} {
			require.NoError(t, tx.PutTopic(c))
		}
		g2 := NewSubscriptionGroupConfig("g2")
		g2.ConsumeBroadcastEnable = false
		g2.RetryMaxTimes = 3
		require.NoError(t, tx.PutSubscriptionGroup(NewSubscriptionGroupConfig("g1")))
		require.NoError(t, tx.PutSubscriptionGroup(g2))
		for q := int32(0); q < 4; q++ {
			require.NoError(t, tx.SetConsumerOffset("g1", "TopicTest", q, int64(100+q)))
			require.NoError(t, tx.SetConsumerOffset("g2", "TopicTest", q, int64(q)))
			require.NoError(t, tx.SetQueueOffset("TopicTest", q, int64(200+q)))
		}
		for q := int32(0); q < 12; q++ { // 12 queues: numeric order differs from string order
			require.NoError(t, tx.SetConsumerOffset("g1", "OrderTopic", q, int64(q*10)))
		}
		require.NoError(t, tx.SetConsumerOffset("g1", "%RETRY%g1", 0, 7))
		require.NoError(t, tx.PutDedupe("producer-1/1", 1000, []byte("result-1")))
		require.NoError(t, tx.PutDedupe("producer-1/2", 2000, []byte("result-2")))
		return nil
	})
}
