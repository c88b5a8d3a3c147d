// Command raftmq is the raftmq broker, its admin tools and its chaos
// harness, as one binary with subcommands. This file wires flags to
// packages; the logic lives in the packages.
package main

import (
	"context"
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
	// A flag that does not parse is a usage error, as a value out of range
	// is (flagcheck.go).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug details")
	var cr credentials
	root.PersistentFlags().StringVar(&cr.accessKey, "access-key", os.Getenv("RAFTMQ_ACCESS_KEY"), "sign requests with this access key, for a group with an ACL (default $RAFTMQ_ACCESS_KEY)")
	root.PersistentFlags().StringVar(&cr.secretKey, "secret-key", os.Getenv("RAFTMQ_SECRET_KEY"), "the access key's secret (default $RAFTMQ_SECRET_KEY)")
	root.PersistentFlags().StringVar(&cr.securityToken, "security-token", os.Getenv("RAFTMQ_SECURITY_TOKEN"), "a security token sent with signed requests (default $RAFTMQ_SECURITY_TOKEN)")
	var tf tlsFlags
	registerTLSFlags(root, &tf)
	root.PersistentPreRun = func(c *cobra.Command, _ []string) {
		c.SetContext(context.WithValue(c.Context(), credentialsKey{}, cr))
		c.SetContext(context.WithValue(c.Context(), tlsKey{}, tf))
	}
	logger := func() *slog.Logger {
		lvl := slog.LevelInfo
		if verbose {
			lvl = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	root.AddCommand(newClusterCmd(logger), newBrokerCmd(logger), newProduceCmd(logger), newConsumeCmd(logger),
		newBenchCmd(logger), newStoreCmd(logger), newAdminCmd(logger), newJepsenCmd(logger), newNamesrvCmd(logger), newCertCmd(logger),
		newClusterIDCmd())
	return root
}
