package offsets

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/raftmq/raftmq/internal/vfs"
)

// DefaultLockTimeout is how long Open waits for another process to release
// the database file when Options.Timeout is zero.
const DefaultLockTimeout = time.Second

// fileMode is the permission of a new database file.
const fileMode = 0o600

var (
	// ErrLocked is returned (wrapped) by Open when another process holds
	// the database file for longer than the lock timeout.
	ErrLocked = errors.New("offsets: database is locked")
	// ErrCorrupt is returned (wrapped) when a stored key or value does not
	// decode, a bucket is missing, or the format version is unknown.
	ErrCorrupt = errors.New("offsets: corrupt database")
	// ErrAppliedRegress is returned (wrapped) by Tx.SetApplied when the new
	// applied position is behind the stored one.
	ErrAppliedRegress = errors.New("offsets: applied index regress")
	// ErrInvalidConfig is returned (wrapped) by Tx.PutTopic,
	// Tx.PutSubscriptionGroup and ImportConfig when a configuration or a
	// config file fails validation.
	ErrInvalidConfig = errors.New("offsets: invalid config")
	// ErrInvalidArgument is returned (wrapped) by Tx setters when a name,
	// queue id, offset, key or timestamp is out of range.
	ErrInvalidArgument = errors.New("offsets: invalid argument")
)

// Options configure Open. The zero value is ready for production use.
type Options struct {
	// NoSync skips fsync on commit. For tests only: a crash loses commits.
	NoSync bool
	// Timeout is how long Open waits for the file lock; zero means
	// DefaultLockTimeout.
	Timeout time.Duration
	// Logger receives the package's log records; nil discards them.
	Logger *slog.Logger
	// Now is the clock used for the dataVersion timestamp of exported
	// config files; nil means time.Now.
	Now func() time.Time
}

// DB is the broker's replicated-state database. It is safe for concurrent
// use: any number of View transactions run alongside at most one Update.
type DB struct {
	bolt *bolt.DB
	path string
	log  *slog.Logger
	now  func() time.Time
	fs   vfs.FS // config files
}

// Open opens or creates the database at path.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	db := &DB{path: path, log: opts.Logger, now: opts.Now, fs: vfs.Default()}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	if db.now == nil {
		db.now = time.Now
	}
	b, err := bolt.Open(path, fileMode, &bolt.Options{Timeout: timeout, NoSync: opts.NoSync})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("offsets: another raftmq process holds %s (waited %v): %w", path, timeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("offsets: open %s: %w", path, err)
	}
	db.bolt = b
	if err := initDB(b); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("offsets: open %s: %w", path, err)
	}
	var index, term uint64
	err = db.View(func(tx *Tx) (err error) { index, term, err = tx.AppliedIndex(); return err })
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("offsets: open %s: %w", path, err)
	}
	db.log.Debug("offsets: opened", "path", path, "applied_index", index, "applied_term", term)
	return db, nil
}

// initDB creates the buckets and format version of a new (empty) database,
// or checks those of an existing one. A bbolt file holding other buckets is
// not taken over.
func initDB(b *bolt.DB) error {
	empty, upgrade := true, false
	err := b.View(func(tx *bolt.Tx) error {
		empty = tx.ForEach(func([]byte, *bolt.Bucket) error { return errNotEmpty }) == nil
		if empty {
			return nil
		}
		if err := checkFormat(tx); err != nil {
			if errors.Is(err, errFormatOld) {
				upgrade = true
				return nil
			}
			return err
		}
		_, err := newTx(tx)
		return err
	})
	if err == nil && upgrade {
		return upgradeFormat(b)
	}
	if err != nil || !empty {
		return err
	}
	return b.Update(func(tx *bolt.Tx) error {
		for _, name := range bucketNames() {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return fmt.Errorf("offsets: create bucket %q: %w", name, err)
			}
		}
		return tx.Bucket([]byte(bucketMeta)).Put(metaFormatKey(), encodeFormat(formatVersion))
	})
}

// errFormatOld is checkFormat's answer for a version 1 or 2 database,
// which initDB upgrades.
var errFormatOld = errors.New("older format version")

// upgradeFormat turns a version 1 or 2 database into the current version
// in one transaction: it adds the buckets later versions brought (the
// schedule and transactions buckets in 2, pop in 3), empty, since older
// brokers kept no such state.
func upgradeFormat(b *bolt.DB) error {
	return b.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketSchedule, bucketTransactions, bucketPop} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("offsets: upgrade to format %d: create bucket %q: %w", formatVersion, name, err)
			}
		}
		if _, err := newTx(tx); err != nil {
			return fmt.Errorf("offsets: upgrade to format %d: %w", formatVersion, err)
		}
		return tx.Bucket([]byte(bucketMeta)).Put(metaFormatKey(), encodeFormat(formatVersion))
	})
}

// errNotEmpty stops initDB's bucket walk at the first bucket.
var errNotEmpty = errors.New("not empty")

// checkFormat verifies the stored format version.
func checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return fmt.Errorf("offsets: bucket %q missing, not a raftmq state database: %w", bucketMeta, ErrCorrupt)
	}
	v := meta.Get(metaFormatKey())
	if v == nil {
		return fmt.Errorf("offsets: format version missing: %w", ErrCorrupt)
	}
	got, err := decodeFormat(v)
	if err != nil {
		return err
	}
	if got == 1 || got == 2 {
		return errFormatOld
	}
	if got != formatVersion {
		return fmt.Errorf("offsets: format version %d, this build reads %d: %w", got, formatVersion, ErrCorrupt)
	}
	return nil
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Close closes the database. Transactions must have finished.
func (db *DB) Close() error {
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("offsets: close %s: %w", db.path, err)
	}
	return nil
}

// View runs fn in a read-only transaction. The Tx and any slice it returns
// that is documented as not copied must not be used after fn returns.
func (db *DB) View(fn func(*Tx) error) error {
	return db.run(false, fn)
}

// Update runs fn in a read-write transaction and commits it (with fsync
// unless Options.NoSync) if fn returns nil. If fn returns an error, or
// panics, nothing fn wrote is kept. fn's error is returned unchanged.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.run(true, fn)
}

// fnError marks an error returned by the caller's fn, so run can return it
// without adding a prefix of its own.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (db *DB) run(writable bool, fn func(*Tx) error) error {
	body := func(btx *bolt.Tx) error {
		tx, err := newTx(btx)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return fnError{err}
		}
		return nil
	}
	var err error
	if writable {
		err = db.bolt.Update(body)
	} else {
		err = db.bolt.View(body)
	}
	var fe fnError
	if errors.As(err, &fe) {
		return fe.err
	}
	if err != nil {
		return fmt.Errorf("offsets: transaction on %s: %w", db.path, err)
	}
	return nil
}
