package index

import (
	"fmt"
	"math"
	"testing"
)

// benchOpts keep files small enough for MemFS while still rolling rarely.
var benchOpts = Options{SlotCount: 1 << 16, MaxEntries: 1 << 20}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("TopicTest#UNIQ-%016x", i*2654435761)
	}
	return keys
}

func BenchmarkPut(b *testing.B) {
	keys := benchKeys(1 << 16)
	for _, c := range fileSystems() {
		b.Run(c.name, func(b *testing.B) {
			fs, dir := c.new(b)
			x, err := Open(fs, dir, benchOpts)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			b.SetBytes(entrySize)
			for i := 0; b.Loop(); i++ {
				if err := x.Put(keys[i%len(keys)], int64(i)*200, baseTS+int64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkQuery(b *testing.B) {
	keys := benchKeys(1 << 16)
	const entries = 1 << 18 // 4 entries per key, chains of about 4
	for _, c := range fileSystems() {
		b.Run(c.name, func(b *testing.B) {
			fs, dir := c.new(b)
			x, err := Open(fs, dir, benchOpts)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			for i := range entries {
				if err := x.Put(keys[i%len(keys)], int64(i)*200, baseTS+int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(entrySize)
			for i := 0; b.Loop(); i++ {
				got, err := x.Query(keys[i%len(keys)], 64, 0, math.MaxInt64)
				if err != nil || len(got) != entries/len(keys) {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}
