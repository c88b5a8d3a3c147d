package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// LimitsConfig configures a measurement of the machine's limits
// (MeasureLimits): what one durable append, the disk's synced sequential
// bandwidth and a loopback round trip cost here, the floors under any
// broker that fsyncs on a quorum before it answers.
type LimitsConfig struct {
	// Dir is a directory on the file system to measure: the brokers'
	// data directory's. Each probe writes one temporary file there and
	// removes it.
	Dir string
	// Duration is how long each of the three probes runs.
	Duration time.Duration
	// SyncSize is the bytes of each append of the latency probe
	// (default 4096), SeqSize those of each write of the bandwidth probe
	// (default 1 MiB), RTTSize those of each request of the round-trip
	// probe (default 1024; the answer is 64 bytes).
	SyncSize, SeqSize, RTTSize int
	// SeqMax caps the bytes the bandwidth probe writes (default 1 GiB).
	SeqMax int64
	// Echo, if set, starts the far end of the round-trip probe, a
	// server at addr that answers every RTTSize-byte request with 64
	// bytes (ServeEcho), and returns a func that stops it. The
	// command runs it as a process of its own, as the brokers are;
	// nil: a goroutine of this process.
	Echo func(rttSize int) (addr string, stop func() error, err error)
	// Replicas share the disk (default 3: the local group); MsgBytes is
	// what one message writes to each replica's log (default 1024, the
	// benchmarks' body size).
	Replicas, MsgBytes int
}

// Limits is what MeasureLimits measured and the floors it derives.
type Limits struct {
	Dir     string  `json:"dir"`
	Seconds float64 `json:"seconds"` // each probe's duration
	// The latency probe: SyncSize-byte writes, each followed by
	// fdatasync, into a file zero-filled and synced first (as the
	// commitlog's warm-ahead leaves its segment), in microseconds.
	SyncSize  int     `json:"syncSize"`
	Syncs     int     `json:"syncs"`
	SyncP50us float64 `json:"syncP50us"`
	SyncP99us float64 `json:"syncP99us"`
	// The bandwidth probe: SeqSize-byte appends to a new file, each
	// followed by fdatasync, in MB/s (10^6 bytes).
	SeqSize   int     `json:"seqSize"`
	SeqWrites int     `json:"seqWrites"`
	SeqMBps   float64 `json:"seqMBps"`
	// The round-trip probe: an RTTSize-byte request and a 64-byte answer
	// over a loopback TCP connection, one at a time, in microseconds.
	RTTSize  int     `json:"rttSize"`
	RTTPeer  string  `json:"rttPeer"` // "process" or "goroutine"
	RTTs     int     `json:"rtts"`
	RTTP50us float64 `json:"rttP50us"`
	RTTP99us float64 `json:"rttP99us"`
	// Floors. OneAtATimeFloorMs is one fdatasync plus two loopback round
	// trips (client to leader, leader to a follower and back): the least
	// a send acknowledged after a quorum's fsync can take, at the
	// probes' p50. PipelinedMBps is the disk's synced bandwidth shared by
	// the Replicas that write every byte; PipelinedMsgs the same in
	// messages of MsgBytes.
	Replicas          int     `json:"replicas"`
	MsgBytes          int     `json:"msgBytes"`
	OneAtATimeFloorMs float64 `json:"oneAtATimeFloorMs"`
	PipelinedMBps     float64 `json:"pipelinedMBps"`
	PipelinedMsgs     float64 `json:"pipelinedMsgsPerSec"`
}

