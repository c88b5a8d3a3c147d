package message

import (
	"fmt"
	"testing"
)

var benchSizes = []int{1 << 10, 64 << 10}

func benchMessage(size int) Message {
	m := sampleV4()
	m.Body = make([]byte, size)
	for i := range m.Body {
		m.Body[i] = byte(i)
	}
	return m
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			m := benchMessage(size)
			buf := encode(b, m)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = Append(buf[:0], &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			rec := encode(b, benchMessage(size))
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Decode(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, size := range benchSizes {
		for _, crc := range []bool{false, true} {
			b.Run(fmt.Sprintf("body=%d/crc=%t", size, crc), func(b *testing.B) {
				rec := encode(b, benchMessage(size))
				b.SetBytes(int64(len(rec)))
				b.ReportAllocs()
				for b.Loop() {
					v, err := Parse(rec, crc)
					if err != nil {
						b.Fatal(err)
					}
					if _, ok := PropertyBytes(v.Properties, PropertyTags); !ok {
						b.Fatal("no TAGS")
					}
				}
			})
		}
	}
}
