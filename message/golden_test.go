package message

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden pins the exact bytes of records with fixed field values. A
// difference is a change of the on-disk format. Regenerate with
// go test -run TestGolden -update, only for an intended change.
func TestGolden(t *testing.T) {
	for name, m := range map[string]Message{"ipv4.bin": sampleV4(), "ipv6.bin": sampleV6()} {
		t.Run(name, func(t *testing.T) {
			got := encode(t, m)
			path := filepath.Join("testdata", name)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -run TestGolden -update to create it")
			require.Equal(t, want, got)

			dec, n, err := Decode(want)
			require.NoError(t, err)
			require.Equal(t, len(want), n)
			require.Equal(t, normalize(m), dec)
		})
	}
}

// TestGoldenHandChecked spells out the IPv4 golden record so that the file
// itself is checked against the layout, not only against Append.
func TestGoldenHandChecked(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "ipv4.bin"))
	require.NoError(t, err)
	props := "KEYS\x01order-1 order-2\x02TAGS\x01TagA\x02UNIQ_KEY\x01C0A8010A1F9018B4AAC2\x02WAIT\x01true\x02"
	total := FixedSizeV4 + len("hello raftmq") + len("TopicTest") + len(props)
	r := []byte{
		0, 0, byte(total >> 8), byte(total), // TOTALSIZE
		0xDA, 0xA3, 0x20, 0xA7, // MAGICCODE V1
	}
	crc := BodyCRC([]byte("hello raftmq"))
	r = append(r, byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)) // BODYCRC
	r = append(r,
		0, 0, 0, 3, // QUEUEID
		0, 0, 0, 7, // FLAG
		0, 0, 0, 0, 0, 0, 0, 42, // QUEUEOFFSET
		0, 0, 0, 2, 0, 0, 0, 0, // PHYSICALOFFSET 1<<33
		0, 0, 0, 2, // SYSFLAG multi tags
		0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B, // BORNTIMESTAMP 1700000000123
		192, 168, 1, 10, 0, 0, 0xC8, 0x22, // BORNHOST 192.168.1.10:51234
		0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x69, 0xC8, // STORETIMESTAMP 1700000000456
		10, 0, 0, 1, 0, 0, 0x2A, 0x9F, // STOREHOST 10.0.0.1:10911
		0, 0, 0, 2, // RECONSUMETIMES
		0, 0, 0, 0, 0, 0, 0, 0, // PREPAREDTRANSACTIONOFFSET
		0, 0, 0, 12, // BODYLEN
	)
	r = append(r, "hello raftmq"...)
	r = append(r, 9)
	r = append(r, "TopicTest"...)
	r = append(r, byte(len(props)>>8), byte(len(props)))
	r = append(r, props...)
	require.Equal(t, want, r)
}
