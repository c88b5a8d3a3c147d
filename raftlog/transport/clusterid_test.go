package transport

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestFrameOfAnotherClusterRefused: after a handshake of the right
// cluster, a frame carrying another group's cluster ID is not delivered:
// the stream is closed, the refusal logged naming both IDs, and counted.
func TestFrameOfAnotherClusterRefused(t *testing.T) {
	b := startNode(t, 2, listen(t), nil, Config{})

	conn, err := net.Dial("tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(handshake{cluster: testCluster, from: 1, to: 2}.marshal())
	require.NoError(t, err)
	good, err := appendFrame(nil, appMsg(1, 2, 1, nil), DefaultMaxFrame, testCluster)
	require.NoError(t, err)
	_, err = conn.Write(good)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(b.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)

	// The same message, framed by a node of cluster 43.
	payload, err := proto.Marshal(appMsg(1, 2, 2, nil))
	require.NoError(t, err)
	foreign := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	foreign = binary.BigEndian.AppendUint32(foreign, crc32.Checksum(payload, castagnoli))
	foreign = binary.BigEndian.AppendUint64(foreign, testCluster+1)
	foreign = append(foreign, payload...)
	conn.Write(foreign) // may fail once refused

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "stream not closed: %v", err)
	require.Eventually(t, func() bool {
		return b.logs.contains(ErrClusterMismatch.Error()) &&
			b.logs.contains("in cluster 000000000000002b, this node in cluster 000000000000002a")
	}, time.Second, time.Millisecond, "the refusal must name both cluster IDs")
	require.Len(t, b.rec.from(1), 1, "the foreign frame was delivered")
	require.Equal(t, uint64(1), b.tr.ClusterMismatches())
}

// TestHandshakeOfAnotherClusterCounted: a whole transport of another
// cluster is refused at its handshake, logged with both IDs, counted.
func TestHandshakeOfAnotherClusterCounted(t *testing.T) {
	b := startNode(t, 2, listen(t), nil, Config{})
	a := startNode(t, 1, listen(t), map[uint64]string{2: b.addr}, Config{ClusterID: testCluster + 1,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		a.tr.Send([]*pb.Message{appMsg(1, 2, 1, nil)})
		time.Sleep(5 * time.Millisecond)
	}
	require.Empty(t, b.rec.from(1))
	require.GreaterOrEqual(t, b.tr.ClusterMismatches(), uint64(1))
	require.True(t, b.logs.contains("node 1 is in cluster 000000000000002b, this node in cluster 000000000000002a"))
}

// TestJoiningNodeLearnsClusterID: a transport that does not know its
// cluster yet dials nobody, takes the cluster ID of the first stream it
// accepts (after recording it), then talks to its peers with it and
// refuses any other.
func TestJoiningNodeLearnsClusterID(t *testing.T) {
	fast := Config{MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	la, lj := listen(t), listen(t)
	var mu sync.Mutex
	var recorded []uint64
	jcfg := fast
	jcfg.LearnClusterID = func(id uint64) error {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, id)
		return nil
	}
	j := startNode(t, 3, lj, map[uint64]string{1: la.Addr().String()}, jcfg)
	require.Zero(t, j.tr.ClusterID())
	time.Sleep(50 * time.Millisecond)
	j.tr.Send([]*pb.Message{appMsg(3, 1, 1, nil)})
	require.False(t, j.tr.Connected(1), "dialled before knowing its cluster")

	a := startNode(t, 1, la, map[uint64]string{3: j.addr}, fast)
	waitConnected(t, a.tr, 3)
	a.tr.Send([]*pb.Message{appMsg(1, 3, 1, nil)})
	require.Eventually(t, func() bool { return len(j.rec.from(1)) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(testCluster), j.tr.ClusterID())
	mu.Lock()
	require.Equal(t, []uint64{testCluster}, recorded)
	mu.Unlock()

	waitConnected(t, j.tr, 1)
	j.tr.Send([]*pb.Message{appMsg(3, 1, 7, nil)})
	require.Eventually(t, func() bool { return len(a.rec.from(3)) == 1 }, 5*time.Second, time.Millisecond)

	other := startNode(t, 4, listen(t), map[uint64]string{3: j.addr}, Config{ClusterID: testCluster + 1})
	other.tr.Send([]*pb.Message{appMsg(4, 3, 1, nil)})
	require.Eventually(t, func() bool { return j.tr.ClusterMismatches() > 0 }, 5*time.Second, time.Millisecond)
	require.Empty(t, j.rec.from(4))
}
