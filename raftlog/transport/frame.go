package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Handshake layout; see the package documentation. These constants are
// part of the wire protocol and must not change without a new version.
const (
	handshakeMagic  uint32 = 0x524D5154 // "RMQT"
	protocolVersion uint16 = 2          // frames carry the cluster ID
	// protocolV1 is the first version, whose frames lack the cluster ID;
	// its streams are still accepted, from nodes not yet upgraded.
	protocolV1    uint16 = 1
	hsOffMagic           = 0
	hsOffVersion         = 4
	hsOffReserved        = 6
	hsOffCluster         = 8
	hsOffFrom            = 16
	hsOffTo              = 24
	handshakeSize        = 32
)

// Frame layout; see the package documentation.
const (
	frameOffLength    = 0
	frameOffCRC       = 4
	frameOffCluster   = 8
	frameHeaderSize   = 16
	frameHeaderSizeV1 = 8 // protocol version 1: no cluster ID
)

// maxRetainedBufSize bounds the scratch buffers kept between frames; a
// larger one (grown for a snapshot) is released after use.
const maxRetainedBufSize = 4 << 20

// readChunk is the least a payload buffer grows by while reading.
const readChunk = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors that end a stream. The transport handles them itself (the stream
// is closed, the dialer reconnects) and logs them wrapped; they are
// exported so that logs and tests can be matched with errors.Is.
var (
	// ErrBadHandshake: the stream header is not a raftmq transport
	// handshake of a supported version.
	ErrBadHandshake = errors.New("transport: bad handshake")
	// ErrClusterMismatch: the dialer, or a frame, belongs to another
	// cluster (raft group).
	ErrClusterMismatch = errors.New("transport: cluster ID mismatch")
	// ErrWrongReceiver: the dialer meant to reach another raft ID.
	ErrWrongReceiver = errors.New("transport: handshake addressed to another node")
	// ErrCorruptFrame: a frame failed its CRC or its payload is not a raft
	// message.
	ErrCorruptFrame = errors.New("transport: corrupt frame")
	// ErrFrameTooLarge: a frame's length exceeds Config.MaxFrame. When
	// sending, only that message is dropped.
	ErrFrameTooLarge = errors.New("transport: frame too large")
)

// handshake is the decoded stream header.
type handshake struct {
	version           uint16
	cluster, from, to uint64
}

func (h handshake) marshal() []byte {
	b := make([]byte, handshakeSize)
	binary.BigEndian.PutUint32(b[hsOffMagic:], handshakeMagic)
	binary.BigEndian.PutUint16(b[hsOffVersion:], protocolVersion)
	binary.BigEndian.PutUint16(b[hsOffReserved:], 0)
	binary.BigEndian.PutUint64(b[hsOffCluster:], h.cluster)
	binary.BigEndian.PutUint64(b[hsOffFrom:], h.from)
	binary.BigEndian.PutUint64(b[hsOffTo:], h.to)
	return b
}

// readHandshake reads a header and checks it against our cluster and ID;
// cluster 0 (not known yet) accepts any but 0. The returned handshake is
// valid whenever the magic and version were, so that a refusal can be
// logged with the sender's identity.
func readHandshake(r io.Reader, cluster, self uint64) (handshake, error) {
	var b [handshakeSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return handshake{}, fmt.Errorf("transport: read handshake: %w", err)
	}
	magic := binary.BigEndian.Uint32(b[hsOffMagic:])
	version := binary.BigEndian.Uint16(b[hsOffVersion:])
	reserved := binary.BigEndian.Uint16(b[hsOffReserved:])
	if magic != handshakeMagic || (version != protocolVersion && version != protocolV1) || reserved != 0 {
		return handshake{}, fmt.Errorf("%w: magic %#x version %d reserved %#x",
			ErrBadHandshake, magic, version, reserved)
	}
	h := handshake{
		version: version,
		cluster: binary.BigEndian.Uint64(b[hsOffCluster:]),
		from:    binary.BigEndian.Uint64(b[hsOffFrom:]),
		to:      binary.BigEndian.Uint64(b[hsOffTo:]),
	}
	if h.cluster == 0 || (cluster != 0 && h.cluster != cluster) {
		return h, mismatch("node "+strconv.FormatUint(h.from, 10), h.cluster, cluster)
	}
	if h.to != self {
		return h, fmt.Errorf("%w: to %d, we are %d", ErrWrongReceiver, h.to, self)
	}
	return h, nil
}

// mismatch is the ErrClusterMismatch of what (a sender or a frame) in
// cluster got, met by a node of cluster want; both IDs in hex, as the
// broker shows them.
func mismatch(what string, got, want uint64) error {
	return fmt.Errorf("%w: %s is in cluster %s, this node in cluster %s",
		ErrClusterMismatch, what, FormatClusterID(got), FormatClusterID(want))
}

// FormatClusterID writes a cluster ID as the --cluster-id flag takes it:
// 16 hex digits.
func FormatClusterID(id uint64) string { return fmt.Sprintf("%016x", id) }

// appendFrame appends m as one frame of cluster to dst. It fails, leaving
// dst's contents unchanged, if m does not marshal or exceeds maxFrame.
func appendFrame(dst []byte, m *pb.Message, maxFrame int, cluster uint64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeaderSize)...)
	out, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], fmt.Errorf("transport: marshal %s: %w", m.GetType(), err)
	}
	payload := out[start+frameHeaderSize:]
	if len(payload) > maxFrame {
		return out[:start], fmt.Errorf("%w: %s of %d bytes, limit %d",
			ErrFrameTooLarge, m.GetType(), len(payload), maxFrame)
	}
	hdr := out[start : start+frameHeaderSize]
	binary.BigEndian.PutUint32(hdr[frameOffLength:], uint32(len(payload)))
	binary.BigEndian.PutUint32(hdr[frameOffCRC:], crc32.Checksum(payload, castagnoli))
	binary.BigEndian.PutUint64(hdr[frameOffCluster:], cluster)
	return out, nil
}

