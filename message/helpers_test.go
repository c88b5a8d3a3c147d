package message

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleV4 is a message with IPv4 hosts and every field set.
func sampleV4() Message {
	return Message{
		QueueID:                   3,
		Flag:                      7,
		QueueOffset:               42,
		PhysicalOffset:            1 << 33,
		SysFlag:                   SysFlagMultiTags,
		BornTimestamp:             1700000000123,
		BornHost:                  netip.MustParseAddrPort("192.168.1.10:51234"),
		StoreTimestamp:            1700000000456,
		StoreHost:                 netip.MustParseAddrPort("10.0.0.1:10911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 0,
		Body:                      []byte("hello raftmq"),
		Topic:                     "TopicTest",
		Properties: map[string]string{
			PropertyKeys:           "order-1 order-2",
			PropertyTags:           "TagA",
			PropertyUniqKey:        "C0A8010A1F9018B4AAC2",
			PropertyWaitStoreMsgOK: "true",
		},
	}
}

// sampleV6 is a message with IPv6 hosts.
func sampleV6() Message {
	return Message{
		QueueID:                   0,
		Flag:                      0,
		QueueOffset:               0,
		PhysicalOffset:            0,
		SysFlag:                   SysFlagTransactionCommit,
		BornTimestamp:             1700000001000,
		BornHost:                  netip.MustParseAddrPort("[2001:db8::1]:40000"),
		StoreTimestamp:            1700000001002,
		StoreHost:                 netip.MustParseAddrPort("[2001:db8::2]:10911"),
		ReconsumeTimes:            0,
		PreparedTransactionOffset: 4096,
		Body:                      []byte{0, 1, 2, 3, 0xFF},
		Topic:                     "%RETRY%cg-1",
		Properties: map[string]string{
			PropertyRetryTopic:    "TopicTest",
			PropertyProducerGroup: "pg",
		},
	}
}

// raw describes a record field by field, independently of Append, so tests
// can build records Append would never write (V2, bad lengths, ...).
type raw struct {
	total     int32 // 0: computed
	magic     uint32
	bodyCRC   *int32 // nil: computed
	sysFlag   int32
	bornHost  []byte // address bytes only; the port follows
	bornPort  int32
	storeHost []byte
	storePort int32
	bodyLen   *int32 // nil: len(body)
	body      []byte
	topicLen  int // -1: len(topic)
	topic     string
	propLen   int // -1: len(props)
	props     string
}

func newRaw() raw {
	return raw{
		magic: MagicV1, bornHost: []byte{127, 0, 0, 1}, bornPort: 1234,
		storeHost: []byte{10, 0, 0, 1}, storePort: 10911,
		body: []byte("body"), topicLen: -1, topic: "T", propLen: -1, props: "a\x01b\x02",
	}
}

func (r raw) bytes() []byte {
	be := binary.BigEndian
	var b []byte
	b = be.AppendUint32(b, uint32(r.total))
	b = be.AppendUint32(b, r.magic)
	crc := BodyCRC(r.body)
	if r.bodyCRC != nil {
		crc = *r.bodyCRC
	}
	b = be.AppendUint32(b, uint32(crc))
	b = be.AppendUint32(b, 1) // QUEUEID
	b = be.AppendUint32(b, 2) // FLAG
	b = be.AppendUint64(b, 3) // QUEUEOFFSET
	b = be.AppendUint64(b, 4) // PHYSICALOFFSET
	b = be.AppendUint32(b, uint32(r.sysFlag))
	b = be.AppendUint64(b, 5) // BORNTIMESTAMP
	b = append(b, r.bornHost...)
	b = be.AppendUint32(b, uint32(r.bornPort))
	b = be.AppendUint64(b, 6) // STORETIMESTAMP
	b = append(b, r.storeHost...)
	b = be.AppendUint32(b, uint32(r.storePort))
	b = be.AppendUint32(b, 7) // RECONSUMETIMES
	b = be.AppendUint64(b, 8) // PREPAREDTRANSACTIONOFFSET
	bodyLen := int32(len(r.body))
	if r.bodyLen != nil {
		bodyLen = *r.bodyLen
	}
	b = be.AppendUint32(b, uint32(bodyLen))
	b = append(b, r.body...)
	topicLen := r.topicLen
	if topicLen < 0 {
		topicLen = len(r.topic)
	}
	if r.magic == MagicV2 {
		b = be.AppendUint16(b, uint16(topicLen))
	} else {
		b = append(b, byte(topicLen))
	}
	b = append(b, r.topic...)
	propLen := r.propLen
	if propLen < 0 {
		propLen = len(r.props)
	}
	b = be.AppendUint16(b, uint16(propLen))
	b = append(b, r.props...)
	if r.total == 0 {
		be.PutUint32(b, uint32(len(b)))
	}
	return b
}

func i32(v int32) *int32 { return &v }

// encode appends m to nil and fails the test on error.
func encode(t testing.TB, m Message) []byte {
	t.Helper()
	b, err := Append(nil, &m)
	require.NoError(t, err)
	return b
}

// requireCorrupt checks that err is a *CorruptError matching ErrCorrupt.
func requireCorrupt(t testing.TB, err error, msgAndArgs ...any) *CorruptError {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt, msgAndArgs...)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce, msgAndArgs...)
	return ce
}

// normalize returns m as Decode(Append(m)) gives it back: hosts unmapped and
// without zones, SYSFLAG's IPv6 bits following the hosts, empty
// properties and body nil.
func normalize(m Message) Message {
	norm := func(h netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(h.Addr().Unmap().WithZone(""), h.Port())
	}
	m.BornHost, m.StoreHost = norm(m.BornHost), norm(m.StoreHost)
	m.SysFlag &^= SysFlagBornHostV6 | SysFlagStoreHostV6
	if m.BornHost.Addr().Is6() {
		m.SysFlag |= SysFlagBornHostV6
	}
	if m.StoreHost.Addr().Is6() {
		m.SysFlag |= SysFlagStoreHostV6
	}
	if len(m.Properties) == 0 {
		m.Properties = nil
	}
	if len(m.Body) == 0 {
		m.Body = nil
	}
	return m
}

func manyProps(n int) map[string]string {
	p := make(map[string]string, n)
	for i := range n {
		p[fmt.Sprintf("key-%04d", i)] = fmt.Sprintf("value-%d", i*i)
	}
	return p
}
