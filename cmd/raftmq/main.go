// Command raftmq is the raftmq broker, its admin tools and its chaos
// harness, as one binary with subcommands. This file wires flags to
// packages; the logic lives in the packages.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "raftmq:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "raftmq",
		Short:         "A RocketMQ-style message store replicated by etcd raft",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug details")
	logger := func() *slog.Logger {
		lvl := slog.LevelInfo
		if verbose {
			lvl = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	root.AddCommand(newClusterCmd(logger), newBrokerCmd(logger), newProduceCmd(logger), newConsumeCmd(logger),
		newBenchCmd(logger), newStoreCmd(logger), newAdminCmd(logger), newJepsenCmd(logger), newNamesrvCmd(logger))
	return root
}
