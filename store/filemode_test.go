package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A data directory made by an older raftmq (0755, files 0644) is made its
// owner's only when a store opens it, and a new one is made so.
func TestOpenRestrictsDataDir(t *testing.T) {
	old := filepath.Join(t.TempDir(), "old")
	require.NoError(t, os.Mkdir(old, 0o755))
	require.NoError(t, os.Chmod(old, 0o755)) // whatever the umask
	sa := openSA(t, Config{Dir: old})
	require.NoError(t, sa.Close())
	fi, err := os.Stat(old)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700).String(), fi.Mode().Perm().String())

	fresh := filepath.Join(t.TempDir(), "a", "b")
	sa = openSA(t, Config{Dir: fresh})
	require.NoError(t, sa.Close())
	for _, d := range []string{fresh, filepath.Dir(fresh)} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700).String(), fi.Mode().Perm().String(), d)
	}
}
