package offsets

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/raftmq/raftmq/internal/vfs"
)

// snapshotCopyBuf is the chunk size RestoreSnapshot copies with.
const snapshotCopyBuf = 1 << 20

// WriteSnapshot writes a consistent copy of the whole database to w: a
// valid bbolt file as of one read transaction. Writers are not blocked.
func (db *DB) WriteSnapshot(w io.Writer) error {
	err := db.bolt.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("offsets: write snapshot of %s: %w", db.path, err)
	}
	return nil
}

// RestoreSnapshot replaces the database file at path with a snapshot read
// from r (as written by WriteSnapshot). The database at path must be closed.
// The snapshot goes to a temporary file that is fsynced and verified (its
// size matches its meta page, bbolt's consistency check passes, and it has
// raftmq's buckets and format version) before it is renamed over path and
// the directory is fsynced. On error, path is unchanged.
func RestoreSnapshot(path string, r io.Reader) error {
	fsys := vfs.Default()
	tmp := path + ".restore.tmp"
	err := restoreTo(fsys, tmp, path, r)
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("offsets: restore snapshot to %s: %w", path, err)
	}
	return nil
}

func restoreTo(fsys vfs.FS, tmp, path string, r io.Reader) error {
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	n, err := copyAt(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := verifySnapshotFile(tmp, n); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// copyAt copies r into f from offset 0 and returns the byte count.
func copyAt(f vfs.File, r io.Reader) (int64, error) {
	buf := make([]byte, snapshotCopyBuf)
	var off int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return off, err
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			return off, nil
		}
		if rerr != nil {
			return off, fmt.Errorf("read snapshot: %w", rerr)
		}
	}
}

// verifySnapshotFile checks that the file at path is a complete raftmq
// database of size bytes. The size check comes first: bbolt maps the file,
// and touching a page past the end of a truncated file would fault.
func verifySnapshotFile(path string, size int64) error {
	if size == 0 {
		return fmt.Errorf("snapshot is empty, not a bbolt database: %w", ErrCorrupt)
	}
	b, err := bolt.Open(path, fileMode, &bolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return fmt.Errorf("snapshot is not a bbolt database: %w: %w", err, ErrCorrupt)
	}
	defer b.Close()
	return b.View(func(tx *bolt.Tx) error {
		if tx.Size() != size {
			return fmt.Errorf("snapshot is %d bytes, its meta page says %d: %w", size, tx.Size(), ErrCorrupt)
		}
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return fmt.Errorf("snapshot fails consistency check: %w: %w", first, ErrCorrupt)
		}
		if _, err := newTx(tx); err != nil {
			return err
		}
		return checkFormat(tx)
	})
}
