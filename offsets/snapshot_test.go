package offsets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestSnapshotRestore(t *testing.T) {
	src := openTestDB(t, "")
	populate(t, src)
	var snap bytes.Buffer
	require.NoError(t, src.WriteSnapshot(&snap))

	// Writes after the snapshot are not in it.
	update(t, src, func(tx *Tx) error { return tx.SetApplied(50, 3) })

	path := filepath.Join(t.TempDir(), "restored.db")
	require.NoError(t, RestoreSnapshot(path, bytes.NewReader(snap.Bytes())))
	dst := openTestDB(t, path)
	require.NoError(t, dst.View(func(tx *Tx) error {
		index, _, err := tx.AppliedIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(42), index)
		return nil
	}))
	want := dump(t, openSnapshotCopy(t, snap.Bytes()))
	require.Equal(t, want, dump(t, dst))

	// The restored DB is writable and exports the same config.
	update(t, dst, func(tx *Tx) error { return tx.SetApplied(43, 3) })
	d1, d2 := t.TempDir(), t.TempDir()
	require.NoError(t, ExportConfig(dst, d1))
	require.NoError(t, ExportConfig(openSnapshotCopy(t, snap.Bytes()), d2))
	for _, name := range configFiles {
		require.Equal(t, readFile(t, filepath.Join(d2, name)), readFile(t, filepath.Join(d1, name)))
	}
	leftovers, err := filepath.Glob(path + ".*")
	require.NoError(t, err)
	require.Empty(t, leftovers)
}

// openSnapshotCopy restores snap to a fresh file and opens it.
func openSnapshotCopy(t *testing.T, snap []byte) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, RestoreSnapshot(path, bytes.NewReader(snap)))
	return openTestDB(t, path)
}

func TestSnapshotSameContentsAsSource(t *testing.T) {
	src := openTestDB(t, "")
	populate(t, src)
	var snap bytes.Buffer
	require.NoError(t, src.WriteSnapshot(&snap))
	path := filepath.Join(t.TempDir(), "restored.db")
	require.NoError(t, RestoreSnapshot(path, &snap))
	require.Equal(t, dump(t, src), dump(t, openTestDB(t, path)))
}

func TestRestoreReplacesExisting(t *testing.T) {
	src := openTestDB(t, "")
	populate(t, src)
	var snap bytes.Buffer
	require.NoError(t, src.WriteSnapshot(&snap))

	path := filepath.Join(t.TempDir(), "state.db")
	old, err := Open(path, testOptions(t))
	require.NoError(t, err)
	update(t, old, func(tx *Tx) error { return tx.SetConsumerOffset("stale", "T", 0, 1) })
	require.NoError(t, old.Close())

	require.NoError(t, RestoreSnapshot(path, &snap))
	require.Equal(t, dump(t, src), dump(t, openTestDB(t, path)))
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	src := openTestDB(t, "")
	populate(t, src)
	var buf bytes.Buffer
	require.NoError(t, src.WriteSnapshot(&buf))
	snap := buf.Bytes()

	notRaftmq := filepath.Join(t.TempDir(), "plain.db")
	require.NoError(t, os.WriteFile(notRaftmq, nil, 0o600))
	plain, err := Open(notRaftmq, testOptions(t))
	require.NoError(t, err)
	require.NoError(t, plain.bolt.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(bucketDedupe)) }))
	var plainSnap bytes.Buffer
	require.NoError(t, plain.WriteSnapshot(&plainSnap))
	require.NoError(t, plain.Close())

	flipped := bytes.Clone(snap)
	const inMeta = 16 + 8                    // page header, then the meta's pageSize field
	flipped[inMeta] ^= 0xFF                  // meta page 0 ...
	flipped[os.Getpagesize()+inMeta] ^= 0xFF // ... and meta page 1: both checksums fail

	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a bbolt database"},
		{"garbage", bytes.Repeat([]byte("raftmq"), 4000), "not a bbolt database"},
		{"truncated", snap[:len(snap)-os.Getpagesize()], "its meta page says"},
		{"extended", append(bytes.Clone(snap), make([]byte, os.Getpagesize())...), "its meta page says"},
		{"both metas corrupt", flipped, "not a bbolt database"},
		{"missing bucket", plainSnap.Bytes(), `bucket "dedupe" missing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			existing, err := Open(path, testOptions(t))
			require.NoError(t, err)
			update(t, existing, func(tx *Tx) error { return tx.SetApplied(7, 1) })
			before := dump(t, existing)
			require.NoError(t, existing.Close())

			err = RestoreSnapshot(path, bytes.NewReader(c.data))
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, "offsets: restore snapshot to "+path)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, before, dump(t, openTestDB(t, path)), "path is unchanged")
			leftovers, err := filepath.Glob(path + ".*")
			require.NoError(t, err)
			require.Empty(t, leftovers, "temp file removed")
		})
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, fmt.Errorf("network down")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestRestoreReadError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	err := RestoreSnapshot(path, &failingReader{n: 10000})
	require.ErrorContains(t, err, "read snapshot: network down")
	_, statErr := os.Stat(path)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}