func (c *LimitsConfig) defaults() error {
	if c.Dir == "" {
		c.Dir = "."
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.SyncSize == 0 {
		c.SyncSize = 4096
	}
	if c.SeqSize == 0 {
		c.SeqSize = 1 << 20
	}
	if c.RTTSize == 0 {
		c.RTTSize = 1024
	}
	if c.SeqMax == 0 {
		c.SeqMax = 1 << 30
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.MsgBytes == 0 {
		c.MsgBytes = 1024
	}
	switch {
	case c.SyncSize < 0 || c.SeqSize < 0 || c.RTTSize < 0 || c.SeqMax < 0:
		return errors.New("limits: sizes must be positive")
	case c.Replicas < 0 || c.MsgBytes < 0:
		return errors.New("limits: replicas and message bytes must be positive")
	case c.SeqMax < int64(c.SeqSize):
		return fmt.Errorf("limits: the bandwidth probe's cap (%d bytes) is below one write (%d)", c.SeqMax, c.SeqSize)
	}
	return nil
}

// MeasureLimits runs the three probes one after the other.
func MeasureLimits(ctx context.Context, cfg LimitsConfig) (Limits, error) {
	if err := cfg.defaults(); err != nil {
		return Limits{}, err
	}
	l := Limits{Dir: cfg.Dir, Seconds: cfg.Duration.Seconds(), SyncSize: cfg.SyncSize, SeqSize: cfg.SeqSize,
		RTTSize: cfg.RTTSize, Replicas: cfg.Replicas, MsgBytes: cfg.MsgBytes}
	lat, err := syncProbe(ctx, cfg)
	if err != nil {
		return l, fmt.Errorf("limits: fdatasync probe in %s: %w", cfg.Dir, err)
	}
	l.Syncs, l.SyncP50us, l.SyncP99us = len(lat), quantile(lat, 0.5)*1000, quantile(lat, 0.99)*1000
	writes, took, err := seqProbe(ctx, cfg)
	if err != nil {
		return l, fmt.Errorf("limits: bandwidth probe in %s: %w", cfg.Dir, err)
	}
	l.SeqWrites, l.SeqMBps = writes, float64(writes)*float64(cfg.SeqSize)/took.Seconds()/1e6
	rtt, err := rttProbe(ctx, cfg)
	if err != nil {
		return l, fmt.Errorf("limits: loopback probe: %w", err)
	}
	l.RTTs, l.RTTP50us, l.RTTP99us = len(rtt), quantile(rtt, 0.5)*1000, quantile(rtt, 0.99)*1000
	l.RTTPeer = "goroutine"
	if cfg.Echo != nil {
		l.RTTPeer = "process"
	}
	l.derive()
	return l, nil
}

// derive computes the floors from the probes' figures.
func (l *Limits) derive() {
	l.OneAtATimeFloorMs = (l.SyncP50us + 2*l.RTTP50us) / 1000
	if l.Replicas > 0 {
		l.PipelinedMBps = l.SeqMBps / float64(l.Replicas)
	}
	if l.MsgBytes > 0 {
		l.PipelinedMsgs = l.PipelinedMBps * 1e6 / float64(l.MsgBytes)
	}
}

// String is the measurement for people, one probe a line, then the floors.
func (l Limits) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fdatasync: %d B appends in %s: p50 %.0f µs, p99 %.0f µs (%d in %.1f s)\n",
		l.SyncSize, l.Dir, l.SyncP50us, l.SyncP99us, l.Syncs, l.Seconds)
	fmt.Fprintf(&b, "sequential write + fdatasync: %d KiB writes: %.1f MB/s (%d writes)\n", l.SeqSize>>10, l.SeqMBps, l.SeqWrites)
	fmt.Fprintf(&b, "loopback TCP round trip to another %s: %d B request, 64 B answer: p50 %.0f µs, p99 %.0f µs (%d)\n",
		l.RTTPeer, l.RTTSize, l.RTTP50us, l.RTTP99us, l.RTTs)
	fmt.Fprintf(&b, "floor of one send at a time (fdatasync p50 + 2 round trips p50): %.3f ms\n", l.OneAtATimeFloorMs)
	fmt.Fprintf(&b, "ceiling of pipelined sends (bandwidth / %d replicas on one disk): %.1f MB/s, %.1f k msgs/s of %d B",
		l.Replicas, l.PipelinedMBps, l.PipelinedMsgs/1000, l.MsgBytes)
	return b.String()
}

// Against states a run of `raftmq bench produce` as a fraction of the limit
// it is bound by: a run one send at a time (window 1, no batches) by the
// floor under its p50 (floor / p50: 1 is at the floor), any other run by
// the disk's bandwidth shared by the replicas (its MB/s / the ceiling).
func (l Limits) Against(r Result) string {
	settings := fmt.Sprintf("window %d", r.Window)
	if r.Batch > 1 {
		settings += fmt.Sprintf(", batches of %d", r.Batch)
	}
	if r.AutoBatch {
		settings += ", auto-batch"
	}
	if r.Window <= 1 && r.Batch <= 1 {
		if r.P50 <= 0 || l.OneAtATimeFloorMs <= 0 {
			return fmt.Sprintf("%s: no p50 or no floor to compare", settings)
		}
		return fmt.Sprintf("%s: p50 %.3f ms against a floor of %.3f ms: %.2f of the limit (%.1fx the floor)",
			settings, r.P50, l.OneAtATimeFloorMs, l.OneAtATimeFloorMs/r.P50, r.P50/l.OneAtATimeFloorMs)
	}
	if r.MBPerSec <= 0 || l.PipelinedMBps <= 0 {
		return fmt.Sprintf("%s: no rate or no ceiling to compare", settings)
	}
	return fmt.Sprintf("%s: %.1f k msgs/s, %.1f MB/s against a ceiling of %.1f MB/s (%.1f k msgs/s of %d B): %.2f of the limit",
		settings, r.MsgsPerSec/1000, r.MBPerSec, l.PipelinedMBps, l.PipelinedMsgs/1000, l.MsgBytes, r.MBPerSec/l.PipelinedMBps)
}

