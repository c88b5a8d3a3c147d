package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

// readDoc returns a file of the repository with every run of white space
// made one space, so a phrase matches across the prose's line breaks.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(b)), " ")
}

// The defaults the documentation states are the flags' and the
// packages' constants: a changed default fails here until the prose
// says it.
func TestDocsStateTheDefaults(t *testing.T) {
	// operating.md's retention table: each row's default, parsed as its
	// flag parses it, is the flag's default.
	var f brokerFlags
	cmd := &cobra.Command{Use: "broker"}
	f.register(cmd)
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	require.NoError(t, err)
	row := regexp.MustCompile("^\\| `([a-z-]+)` \\([^)]*\\) \\| `?\"?([^|`\"]+)\"?`? \\|")
	rows := 0
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fl := cmd.Flags().Lookup(m[1])
		require.NotNil(t, fl, "docs/operating.md: --%s is no broker flag", m[1])
		require.NoError(t, fl.Value.Set(strings.TrimSpace(m[2])), "docs/operating.md: --%s's default %q", m[1], m[2])
		require.Equal(t, fl.DefValue, fl.Value.String(), "docs/operating.md states --%s's default as %q", m[1], m[2])
		rows++
	}
	require.Equal(t, 6, rows, "docs/operating.md's retention table")

	percent := func(r float64) int { return int(math.Round(r * 100)) }
	for _, c := range []struct{ file, phrase string }{
		{"README.md", fmt.Sprintf("RocketMQ's defaults (%d h, at %s:00, %d/%d/%d %% thresholds)",
			int(store.DefaultFileReservedTime.Hours()), store.DefaultDeleteWhen,
			percent(store.DefaultCleanRatio), percent(store.DefaultForceRatio), percent(store.DefaultFullRatio))},
		{"docs/security.md", fmt.Sprintf("exceeds the %s frame limit", sizeText(remoting.DefaultMaxFrame))},
		{"docs/security.md", fmt.Sprintf("within %d s, that does not decode", int(remoting.DefaultReadTimeout.Seconds()))},
		{"docs/security.md", fmt.Sprintf("sends nothing for %d s;", int(remoting.DefaultIdleTimeout.Seconds()))},
		{"docs/security.md", fmt.Sprintf("Beyond %s connections", countText(remoting.DefaultMaxConns))},
		{"docs/security.md", fmt.Sprintf("with %d requests or %s unanswered", remoting.DefaultMaxInflightRequests, sizeText(remoting.DefaultMaxInflightBytes))},
		{"docs/security.md", fmt.Sprintf("has %s unanswered", sizeText(remoting.DefaultMaxInflightTotal))},
	} {
		require.Contains(t, readDoc(t, c.file), c.phrase, "%s no longer states this default", c.file)
	}
}
