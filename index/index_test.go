package index

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/message"
)

func TestKeyHash(t *testing.T) {
	require.Equal(t, message.JavaHashCode("Aa"), message.JavaHashCode("BB"))
	require.Equal(t, message.JavaHashCode("AaAa"), message.JavaHashCode("BBBB"))
	require.Equal(t, int32(2112), keyHash("Aa"))
	// "polygenelubricants".hashCode() == Integer.MIN_VALUE; Math.abs keeps
	// it negative and RocketMQ maps it to 0.
	require.Equal(t, int32(math.MinInt32), message.JavaHashCode("polygenelubricants"))
	require.Equal(t, int32(0), keyHash("polygenelubricants"))
	for _, k := range []string{"", "a", "TopicTest#k", "héllo#wörld", "x#日本"} {
		h := message.JavaHashCode(k)
		want := h
		if h < 0 {
			want = -h
		}
		require.Equal(t, want, keyHash(k), k)
	}
}

func TestFileName(t *testing.T) {
	require.Equal(t, "20240506070809123", fileName(baseTS))
	require.Equal(t, "19700101000000000", fileName(0))
	for _, ms := range []int64{0, 1, 999, 1000, baseTS, maxNameMillis} {
		got, ok := parseFileName(fileName(ms))
		require.True(t, ok)
		require.Equal(t, ms, got)
	}
	for _, bad := range []string{"", "2024050607080912", "202405060708091234", "2024050607080912x", "20241306070809123", "20240230070809123"} {
		_, ok := parseFileName(bad)
		require.False(t, ok, bad)
	}
}

func TestOptions(t *testing.T) {
	fs := vfs.NewMem()
	for _, o := range []Options{{SlotCount: -1}, {MaxEntries: 1}, {MaxEntries: -5}, {MaxQueryNum: -1}} {
		_, err := Open(fs, "/x", o)
		require.ErrorIs(t, err, ErrInvalid)
	}
}

func TestPutQuery(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		x := openT(t, fs, dir, tinyOpts(t, 8, 1000))
		ops := seqOps(300, 300)
		putAll(t, x, ops)
		for _, o := range ops {
			got, err := x.Query(o.key, 10, 0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, []int64{o.phy}, got, o.key)
		}
		got, err := x.Query("TopicTest#absent", 10, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Empty(t, got)

		files := x.Files()
		require.Len(t, files, 1)
		require.Equal(t, FileInfo{
			Name:           fileName(baseTS),
			BeginTimestamp: baseTS,
			EndTimestamp:   ops[len(ops)-1].ts,
			BeginPhyOffset: 0,
			EndPhyOffset:   ops[len(ops)-1].phy,
			HashSlotCount:  8,
			IndexCount:     301,
		}, files[0])
		require.NoError(t, x.Close())
		require.ErrorIs(t, x.Put("k", 1e6, baseTS), ErrClosed)
		_, err = x.Query("k", 1, 0, 1)
		require.ErrorIs(t, err, ErrClosed)
		require.NoError(t, x.Close())
	})
}

func TestQueryTimeRange(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		x := openT(t, fs, dir, tinyOpts(t, 16, 1000))
		defer x.Close()
		// One key, ten entries one second apart, plus one at +10.5 s that
		// the format records as +10 s.
		var want []int64
		for i := range 10 {
			require.NoError(t, x.Put("T#k", int64(i), baseTS+int64(i)*1000))
			want = append([]int64{int64(i)}, want...)
		}
		require.NoError(t, x.Put("T#k", 10, baseTS+10500))

		q := func(begin, end int64) []int64 {
			got, err := x.Query("T#k", 64, begin, end)
			require.NoError(t, err)
			return got
		}
		require.Equal(t, append([]int64{10}, want...), q(0, math.MaxInt64))
		require.Equal(t, []int64{5, 4, 3}, q(baseTS+3000, baseTS+5000))
		require.Equal(t, []int64{5, 4}, q(baseTS+3001, baseTS+5999))
		require.Equal(t, []int64{0}, q(baseTS, baseTS))
		require.Empty(t, q(0, baseTS-1))
		require.Empty(t, q(baseTS+11000, math.MaxInt64))
		require.Empty(t, q(baseTS+5000, baseTS+3000))
		// Second granularity: the entry stored at +10.5 s reads as +10 s.
		require.Equal(t, []int64{10}, q(baseTS+10000, baseTS+10000))
		require.Empty(t, q(baseTS+10200, baseTS+10600))
	})
}

