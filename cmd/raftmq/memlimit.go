package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// The broker's soft memory limit (--memory-limit). The broker collects
// garbage at GOGC=400 (tuneGC), so without a limit a burst of garbage (a
// flood of connections and requests) lets the heap grow to five times
// its live size before the collector runs. runtime/debug.SetMemoryLimit
// makes the collector run earlier as the process nears the limit; it is a
// soft limit, not a cap: a live heap above it is not freed, and the
// runtime bounds the collector's CPU at about half the processor then.
const (
	// minMemoryLimit and maxMemoryLimit bound an explicit --memory-limit.
	// Below 64 MiB a broker would spend its time collecting.
	minMemoryLimit = 64 << 20
	maxMemoryLimit = 1 << 50 // 1 PiB
	// cgroupMemoryShare is the share of the cgroup's memory limit that
	// "auto" gives the Go runtime; the rest is for what the runtime does
	// not count (thread stacks outside Go, cgo) and for headroom.
	cgroupMemoryShare = 0.9
)

// memoryLimitUsage is the --memory-limit flag's help.
const memoryLimitUsage = "soft limit on the Go runtime's memory (heap, stacks), so that garbage collection runs " +
	"before a burst (a connection flood) grows the process: a size from 64MiB to 1PiB in B, KiB, MiB, GiB or TiB " +
	"(2GiB), \"off\" for none, or \"auto\": 90% of the cgroup's memory limit when the process has one, " +
	"else $GOMEMLIMIT if set, else none"

// memoryLimit is a parsed --memory-limit: bytes > 0, or auto, or off.
type memoryLimit struct {
	bytes int64
	auto  bool
}

// parseMemoryLimit parses a --memory-limit value.
func parseMemoryLimit(s string) (memoryLimit, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return memoryLimit{auto: true}, nil
	case "off", "none":
		return memoryLimit{}, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return memoryLimit{}, fmt.Errorf("--memory-limit: %w; want a size from 64MiB to 1PiB (2GiB, 512MiB), off, or auto", err)
	}
	if n < minMemoryLimit || n > maxMemoryLimit {
		return memoryLimit{}, fmt.Errorf("--memory-limit: %s is outside the accepted range 64MiB to 1PiB (or off, or auto)", s)
	}
	return memoryLimit{bytes: n}, nil
}

// sizeUnits are the units parseSize accepts, as GOMEMLIMIT spells them.
var sizeUnits = []struct {
	suffix string
	scale  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50}, {"B", 1},
}

// parseSize parses a byte count with an optional binary unit: "2GiB",
// "1.5GiB", "536870912". Units are matched without regard to case.
func parseSize(s string) (int64, error) {
	num, scale := strings.TrimSpace(s), 1.0
	for _, u := range sizeUnits {
		if len(num) > len(u.suffix) && strings.EqualFold(num[len(num)-len(u.suffix):], u.suffix) {
			num, scale = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	b := v * scale
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}

// applyMemoryLimit sets the runtime's memory limit as m says and logs
// what it set. env is $GOMEMLIMIT; cgroupLimit is the cgroup's memory
// limit in bytes, 0 if none.
func applyMemoryLimit(m memoryLimit, env string, cgroupLimit int64, log *slog.Logger) {
	switch {
	case m.bytes > 0:
		debug.SetMemoryLimit(m.bytes)
		log.Info("broker: memory limit set", "limit", formatSize(m.bytes), "source", "--memory-limit")
	case !m.auto:
		debug.SetMemoryLimit(math.MaxInt64)
		log.Info("broker: no memory limit", "source", "--memory-limit off")
	case cgroupLimit > 0:
		limit := int64(float64(cgroupLimit) * cgroupMemoryShare)
		debug.SetMemoryLimit(limit)
		log.Info("broker: memory limit set", "limit", formatSize(limit), "source", "90% of the cgroup's memory limit",
			"cgroup_limit", formatSize(cgroupLimit))
	case env != "":
		// The runtime read GOMEMLIMIT at start; leave it.
		log.Info("broker: memory limit from $GOMEMLIMIT", "limit", formatSize(debug.SetMemoryLimit(-1)))
	default:
		log.Debug("broker: no memory limit (no cgroup limit, no $GOMEMLIMIT)")
	}
}

// formatSize renders n bytes in the largest binary unit that keeps it at
// least 1, to two decimals.
func formatSize(n int64) string {
	for i := len(sizeUnits) - 2; i >= 0; i-- {
		if u := sizeUnits[i]; float64(n) >= u.scale {
			return strconv.FormatFloat(float64(n)/u.scale, 'f', 2, 64) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup in
// bytes, or 0 if it has none or it cannot be read. root is the cgroup
// file system's mount point (/sys/fs/cgroup) and procCgroup the contents
// of /proc/self/cgroup. cgroup v2: memory.max of the process's cgroup;
// v1: memory.limit_in_bytes of its memory controller's group. In a
// container the group's path may not exist under root, the container's
// own group being mounted there: then the file at the mount's top is read.
// "max", and v1's "none" (a value near 2^63), count as no limit.
func cgroupMemoryLimit(root string, procCgroup []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, name string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, name = root, "memory.max"
		case containsField(parts[1], "memory"):
			dir, name = filepath.Join(root, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		n, err := readLimit(filepath.Join(dir, parts[2], name))
		if errors.Is(err, os.ErrNotExist) {
			n, _ = readLimit(filepath.Join(dir, name))
		}
		if n > 0 {
			return n
		}
	}
	return 0
}

func containsField(list, f string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == f {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup memory limit file: bytes, or "max" (0).
func readLimit(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64-(1<<20) {
		return 0, nil // "max", or v1's none
	}
	return n, nil
}

// systemCgroupMemoryLimit is cgroupMemoryLimit of this process.
func systemCgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0 // not Linux, or no /proc: no cgroup limit known
	}
	return cgroupMemoryLimit("/sys/fs/cgroup", b)
}
