package raftlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// etcd raft's Info lines (its election chatter) are logged at DEBUG; its
// warnings and errors keep their level.
func TestRaftLoggerChatterAtDebug(t *testing.T) {
	var buf bytes.Buffer
	l := &slogRaftLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Infof("%x became candidate at term %d", 1, 5)
	l.Info("received MsgVoteResp")
	require.Empty(t, buf.String(), "election chatter is not shown at INFO")
	l.Warningf("%x stepped down", 1)
	l.Error("bad")
	require.Contains(t, buf.String(), "level=WARN")
	require.Contains(t, buf.String(), "level=ERROR")

	buf.Reset()
	l = &slogRaftLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Infof("%x became leader at term %d", 1, 5)
	require.True(t, strings.Contains(buf.String(), "level=DEBUG") && strings.Contains(buf.String(), "became leader at term 5"), buf.String())
}
