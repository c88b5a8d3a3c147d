// Command fsyncbench measures what one durable append costs on a disk: it
// appends -size bytes at a time to a preallocated file and fdatasyncs
// each append, as a write-ahead log does, for -duration. The latency of
// a sync is the floor under any broker that syncs before it answers
// (docs/benchmarks.md quotes it next to each comparison).
//
//	fsyncbench -dir /var/tmp -size 1024 -duration 5s
//
// It prints one line for people, starting with "fsync", and one line
// "RESULT {json}" for scripts.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	size := flag.Int("size", 1024, "bytes per append")
	duration := flag.Duration("duration", 5*time.Second, "how long to append")
	prealloc := flag.Int64("prealloc", 256<<20, "bytes allocated ahead, so a sync writes no file-size change")
	flag.Parse()
	lat, err := run(*dir, *size, *duration, *prealloc)
	if err != nil {
		log.Fatalf("fsyncbench: %v", err)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
	r := map[string]any{"system": "disk", "mode": "fsync", "msg_size": *size, "msgs": len(lat), "seconds": duration.Seconds(),
		"p50_us": q(.5), "p90_us": q(.9), "p99_us": q(.99), "max_us": q(1), "dir": *dir}
	fmt.Printf("fsync size=%d dir=%s n=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f\n",
		*size, *dir, len(lat), q(.5), q(.9), q(.99), q(1))
	b, err := json.Marshal(r)
	if err != nil {
		log.Fatalf("fsyncbench: %v", err)
	}
	fmt.Printf("RESULT %s\n", b)
}

// run appends and syncs until d has passed or the preallocated space is
// used, and returns each append's latency.
func run(dir string, size int, d time.Duration, prealloc int64) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsyncbench-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, prealloc); err != nil {
		return nil, fmt.Errorf("fallocate %s: %w", filepath.Base(f.Name()), err)
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	var lat []time.Duration
	var off int64
	for end := time.Now().Add(d); time.Now().Before(end) && off+int64(size) <= prealloc; off += int64(size) {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no append in %v", d)
	}
	return lat, nil
}
