package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/cluster"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// Flag validation. Every value a flag (or the same key in a --config file)
// may take is declared once, in flagRules: `raftmq broker` checks its flags
// against the table before it builds anything, and `raftmq cluster` checks
// its own flags against the same table and then the arguments of every
// broker it would start (checkBrokerArgs), before it starts any. A bad
// value exits with exitUsage and a message naming the flag and what it
// accepts.

// exitUsage is the exit status of a command refused for a bad flag or
// config value.
const exitUsage = 2

// usageError marks err as a bad flag or config value (exit status 2).
func usageError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitUsage, err: err}
}

// flagRule is the values one flag accepts: ok tells a value (as its
// pflag.Value's String gives it) that is accepted; accepts says which, for
// the message.
type flagRule struct {
	accepts string
	ok      func(v string) bool
}

func intRule(lo, hi int64, accepts string) flagRule {
	return flagRule{accepts: accepts, ok: func(v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= lo && n <= hi
	}}
}

func uintRule(lo uint64, accepts string) flagRule {
	return flagRule{accepts: accepts, ok: func(v string) bool {
		n, err := strconv.ParseUint(v, 10, 64)
		return err == nil && n >= lo
	}}
}

func durationRule(lo, hi time.Duration, accepts string) flagRule {
	return flagRule{accepts: accepts, ok: func(v string) bool {
		d, err := time.ParseDuration(v)
		return err == nil && d >= lo && d <= hi
	}}
}

// ratioRule accepts a fraction strictly between 0 and 1.
func ratioRule() flagRule {
	return flagRule{accepts: "a fraction between 0 and 1 (exclusive), as 0.75", ok: func(v string) bool {
		r, err := strconv.ParseFloat(v, 64)
		return err == nil && r > 0 && r < 1
	}}
}

func oneOfRule(vals ...string) flagRule {
	return flagRule{accepts: strings.Join(vals, " or "), ok: func(v string) bool { return slices.Contains(vals, v) }}
}

func nonEmptyRule(what string) flagRule {
	return flagRule{accepts: what, ok: func(v string) bool { return strings.TrimSpace(v) != "" }}
}

// validPort reports whether s is a TCP port number (0 picks a free one).
func validPort(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n <= math.MaxUint16
}

// addrRule accepts HOST:PORT with a port of 0 to 65535, or nothing when
// empty is allowed.
func addrRule(empty bool) flagRule {
	accepts := "HOST:PORT with a port of 0 to 65535"
	if empty {
		accepts = "empty (off) or " + accepts
	}
	return flagRule{accepts: accepts, ok: func(v string) bool {
		if v == "" {
			return empty
		}
		_, port, err := net.SplitHostPort(v)
		return err == nil && validPort(port)
	}}
}

// httpRule accepts --http's values: auto, empty (off) or HOST:PORT.
func httpRule() flagRule {
	a := addrRule(true)
	return flagRule{accepts: "auto (the client port + 20), " + a.accepts, ok: func(v string) bool { return v == httpAuto || a.ok(v) }}
}

// fileRule accepts an empty value or an existing regular file (dir: an
// existing directory).
func fileRule(dir bool) flagRule {
	what := "a readable file"
	if dir {
		what = "an existing directory"
	}
	return flagRule{accepts: "empty or " + what, ok: func(v string) bool {
		if v == "" {
			return true
		}
		fi, err := os.Stat(v)
		return err == nil && fi.IsDir() == dir
	}}
}

