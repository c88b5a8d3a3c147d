package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/internal/vfs"
	"github.com/raftmq/raftmq/store"
)

func newStoreCmd(logger func() *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{Use: "store", Short: "Work on a node's store directory"}
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect DIR",
		Short: "Print segments, queues, index files and bbolt contents; verify every CRC",
		Long: "inspect reads a store directory (e.g. raftmq-data/n1) without changing it, verifies the\n" +
			"CRC of every commitlog entry and message, and exits 1 if it finds corruption.\n" +
			"Stop the broker first: the store is locked while open.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			err := store.Inspect(vfs.Default(), args[0], os.Stdout)
			if errors.Is(err, store.ErrInspectFailed) {
				return &exitError{code: 1, err: err}
			}
			return err
		},
	})
	cmd.AddCommand(newStoreDemoCmd(logger))
	return cmd
}
