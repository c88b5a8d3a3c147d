package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A snapshot being installed is kept in raft/snapshot.pending until the
// install completes:
//
//	| off | size | field                                |
//	|   0 |    4 | magic 0x524D5346 ("RMSF")            |
//	|   4 |    n | raftpb.Snapshot, protobuf            |
//	| 4+n |    4 | CRC-32C of bytes 0 .. 4+n-1          |
const snapFileMagic uint32 = 0x524D5346

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadSnapFile is returned for a pending snapshot file that does not decode.
var errBadSnapFile = errors.New("cluster: pending snapshot file corrupt")

func encodeSnapFile(s *pb.Snapshot) []byte {
	b := binary.BigEndian.AppendUint32(nil, snapFileMagic)
	b, _ = proto.MarshalOptions{}.MarshalAppend(b, s)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeSnapFile(b []byte) (*pb.Snapshot, error) {
	if len(b) < 8 || binary.BigEndian.Uint32(b) != snapFileMagic {
		return nil, fmt.Errorf("%w: bad magic", errBadSnapFile)
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadSnapFile)
	}
	var s pb.Snapshot
	if err := proto.Unmarshal(b[4:end], &s); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadSnapFile, err)
	}
	return &s, nil
}