// flagRules are the accepted values of the broker's and the cluster
// command's flags, by flag name; a flag missing here takes any value its
// type parses (booleans, names, and the settings whose every value means
// something, as a negative timeout for none). The cluster command's flags
// of the same name as the broker's are the broker's and checked alike.
func flagRules() map[string]flagRule {
	const maxI64 = math.MaxInt64
	return map[string]flagRule{
		// broker
		"id":                  uintRule(1, "a node id of at least 1 (required)"),
		"flush":               oneOfRule("sync", "async"),
		"segment-size":        intRule(4096, 1<<32-1, "a byte count from 4096 to 4294967295 (4 GiB - 1)"),
		"warm-ahead":          intRule(-1, maxI64, "-1 (off), 0 (64 MiB) or a byte count"),
		"cache-window":        intRule(-1, maxI64, "-1 (keep all), 0 (1 GiB) or a byte count"),
		"direct-io":           intRule(0, 1, "0 (buffered writes) or 1 (O_DIRECT)"),
		"cq-max-open-files":   intRule(-1, maxI64, "-1 (no bound), 0 (from the descriptor limit) or a count of files"),
		"http":                httpRule(),
		"bind-ip":             {accepts: "empty or an IP address", ok: func(v string) bool { return v == "" || net.ParseIP(v) != nil }},
		"namesrv":             {accepts: "empty or HOST:PORT;HOST:PORT...", ok: validNamesrv},
		"cluster-name":        nonEmptyRule("a non-empty name"),
		"broker-name":         nonEmptyRule("a non-empty name"),
		"tick":                durationRule(time.Millisecond, 10*time.Second, "a duration from 1ms to 10s"),
		"commit-notify-delay": durationRule(math.MinInt64, time.Second, "a duration of at most 1s (0: the default, negative: send at once)"),
		"max-timer-delay":     durationRule(time.Second, math.MaxInt64, "a duration of at least 1s"),
		"transaction-timeout": durationRule(time.Millisecond, math.MaxInt64, "a duration of at least 1ms"),
		"transaction-check-interval": durationRule(time.Millisecond, math.MaxInt64,
			"a duration of at least 1ms"),
		"transaction-check-max":  intRule(1, math.MaxInt32, "a count of at least 1"),
		"file-reserved-time":     durationRule(time.Nanosecond, math.MaxInt64, "a positive duration, as 72h"),
		"disk-check-interval":    durationRule(time.Millisecond, math.MaxInt64, "a duration of at least 1ms"),
		"delete-when":            {accepts: `hours 00-23 separated by ';', as "04;16"`, ok: func(v string) bool { _, err := store.ParseDeleteWhen(v); return err == nil }},
		"disk-clean-ratio":       ratioRule(),
		"disk-force-clean-ratio": ratioRule(),
		"disk-full-ratio":        ratioRule(),
		"failover-write-queues":  intRule(0, 1024, "0 (the topic's count) or a count of write queues from 1 to 1024"),
		"acl-file":               fileRule(false),
		"tls-cert":               fileRule(false),
		"tls-key":                fileRule(false),
		"tls-ca":                 fileRule(false),
		"tls-mode": {accepts: "empty, disabled, permissive or enforcing", ok: func(v string) bool {
			_, err := remoting.ParseTLSMode(v)
			return v == "" || err == nil
		}},
		"tls-client-auth": {accepts: "none, optional or require", ok: func(v string) bool {
			_, err := cluster.ParseClientAuth(v)
			return err == nil
		}},
		"console-runs": fileRule(true),
		// cluster
		"nodes":        intRule(1, maxClusterNodes, fmt.Sprintf("1 to %d nodes", maxClusterNodes)),
		"groups":       intRule(1, 100, "1 to 100 groups"),
		"base-port":    intRule(1, math.MaxUint16, "a port from 1 to 65535 (and room above it for every node's ports)"),
		"namesrv-port": intRule(1, math.MaxUint16, "a port from 1 to 65535"),
		"demo":         intRule(0, math.MaxInt32, "0 (none) or a count of messages"),
	}
}

// maxClusterNodes is the most nodes `raftmq cluster` runs in a group: its
// client, raft and HTTP ports are 10 apart.
const maxClusterNodes = 10

func validNamesrv(v string) bool {
	if v == "" {
		return true
	}
	for _, a := range strings.Split(v, ";") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || !validPort(port) {
			return false
		}
	}
	return true
}

// validateFlags checks every flag of fs that has a rule and returns all
// the bad values at once, as a usage error.
func validateFlags(fs *pflag.FlagSet, rules map[string]flagRule) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		r, ok := rules[f.Name]
		if !ok {
			return
		}
		if v := f.Value.String(); !r.ok(v) {
			errs = append(errs, fmt.Errorf("--%s %q: want %s", f.Name, v, r.accepts))
		}
	})
	return usageError(errors.Join(errs...))
}