func TestQueryMaxNum(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		opts := tinyOpts(t, 4, 64)
		x := openT(t, fs, dir, opts)
		for i := range 200 {
			require.NoError(t, x.Put("T#hot", int64(i), baseTS+int64(i)))
		}
		newest := func(n int) []int64 {
			var out []int64
			for i := 199; i > 199-n; i-- {
				out = append(out, int64(i))
			}
			return out
		}
		for _, n := range []int{1, 10, 63, 64} {
			got, err := x.Query("T#hot", n, 0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, newest(n), got)
		}
		got, err := x.Query("T#hot", 1000, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, newest(DefaultMaxQueryNum), got, "capped at 64")
		for _, n := range []int{0, -1} {
			got, err = x.Query("T#hot", n, 0, math.MaxInt64)
			require.NoError(t, err)
			require.Empty(t, got)
		}
		require.NoError(t, x.Close())

		opts.MaxQueryNum = 500
		x = openT(t, fs, dir, opts)
		defer x.Close()
		got, err = x.Query("T#hot", 1000, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, newest(200), got, "spans every file")
	})
}

func TestMultipleFilesAndReopen(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		opts := tinyOpts(t, 8, 16) // 15 entries per file
		ops := seqOps(100, 7)
		x := openT(t, fs, dir, opts)
		putAll(t, x, ops[:50])
		require.NoError(t, x.Close())

		x = openT(t, fs, dir, opts)
		putAll(t, x, ops[50:])
		files := x.Files()
		require.Len(t, files, 7) // ceil(100/15)
		for i, f := range files {
			first := ops[15*i]
			require.Equal(t, fileName(first.ts), f.Name)
			require.Equal(t, first.ts, f.BeginTimestamp)
			require.Equal(t, first.phy, f.BeginPhyOffset)
			last := ops[min(15*i+14, len(ops)-1)]
			require.Equal(t, last.ts, f.EndTimestamp)
			require.Equal(t, last.phy, f.EndPhyOffset)
			require.Equal(t, int32(min(16, 1+len(ops)-15*i)), f.IndexCount)
		}
		check := func(x *Index) {
			for k := range 7 {
				key := fmt.Sprintf("TopicTest#key-%d", k)
				var want []int64
				for i := len(ops) - 1; i >= 0; i-- {
					if ops[i].key == key {
						want = append(want, ops[i].phy)
					}
				}
				got, err := x.Query(key, 64, 0, math.MaxInt64)
				require.NoError(t, err)
				require.Equal(t, want, got, key)
				// A window that covers only the third file.
				got, err = x.Query(key, 64, files[2].BeginTimestamp, files[2].EndTimestamp)
				require.NoError(t, err)
				for _, p := range got {
					require.True(t, p >= files[2].BeginPhyOffset && p <= files[2].EndPhyOffset)
				}
			}
		}
		check(x)
		require.NoError(t, x.Close())
		x = openT(t, fs, dir, opts)
		defer x.Close()
		require.Equal(t, files, x.Files())
		check(x)

		// The same puts in one run give the same bytes.
		ref := vfs.NewMem()
		y := openT(t, ref, "/ref", opts)
		putAll(t, y, ops)
		require.NoError(t, y.Close())
		require.Equal(t, snapshot(t, ref, "/ref"), snapshot(t, fs, dir))
	})
}

func TestFileNamesDeterministic(t *testing.T) {
	fs := vfs.NewMem()
	x := openT(t, fs, "/i", tinyOpts(t, 2, 3)) // 2 entries per file
	defer x.Close()
	// Timestamps that go backwards and repeat still give ascending names.
	putAll(t, x, []op{
		{"a", 0, baseTS}, {"b", 1, baseTS + 5}, // file 1
		{"c", 2, baseTS}, {"d", 3, baseTS}, // file 2: name would equal file 1's
		{"e", 4, baseTS - 1000}, // file 3: name would sort before
		{"f", 5, baseTS - 1000},
		{"g", 6, baseTS + 10_000}, // file 4: its own time again
	})
	var names []string
	for _, f := range x.Files() {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{fileName(baseTS), fileName(baseTS + 1), fileName(baseTS + 2), fileName(baseTS + 10_000)}, names)
	require.True(t, slices.IsSorted(names))
	got, err := x.Query("e", 5, baseTS-1000, baseTS-1000)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, got)
}

