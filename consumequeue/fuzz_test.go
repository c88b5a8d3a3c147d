package consumequeue

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

func FuzzDecodeUnit(f *testing.F) {
	for _, u := range []rawUnit{{}, {phy: 1, size: 2, tags: 3}, {phy: -1, size: -1, tags: -1}, {size: blankSize}} {
		b := make([]byte, UnitSize)
		encodeUnit(b, u)
		f.Add(b)
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ok := decodeUnit(b)
		if len(b) < UnitSize {
			require.False(t, ok)
			return
		}
		require.True(t, ok)
		out := make([]byte, UnitSize)
		encodeUnit(out, u)
		require.Equal(t, b[:UnitSize], out)
		if u.valid() {
			require.False(t, u.empty())
			require.False(t, u.blank())
		}
	})
}

// FuzzOpen writes arbitrary bytes as a queue's files and opens it: it never
// panics, and an opened queue either reports a corrupt unit when read or
// reads back and accepts the next unit.
func FuzzOpen(f *testing.F) {
	const perFile = 4
	valid := func(n int64) []byte {
		b := make([]byte, n*UnitSize)
		for i := int64(0); i < n; i++ {
			u := unitAt(i, 0)
			encodeUnit(b[i*UnitSize:], rawUnit{phy: u.PhyOffset, size: u.Size, tags: u.TagsCode})
		}
		return b
	}
	f.Add(valid(3), uint8(0))
	f.Add(valid(6), uint8(perFile*UnitSize))
	f.Add(valid(8), uint8(perFile*UnitSize))
	f.Add(append(valid(2), bytes.Repeat([]byte{0xff}, 30)...), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		fs := vfs.NewMem()
		dir := "/cq/T/0"
		require.NoError(t, fs.MkdirAll(dir, 0o755))
		// Bytes [0, split) are file 0 if split > 0; the rest fill files
		// of perFile units, the last one possibly short or long.
		cut := min(int(split), len(data))
		files := [][]byte{}
		if cut > 0 {
			files = append(files, data[:cut])
		}
		for rest := data[cut:]; len(rest) > 0; {
			n := min(len(rest), perFile*UnitSize+int(split%3)) // sometimes too long
			files = append(files, rest[:n])
			rest = rest[n:]
		}
		for i, b := range files {
			f, err := fs.Create(vfs.Join(dir, fileName(int64(i)*perFile*UnitSize)))
			require.NoError(t, err)
			_, err = f.WriteAt(b, 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		q, err := OpenQueue(fs, "/cq", "T", 0, Options{UnitsPerFile: perFile})
		if err != nil {
			return
		}
		defer q.Close()
		lo, hi := q.MinOffset(), q.MaxOffset()
		require.LessOrEqual(t, lo, hi)
		units, next, err := q.Read(lo, 1000, nil)
		if err != nil {
			// Only the first and last units of complete files are
			// checked at open; the others when they are read.
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, hi, next)
		require.Len(t, units, int(hi-lo))
		for _, u := range units {
			got, err := q.Get(u.Offset)
			require.NoError(t, err)
			require.Equal(t, u, got)
		}
		phy := int64(0)
		if len(units) > 0 {
			last := units[len(units)-1]
			phy = last.PhyOffset + int64(last.Size)
		}
		if phy >= 0 {
			require.NoError(t, q.Put(hi, phy, 1, 0))
			require.NoError(t, q.Sync())
		}
		_, _ = q.DeleteBefore(phy)
		_ = q.TruncateTo(q.MinOffset())
	})
}
