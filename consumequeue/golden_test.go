package consumequeue

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden pins the on-disk format: a queue of three units in files of
// eight units is byte-compared with testdata/golden/TopicTest/3/.
func TestGolden(t *testing.T) {
	root := t.TempDir()
	fs := vfs.Default()
	q, err := OpenQueue(fs, root, "TopicTest", 3, testOpts(t, 8))
	require.NoError(t, err)
	units := []Unit{
		{Offset: 0, PhyOffset: 0, Size: 100, TagsCode: 1},
		{Offset: 1, PhyOffset: 100, Size: 200, TagsCode: -1},
		{Offset: 2, PhyOffset: 0x0102030405060708, Size: 0x0A0B0C0D, TagsCode: 0x1112131415161718},
	}
	for _, u := range units {
		put(t, q, u)
	}
	require.NoError(t, q.Close())

	dir := filepath.Join(root, "TopicTest", "3")
	golden := filepath.Join("testdata", "golden", "TopicTest", "3")
	names, err := fs.List(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000000"}, names)
	got, err := vfs.ReadFile(fs, filepath.Join(dir, names[0]))
	require.NoError(t, err)
	// Unit 2 spelled out: big-endian phy | size | tagsCode.
	require.Equal(t, []byte{
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x0A, 0x0B, 0x0C, 0x0D,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
	}, got[2*UnitSize:3*UnitSize])
	require.Len(t, got, 8*UnitSize)
	if *update {
		require.NoError(t, fs.MkdirAll(golden, 0o755))
		require.NoError(t, vfs.WriteFileAtomic(fs, golden, names[0], got))
	}
	want, err := vfs.ReadFile(fs, filepath.Join(golden, names[0]))
	require.NoError(t, err, "run go test -run TestGolden -update to create it")
	require.Equal(t, want, got)

	// The golden file opens and reads back.
	q, err = OpenQueue(fs, filepath.Join("testdata", "golden"), "TopicTest", 3, testOpts(t, 8))
	require.NoError(t, err)
	got2, _, err := q.Read(0, 10, nil)
	require.NoError(t, err)
	require.Equal(t, units, got2)
	require.NoError(t, q.Close())
}
