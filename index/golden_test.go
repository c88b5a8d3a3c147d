package index

import (
	"encoding/binary"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite testdata/ golden files")

const goldenPath = "testdata/slots8-entries16.golden"

// goldenOps are the five puts of the golden file. "T#Aa" and "T#BB" share a
// Java hash, so they share a slot and a chain.
var goldenOps = []op{
	{"TopicTest#order-1", 0, baseTS},
	{"T#Aa", 212, baseTS + 1500},
	{"TopicTest#order-2", 430, baseTS + 2999},
	{"T#BB", 430, baseTS + 4000},
	{"TopicTest#order-1", 1024, baseTS + 7777},
}

// TestGolden byte-compares a tiny index with testdata/. Regenerate with
// go test ./index/ -run TestGolden -update, and review the diff.
func TestGolden(t *testing.T) {
	fs := vfs.NewMem()
	x := openT(t, fs, "/i", tinyOpts(t, 8, 16))
	putAll(t, x, goldenOps)
	require.NoError(t, x.Close())
	files := snapshot(t, fs, "/i")
	require.Len(t, files, 1)
	got := files[fileName(baseTS)]
	require.Len(t, got, 40+8*4+16*20)

	if *update {
		require.NoError(t, vfs.WriteFileAtomic(vfs.Default(), "testdata", "slots8-entries16.golden", got))
	}
	want, err := vfs.ReadFile(vfs.Default(), goldenPath)
	require.NoError(t, err)
	require.Equal(t, want, got, "run with -update to accept the new bytes")
}

// TestGoldenLayout decodes the golden file by the documented offsets, with
// no help from the package, so the golden bytes are checked against the
// format and not only against themselves.
func TestGoldenLayout(t *testing.T) {
	b, err := vfs.ReadFile(vfs.Default(), goldenPath)
	require.NoError(t, err)
	require.Len(t, b, 40+8*4+16*20)
	be64 := func(off int) int64 { return int64(binary.BigEndian.Uint64(b[off:])) }
	be32 := func(off int) int32 { return int32(binary.BigEndian.Uint32(b[off:])) }

	require.Equal(t, baseTS, be64(0), "beginTimestamp")
	require.Equal(t, baseTS+7777, be64(8), "endTimestamp")
	require.Equal(t, int64(0), be64(16), "beginPhyOffset")
	require.Equal(t, int64(1024), be64(24), "endPhyOffset")

	hashes := map[string]int32{}
	for _, o := range goldenOps {
		h := int32(0)
		for _, c := range []byte(o.key) { // Java's String.hashCode for ASCII
			h = 31*h + int32(c)
		}
		if h < 0 {
			h = -h
		}
		hashes[o.key] = h
	}
	require.Equal(t, hashes["T#Aa"], hashes["T#BB"])
	slots := map[int32]bool{}
	for _, h := range hashes {
		slots[h%8] = true
	}
	require.Equal(t, int32(len(slots)), be32(32), "hashSlotCount")
	require.Equal(t, int32(6), be32(36), "indexCount")

	// Newest entry of each slot; 0 elsewhere.
	wantSlot := make([]int32, 8)
	wantPrev := make([]int32, 6)
	for i, o := range goldenOps {
		s := hashes[o.key] % 8
		wantPrev[i+1] = wantSlot[s]
		wantSlot[s] = int32(i + 1)
	}
	for s := range 8 {
		require.Equal(t, wantSlot[s], readRawSlot(b, s), "slot %d", s)
	}
	wantDiff := []int32{0, 1, 2, 4, 7} // whole seconds after baseTS
	require.Equal(t, rawEntry{}, readRawEntry(b, 8, 0), "entry 0 is never used")
	for i, o := range goldenOps {
		require.Equal(t, rawEntry{hash: hashes[o.key], phy: o.phy, timeDiff: wantDiff[i], prev: wantPrev[i+1]},
			readRawEntry(b, 8, i+1), "entry %d", i+1)
	}
	for i := 6; i < 16; i++ {
		require.Equal(t, rawEntry{}, readRawEntry(b, 8, i), "entry %d", i)
	}
}
