package main

import (
	"log/slog"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/cluster"
)

// brokerConfig parses broker flags as the command line would and builds
// the node's configuration.
func brokerConfig(t *testing.T, args ...string) (cluster.Config, error) {
	t.Helper()
	var f brokerFlags
	cmd := &cobra.Command{Use: "broker"}
	f.register(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	return f.config(slog.New(slog.DiscardHandler))
}

// Members can be given one --peer at a time, all at once with --peers (as
// the design notes write it), or both; a member given two different
// addresses and a list without the node itself are refused.
func TestBrokerPeerFlags(t *testing.T) {
	want := map[uint64]cluster.Peer{
		1: {Client: "127.0.0.1:10911", Raft: "127.0.0.1:10921"},
		2: {Client: "127.0.0.1:10912", Raft: "127.0.0.1:10922"},
		3: {Client: "127.0.0.1:10913", Raft: "127.0.0.1:10923"},
	}
	for name, args := range map[string][]string{
		"peer":  {"--id", "2", "--peer", "1=127.0.0.1:10911/127.0.0.1:10921", "--peer", "2=127.0.0.1:10912/127.0.0.1:10922", "--peer", "3=127.0.0.1:10913/127.0.0.1:10923"},
		"peers": {"--id", "2", "--peers", "1=127.0.0.1:10911/127.0.0.1:10921,2=127.0.0.1:10912/127.0.0.1:10922,3=127.0.0.1:10913/127.0.0.1:10923"},
		"both":  {"--id", "2", "--peers", "1=127.0.0.1:10911/127.0.0.1:10921,3=127.0.0.1:10913/127.0.0.1:10923", "--peer", "2=127.0.0.1:10912/127.0.0.1:10922", "--peer", "3=127.0.0.1:10913/127.0.0.1:10923"},
	} {
		cfg, err := brokerConfig(t, args...)
		require.NoError(t, err, name)
		require.Equal(t, want, cfg.Peers, name)
	}
	_, err := brokerConfig(t, "--id", "2", "--peers", "1=127.0.0.1:10911/127.0.0.1:10921,2=127.0.0.1:10912/127.0.0.1:10922", "--peer", "2=127.0.0.1:10999/127.0.0.1:10922")
	require.ErrorContains(t, err, "member 2 is listed twice")
	_, err = brokerConfig(t, "--id", "4", "--peers", "1=127.0.0.1:10911/127.0.0.1:10921,2=127.0.0.1:10912/127.0.0.1:10922")
	require.ErrorContains(t, err, "must list this node (4)")
}