// frameReader decodes frames from a stream into fresh messages, reusing
// one payload buffer. proto.Unmarshal copies bytes fields (entry data,
// snapshot data, context) out of the input unless asked to alias it, so
// messages stay valid after the buffer is reused; frame_test.go checks it.
type frameReader struct {
	r        *bufio.Reader
	buf      []byte
	maxFrame int
	// cluster is the ID every frame must carry; 0 for a stream of
	// protocol version 1, whose frames carry none.
	cluster uint64
}

// next reads one frame. io.EOF means the stream ended cleanly between
// frames; io.ErrUnexpectedEOF means it ended inside one.
func (fr *frameReader) next() (*pb.Message, error) {
	var hdr [frameHeaderSize]byte
	size := frameHeaderSize
	if fr.cluster == 0 {
		size = frameHeaderSizeV1
	}
	if _, err := io.ReadFull(fr.r, hdr[:size]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[frameOffLength:])
	sum := binary.BigEndian.Uint32(hdr[frameOffCRC:])
	if fr.cluster != 0 {
		if c := binary.BigEndian.Uint64(hdr[frameOffCluster:]); c != fr.cluster {
			return nil, mismatch("a frame", c, fr.cluster)
		}
	}
	if uint64(n) > uint64(fr.maxFrame) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, fr.maxFrame)
	}
	defer fr.release()
	payload, err := fr.readPayload(int(n))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if got := crc32.Checksum(payload, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: CRC %#08x, header says %#08x", ErrCorruptFrame, got, sum)
	}
	m := new(pb.Message)
	if err := proto.Unmarshal(payload, m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptFrame, err)
	}
	return m, nil
}

// readPayload reads n bytes into the scratch buffer. A buffer too small
// grows by doubling as data actually arrives, so a corrupt length field
// cannot make us allocate MaxFrame bytes up front.
func (fr *frameReader) readPayload(n int) ([]byte, error) {
	buf := fr.buf[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), max(cap(buf)-len(buf), len(buf), readChunk))
		buf = slices.Grow(buf, chunk)
		got, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+got]
		if err != nil {
			fr.buf = buf
			return nil, err
		}
	}
	fr.buf = buf
	return buf, nil
}

// release drops a scratch buffer grown for one huge frame (a snapshot), so
// an idle stream does not pin it.
func (fr *frameReader) release() {
	if cap(fr.buf) > maxRetainedBufSize {
		fr.buf = nil
	}
}
