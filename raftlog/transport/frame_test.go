package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func testEntries(n, size int, seed byte) []*pb.Entry {
	ents := make([]*pb.Entry, n)
	for i := range ents {
		data := bytes.Repeat([]byte{seed + byte(i)}, size)
		ents[i] = &pb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(uint64(i + 1)), Data: data}
	}
	return ents
}

func newReader(b []byte, maxFrame int) *frameReader {
	return &frameReader{r: bufio.NewReader(bytes.NewReader(b)), maxFrame: maxFrame, cluster: testCluster}
}

func TestFrameRoundTrip(t *testing.T) {
	msgs := []*pb.Message{
		{Type: pb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(3)},
		{Type: pb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), Entries: testEntries(4, 100, 'a')},
		{}, // an empty message is a zero-length payload
	}
	var stream []byte
	for _, m := range msgs {
		var err error
		stream, err = appendFrame(stream, m, DefaultMaxFrame, testCluster)
		require.NoError(t, err)
	}
	fr := newReader(stream, DefaultMaxFrame)
	for _, want := range msgs {
		got, err := fr.next()
		require.NoError(t, err)
		require.True(t, proto.Equal(want, got), "got %v want %v", got, want)
	}
	_, err := fr.next()
	require.ErrorIs(t, err, io.EOF)
}

// TestFrameUnmarshalDoesNotAlias checks that proto.Unmarshal copies bytes
// fields: the reader reuses its payload buffer for the next frame.
func TestFrameUnmarshalDoesNotAlias(t *testing.T) {
	m := &pb.Message{
		Type:     pb.MessageType_MsgSnap.Enum(),
		Entries:  testEntries(3, 64, 'x'),
		Context:  []byte("ctx"),
		Snapshot: &pb.Snapshot{Data: []byte("snapshot data")},
	}
	frame, err := appendFrame(nil, m, DefaultMaxFrame, testCluster)
	require.NoError(t, err)
	fr := newReader(frame, DefaultMaxFrame)
	got, err := fr.next()
	require.NoError(t, err)
	buf := fr.buf[:cap(fr.buf)]
	for i := range buf {
		buf[i] = 0xEE
	}
	require.True(t, proto.Equal(m, got), "message changed when the read buffer was overwritten")
}

func TestFrameCorruption(t *testing.T) {
	m := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), Entries: testEntries(2, 32, 'q')}
	good, err := appendFrame(nil, m, DefaultMaxFrame, testCluster)
	require.NoError(t, err)
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	garbage := []byte{0xff, 0xff, 0xff}
	garbageFrame := binary.BigEndian.AppendUint32(nil, uint32(len(garbage)))
	garbageFrame = binary.BigEndian.AppendUint32(garbageFrame, crc32.Checksum(garbage, castagnoli))
	garbageFrame = binary.BigEndian.AppendUint64(garbageFrame, testCluster)
	garbageFrame = append(garbageFrame, garbage...)

	for _, tc := range []struct {
		name     string
		frame    []byte
		maxFrame int
		want     error
	}{
		{"payload bit flip", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), DefaultMaxFrame, ErrCorruptFrame},
		{"crc bit flip", mutate(func(b []byte) []byte { b[frameOffCRC] ^= 0x80; return b }), DefaultMaxFrame, ErrCorruptFrame},
		{"length too large", mutate(func(b []byte) []byte { b[frameOffLength] = 0x7f; return b }), DefaultMaxFrame, ErrFrameTooLarge},
		{"over max frame", good, len(good) - frameHeaderSize - 1, ErrFrameTooLarge},
		{"truncated payload", good[:len(good)-1], DefaultMaxFrame, io.ErrUnexpectedEOF},
		{"truncated header", good[:frameHeaderSize-1], DefaultMaxFrame, io.ErrUnexpectedEOF},
		{"valid crc, not protobuf", garbageFrame, DefaultMaxFrame, ErrCorruptFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newReader(tc.frame, tc.maxFrame).next()
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestAppendFrameTooLarge(t *testing.T) {
	m := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), Entries: testEntries(1, 100, 'z')}
	prefix := []byte("keep")
	out, err := appendFrame(prefix, m, 50, testCluster)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Equal(t, "keep", string(out))
}

func TestHandshake(t *testing.T) {
	const cluster, self = 7, 2
	good := handshake{cluster: cluster, from: 1, to: self}.marshal()
	h, err := readHandshake(bytes.NewReader(good), cluster, self)
	require.NoError(t, err)
	require.Equal(t, handshake{version: protocolVersion, cluster: cluster, from: 1, to: self}, h)

	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"bad magic", func() []byte { b := bytes.Clone(good); b[hsOffMagic] = 'X'; return b }(), ErrBadHandshake},
		{"bad version", func() []byte { b := bytes.Clone(good); b[hsOffVersion+1] = 9; return b }(), ErrBadHandshake},
		{"reserved set", func() []byte { b := bytes.Clone(good); b[hsOffReserved] = 1; return b }(), ErrBadHandshake},
		{"other cluster", handshake{cluster: cluster + 1, from: 1, to: self}.marshal(), ErrClusterMismatch},
		{"other receiver", handshake{cluster: cluster, from: 1, to: self + 1}.marshal(), ErrWrongReceiver},
		{"short", good[:handshakeSize-1], io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readHandshake(bytes.NewReader(tc.b), cluster, self)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// FuzzFrameReader: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to a frame that decodes to the same message.
func FuzzFrameReader(f *testing.F) {
	for _, m := range []*pb.Message{
		{},
		{Type: pb.MessageType_MsgApp.Enum(), Entries: testEntries(2, 8, 'f')},
		{Type: pb.MessageType_MsgSnap.Enum(), Snapshot: &pb.Snapshot{Data: []byte("s")}},
	} {
		frame, err := appendFrame(nil, m, DefaultMaxFrame, testCluster)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
		f.Add(frame[:len(frame)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newReader(b, 1<<20)
		for {
			m, err := fr.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrCorruptFrame) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("unexpected error class: %v", err)
				}
				return
			}
			again, err := appendFrame(nil, m, 1<<20, testCluster)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := newReader(again, 1<<20).next()
			if err != nil || !proto.Equal(m, m2) {
				t.Fatalf("re-encoding changed the message: %v vs %v (%v)", m, m2, err)
			}
		}
	})
}

// TestFrameLengthDoesNotPreallocate: a frame claiming a huge (but allowed)
// length that then ends must not have allocated that length.
func TestFrameLengthDoesNotPreallocate(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, 400<<20)
	frame = binary.BigEndian.AppendUint32(frame, 0)
	frame = append(frame, "short"...)
	fr := newReader(frame, DefaultMaxFrame)
	_, err := fr.next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.LessOrEqual(t, cap(fr.buf), 2*readChunk)
}
