package raftlog

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/internal/vfs"
)

// The cluster ID is recorded once, survives a crash, and a state file
// never takes another group's ID.
func TestStorageClusterID(t *testing.T) {
	fs := vfs.NewMem()
	s, l := openStorage(t, fs)
	require.False(t, s.HasState(), "a new node has no state")
	require.Zero(t, s.ClusterID())
	require.NoError(t, s.SetClusterID(0xa1))
	require.NoError(t, s.SetClusterID(0xa1), "the same ID again is fine")
	err := s.SetClusterID(0xb2)
	require.ErrorIs(t, err, ErrClusterMismatch)
	require.ErrorContains(t, err, "00000000000000a1")
	require.ErrorContains(t, err, "00000000000000b2")
	require.NoError(t, s.SetHardState(hardState(2, 1, 0)))

	crashed := fs.CrashClone(nil, 0)
	s.Close()
	l.Close()
	s2, l2 := openStorage(t, crashed)
	defer l2.Close()
	defer s2.Close()
	require.True(t, s2.HasState())
	require.Equal(t, uint64(0xa1), s2.ClusterID())
	hs, _, err := s2.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(hardState(2, 1, 0), hs), "got %v", hs)
	require.ErrorIs(t, s2.SetClusterID(0xb2), ErrClusterMismatch)
}

// A state file written before the cluster ID (magic "RMQR", no ID field)
// is read as it was, with no ID; the next write is of the current version
// and carries the ID recorded.
func TestStorageReadsFirstVersion(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/n", 0o755))
	f, err := fs.OpenReadWrite("/n/" + stateName)
	require.NoError(t, err)
	_, err = f.WriteAt(stateV1(t, 3, hardState(7, 2, 5), &pb.ConfState{Voters: []uint64{1, 2, 3}}), 3%2*stSlot)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	s, l := openStorage(t, fs)
	require.True(t, s.HasState())
	require.Zero(t, s.ClusterID())
	hs, cs, err := s.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(hardState(7, 2, 5), hs), "got %v", hs)
	require.Equal(t, []uint64{1, 2, 3}, cs.Voters)
	require.NoError(t, s.SetClusterID(0xc3))
	s.Close()
	l.Close()

	s2, l2 := openStorage(t, fs)
	defer l2.Close()
	defer s2.Close()
	require.Equal(t, uint64(0xc3), s2.ClusterID())
	hs, _, _ = s2.InitialState()
	require.Equal(t, uint64(7), hs.GetTerm())
}

// stateV1 encodes a slot in the first version of the format.
func stateV1(t *testing.T, seq uint64, hs *pb.HardState, cs *pb.ConfState) []byte {
	h, err := proto.Marshal(hs)
	require.NoError(t, err)
	c, err := proto.Marshal(cs)
	require.NoError(t, err)
	n := 4 + len(h) + len(c)
	b := make([]byte, 32+n+4)
	binary.BigEndian.PutUint32(b[0:], stateMagicV1)
	binary.BigEndian.PutUint32(b[4:], uint32(n))
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint32(b[32:], uint32(len(h)))
	copy(b[36:], h)
	copy(b[36+len(h):], c)
	binary.BigEndian.PutUint32(b[32+n:], crc32.Checksum(b[:32+n], castagnoli))
	return b
}