// ReadLimits reads a measurement that `raftmq bench limits --json` wrote
// (the last JSON line of r) and derives its floors again, for replicas
// and message bytes given (0: as measured).
func ReadLimits(r io.Reader, replicas, msgBytes int) (Limits, error) {
	var l Limits
	found := false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var x Limits
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			return l, fmt.Errorf("limits: line %d: %w", n, err)
		}
		l, found = x, true
	}
	if err := sc.Err(); err != nil {
		return l, err
	}
	if !found {
		return l, errors.New("limits: no JSON line of a measurement")
	}
	if l.Syncs == 0 || l.SeqWrites == 0 || l.RTTs == 0 {
		return l, fmt.Errorf("limits: the measurement lacks a probe (syncs %d, writes %d, round trips %d)", l.Syncs, l.SeqWrites, l.RTTs)
	}
	if replicas > 0 {
		l.Replicas = replicas
	}
	if msgBytes > 0 {
		l.MsgBytes = msgBytes
	}
	l.derive()
	return l, nil
}

// ReadResults reads the JSON lines `raftmq bench produce --json` printed;
// other lines (progress, logs) are skipped.
func ReadResults(r io.Reader) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var x Result
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			return nil, fmt.Errorf("results: line %d: %w", n, err)
		}
		if x.Mode == "" || x.Messages == 0 {
			return nil, fmt.Errorf("results: line %d is not a produce run's result", n)
		}
		rs = append(rs, x)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errors.New("results: no JSON line of a run")
	}
	return rs, nil
}

// syncProbe zero-fills and syncs a file of 64 MiB, then writes
// SyncSize bytes at a time through it (wrapping at its end) with an
// fdatasync after each, for Duration.
func syncProbe(ctx context.Context, cfg LimitsConfig) ([]time.Duration, error) {
	f, err := os.CreateTemp(cfg.Dir, "raftmq-limits-sync-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const area = 64 << 20
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < area; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros, off); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	buf := make([]byte, cfg.SyncSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	var lat []time.Duration
	var off int64
	for end := time.Now().Add(cfg.Duration); time.Now().Before(end) && ctx.Err() == nil; off += int64(len(buf)) {
		if off+int64(len(buf)) > area {
			off = 0
		}
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, fmt.Errorf("fdatasync: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no append in %v", cfg.Duration)
	}
	slices.Sort(lat)
	return lat, nil
}

// seqProbe appends SeqSize bytes at a time to a new file with an
// fdatasync after each, for Duration or until SeqMax bytes, and returns
// the writes and the time they took.
func seqProbe(ctx context.Context, cfg LimitsConfig) (int, time.Duration, error) {
	f, err := os.CreateTemp(cfg.Dir, "raftmq-limits-seq-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, cfg.SeqSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	writes := 0
	start := time.Now()
	end := start.Add(cfg.Duration)
	for off := int64(0); time.Now().Before(end) && off+int64(len(buf)) <= cfg.SeqMax && ctx.Err() == nil; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, fmt.Errorf("fdatasync: %w", err)
		}
		writes++
	}
	took := time.Since(start)
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if writes == 0 {
		return 0, 0, fmt.Errorf("no write in %v", cfg.Duration)
	}
	return writes, took, nil
}

// ServeEcho accepts one connection on ln and answers every
// rttSize-byte request on it with 64 bytes until the peer closes it: the
// far end of the round-trip probe.
func ServeEcho(ln net.Listener, rttSize int) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	req, ans := make([]byte, rttSize), make([]byte, 64)
	for {
		if _, err := io.ReadFull(c, req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := c.Write(ans); err != nil {
			return err
		}
	}
}

// echoGoroutine is the round-trip probe's far end in this process.
func echoGoroutine(rttSize int) (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	served := make(chan error, 1)
	go func() { served <- ServeEcho(ln, rttSize) }()
	return ln.Addr().String(), func() error {
		ln.Close()
		return <-served
	}, nil
}

// rttProbe sends RTTSize-byte requests over a loopback TCP connection to
// the echo server (cfg.Echo's, or a goroutine's), one at a time, for
// Duration.
func rttProbe(ctx context.Context, cfg LimitsConfig) ([]time.Duration, error) {
	echo := cfg.Echo
	if echo == nil {
		echo = echoGoroutine
	}
	addr, stop, err := echo(cfg.RTTSize)
	if err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	lat, err := roundTrips(ctx, addr, cfg)
	if serr := stop(); serr != nil && err == nil {
		err = fmt.Errorf("echo: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(lat)
	return lat, nil
}

func roundTrips(ctx context.Context, addr string, cfg LimitsConfig) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req, ans := make([]byte, cfg.RTTSize), make([]byte, 64)
	var lat []time.Duration
	for end := time.Now().Add(cfg.Duration); time.Now().Before(end) && ctx.Err() == nil; {
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, ans); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("no round trip in %v", cfg.Duration)
	}
	return lat, nil
}
