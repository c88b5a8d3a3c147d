package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/internal/vfs"
)

// The group-wide broker settings are merged by each command, removed by
// an empty value, survive a reopen and travel in a snapshot; a bad name
// is refused.
func TestBrokerConfigReplicatedSettings(t *testing.T) {
	cfg := testConfig(t, vfs.NewMem())
	sa := openSA(t, cfg)
	m, v0 := sa.BrokerConfig()
	require.Empty(t, m)
	require.NoError(t, sa.Exec(&Command{Op: OpBrokerConfig, Settings: map[string]string{"brokerPermission": "4", "autoCreateTopicEnable": "false"}}))
	require.NoError(t, sa.Exec(&Command{Op: OpBrokerConfig, Settings: map[string]string{"autoCreateTopicEnable": ""}}))
	require.ErrorIs(t, sa.Exec(&Command{Op: OpBrokerConfig, Settings: map[string]string{"a=b": "1"}}), ErrBadCommand)
	require.ErrorIs(t, sa.Exec(&Command{Op: OpBrokerConfig}), ErrBadCommand)
	m, v1 := sa.BrokerConfig()
	require.Equal(t, map[string]string{"brokerPermission": "4"}, m)
	require.NotEqual(t, v0, v1)
	require.NoError(t, sa.Close())

	sa = openSA(t, cfg)
	defer sa.Close()
	m, _ = sa.BrokerConfig()
	require.Equal(t, map[string]string{"brokerPermission": "4"}, m)

	_, snap, err := sa.Snapshot()
	require.NoError(t, err)
	sb := openSA(t, testConfig(t, vfs.NewMem()))
	defer sb.Close()
	require.NoError(t, sb.Restore(snap, func(info SnapshotInfo) error { return sb.w.Reset(info.Index+1, info.Pos) }))
	m, _ = sb.BrokerConfig()
	require.Equal(t, map[string]string{"brokerPermission": "4"}, m)
}