func TestPutRejectsBadArguments(t *testing.T) {
	x := openT(t, vfs.NewMem(), "/i", tinyOpts(t, 4, 8))
	defer x.Close()
	require.NoError(t, x.Put("k", 100, baseTS))
	require.NoError(t, x.Put("k2", 100, baseTS), "keys of one message share its offset")
	require.ErrorIs(t, x.Put("k", 99, baseTS), ErrInvalid)
	require.ErrorIs(t, x.Put("k", -1, baseTS), ErrInvalid)
	require.ErrorIs(t, x.Put("k", 200, -1), ErrInvalid)
	require.NoError(t, x.Put("k", 200, baseTS), "argument errors are not sticky")
}

// TestHashCollisions forces every key into one chain: a single slot, and
// keys whose Java hashes are equal.
func TestHashCollisions(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		opts := tinyOpts(t, 1, 64)
		x := openT(t, fs, dir, opts)
		keys := []string{"T#Aa", "T#BB", "T#AaAa", "T#BBBB", "T#other", "polygenelubricants"}
		require.Equal(t, keyHash("T#Aa"), keyHash("T#BB"))
		require.Equal(t, keyHash("T#AaAa"), keyHash("T#BBBB"))
		var ops []op
		for i := range 30 {
			ops = append(ops, op{keys[i%len(keys)], int64(i), baseTS + int64(i)*1000})
		}
		putAll(t, x, ops)
		candidates := func(key string) []int64 {
			var out []int64
			for i := len(ops) - 1; i >= 0; i-- {
				if keyHash(ops[i].key) == keyHash(key) {
					out = append(out, ops[i].phy)
				}
			}
			return out
		}
		for _, k := range keys {
			got, err := x.Query(k, 64, 0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, candidates(k), got, k)
		}
		got, err := x.Query("T#BB", 64, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Len(t, got, 10, "both Aa and BB: the caller re-checks the real key")

		require.NoError(t, x.Close())
		files := snapshot(t, fs, dir)
		require.Len(t, files, 1)
		for _, b := range files {
			// One slot: the chain is every entry, newest first.
			require.Equal(t, int32(len(ops)), readRawSlot(b, 0))
			for i := 1; i <= len(ops); i++ {
				e := readRawEntry(b, 1, i)
				require.Equal(t, int32(i-1), e.prev, "entry %d", i)
				require.Equal(t, keyHash(ops[i-1].key), e.hash)
				require.Equal(t, ops[i-1].phy, e.phy)
			}
		}
	})
}

func TestDeleteBefore(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		opts := tinyOpts(t, 4, 11) // 10 entries per file
		x := openT(t, fs, dir, opts)
		ops := seqOps(45, 3) // files end at phy 900, 1900, 2900, 3900, active 4400
		putAll(t, x, ops)
		require.Len(t, x.Files(), 5)

		n, err := x.DeleteBefore(900)
		require.NoError(t, err)
		require.Zero(t, n, "endPhyOffset 900 is not below 900")
		n, err = x.DeleteBefore(901)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = x.DeleteBefore(3000)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		files := x.Files()
		require.Len(t, files, 2)
		require.Equal(t, int64(3000), files[0].BeginPhyOffset)

		got, err := x.Query("TopicTest#key-0", 64, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, []int64{4200, 3900, 3600, 3300, 3000}, got)

		n, err = x.DeleteBefore(math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, 1, n, "never the active file")
		require.Len(t, x.Files(), 1)
		require.NoError(t, x.Close())

		names, err := fs.List(dir)
		require.NoError(t, err)
		require.Equal(t, []string{fileName(ops[40].ts)}, names)
		x = openT(t, fs, dir, opts)
		require.NoError(t, x.Close())
	})
}

func TestStickyWriteErrors(t *testing.T) {
	for _, failing := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpCreate, vfs.OpTruncate, vfs.OpMap, vfs.OpSyncDir} {
		t.Run(failing.String(), func(t *testing.T) {
			tog := &vfs.Toggle{}
			fs := vfs.WithErrors(vfs.NewMem(), tog)
			x := openT(t, fs, "/i", tinyOpts(t, 4, 4))
			putAll(t, x, seqOps(3, 3))
			tog.Arm(failing)
			var err error
			for i := 3; i < 10 && err == nil; i++ {
				if err = x.Put("k", int64(1000+i), baseTS+int64(i)*1000); err == nil {
					_, err = x.Sync()
				}
			}
			require.ErrorIs(t, err, vfs.ErrInjected)
			tog.Disarm()
			require.ErrorIs(t, x.Put("k", 5000, baseTS+99_000), vfs.ErrInjected, "sticky")
			_, err = x.Sync()
			require.ErrorIs(t, err, vfs.ErrInjected)
			_, err = x.DeleteBefore(1)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.ErrorIs(t, x.Recover(Checkpoint{}), vfs.ErrInjected)
			require.NoError(t, x.Close())
		})
	}
}

