package store

import (
	"testing"

	"github.com/raftmq/raftmq/internal/vfs"
)

// BenchmarkCheckWrite is the cost the send path pays per send for the
// disk-full check: one clock read and a few atomics, and a statfs by one
// caller every 100 ms.
func BenchmarkCheckWrite(b *testing.B) {
	cfg := testConfig(b, vfs.Default())
	sa, err := OpenStandalone(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := sa.CheckWrite(1024); err != nil {
				b.Fatal(err)
			}
			sa.Store.space.avail.Add(1024) // keep the estimate from draining
		}
	})
}