// TestConcurrentQuery runs queries against a writer that rolls files and
// deletes old ones; run it with -race.
func TestConcurrentQuery(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs vfs.FS, dir string) {
		x := openT(t, fs, dir, Options{SlotCount: 16, MaxEntries: 50})
		defer x.Close()
		ops := seqOps(3000, 10)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 4)
		for r := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					got, err := x.Query(fmt.Sprintf("TopicTest#key-%d", (i+r)%10), 64, 0, math.MaxInt64)
					if err != nil {
						errs <- err
						return
					}
					if !slices.IsSortedFunc(got, func(a, b int64) int { return int(b - a) }) {
						errs <- errors.New(fmt.Sprint("not newest first: ", got))
						return
					}
					_ = x.Files()
				}
			})
		}
		for i, o := range ops {
			require.NoError(t, x.Put(o.key, o.phy, o.ts))
			if i%97 == 0 {
				_, err := x.Sync()
				require.NoError(t, err)
			}
			if i%301 == 0 {
				_, err := x.DeleteBefore(o.phy - 5000)
				require.NoError(t, err)
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

func TestOpenIgnoresForeignNames(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/i", 0o755))
	require.NoError(t, vfs.WriteFileAtomic(fs, "/i", "README", []byte("hello")))
	x := openT(t, fs, "/i", tinyOpts(t, 4, 8))
	require.Empty(t, x.Files())
	require.NoError(t, x.Put("k", 1, baseTS))
	require.NoError(t, x.Close())
	x = openT(t, fs, "/i", tinyOpts(t, 4, 8))
	require.Len(t, x.Files(), 1)
	require.NoError(t, x.Close())
}

func TestErrorsNameIndex(t *testing.T) {
	err := corruptf("/d/f", 36, "bad %d", 1)
	require.True(t, errors.Is(err, ErrCorrupt))
	require.False(t, errors.Is(err, ErrNeedsRecover))
	require.Equal(t, "index: corrupt file /d/f at offset 36: bad 1", err.Error())
}

// KeyHash of a prefix's hash and a suffix is the hash of the key they
// make, whatever the runes (PutHash and QueryHash meet Put and Query).
func TestKeyHashOfPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	runes := []rune("aZ09#-_ é漢\U0001F600")
	word := func() string {
		r := make([]rune, rng.IntN(40))
		for i := range r {
			r[i] = runes[rng.IntN(len(runes))]
		}
		return string(r)
	}
	// Bytes that are not UTF-8 (a lone continuation byte, a cut sequence,
	// an encoded surrogate) in the key or the topic.
	bad := []string{"\xff", "\xc3", "\x80", "\xed\xa0\x80", "\xe6\xbc"}
	dirty := func() string {
		w := word()
		for range rng.IntN(3) {
			i := rng.IntN(len(w) + 1)
			w = w[:i] + bad[rng.IntN(len(bad))] + w[i:]
		}
		return w
	}
	for range 2000 {
		p, s := word()+"#", word()
		require.Equal(t, keyHash(p+s), KeyHash(message.JavaHashCode(p), s), "%q + %q", p, s)
		p, s = dirty()+"#", dirty()
		require.Equal(t, keyHash(p+s), KeyHash(message.JavaHashCode(p), s), "%q + %q", p, s)
	}
	require.Equal(t, keyHash("T#"), KeyHash(message.JavaHashCode("T#"), ""))

	x := openT(t, vfs.NewMem(), "/i", tinyOpts(t, 64, 100))
	require.NoError(t, x.PutHash(KeyHash(message.JavaHashCode("T#"), "u1"), 100, baseTS))
	require.NoError(t, x.Put("T#u1", 200, baseTS))
	got, err := x.Query("T#u1", 10, 0, 1<<62)
	require.NoError(t, err)
	require.Equal(t, []int64{200, 100}, got)
	got, err = x.QueryHash(keyHash("T#u1"), 10, 0, 1<<62)
	require.NoError(t, err)
	require.Equal(t, []int64{200, 100}, got)
	require.ErrorIs(t, x.PutHash(1, 50, baseTS), ErrInvalid, "an offset below the last")
	require.NoError(t, x.Close())
}
