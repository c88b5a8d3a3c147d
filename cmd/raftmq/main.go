// Command raftmq is the raftmq broker, its admin tools and its chaos
// harness, as one binary with subcommands. This file wires flags to
// packages; the logic lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	root.SetFlagErrorFunc(flagError)
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug details (--log-level debug)")
	var logLevel, logFormat string
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log lines of this level and above: debug, info, warn or error")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log as text (key=value) or json (one object per line)")
	var cr credentials
	root.PersistentFlags().StringVar(&cr.accessKey, "access-key", os.Getenv("RAFTMQ_ACCESS_KEY"), "sign requests with this access key, for a group with an ACL (default $RAFTMQ_ACCESS_KEY)")
	root.PersistentFlags().StringVar(&cr.secretKey, "secret-key", os.Getenv("RAFTMQ_SECRET_KEY"), "the access key's secret (default $RAFTMQ_SECRET_KEY)")
	root.PersistentFlags().StringVar(&cr.securityToken, "security-token", os.Getenv("RAFTMQ_SECURITY_TOKEN"), "a security token sent with signed requests (default $RAFTMQ_SECURITY_TOKEN)")
	var tf tlsFlags
	registerTLSFlags(root, &tf)
	level := new(slog.LevelVar)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if _, err := newLogger(io.Discard, logLevel, logFormat, verbose, level); err != nil {
			return usageError(err)
		}
		c.SetContext(context.WithValue(c.Context(), logLevelKey{}, level))
		c.SetContext(context.WithValue(c.Context(), credentialsKey{}, cr))
		c.SetContext(context.WithValue(c.Context(), tlsKey{}, tf))
		return resolveTarget(c)
	}
	logger := func() *slog.Logger {
		l, err := newLogger(os.Stderr, logLevel, logFormat, verbose, level)
		if err != nil {
			l, _ = newLogger(os.Stderr, "info", "text", verbose, level)
		}
		return l
	}
	root.AddCommand(newClusterCmd(logger), newBrokerCmd(logger), newProduceCmd(logger), newConsumeCmd(logger),
		newBenchCmd(logger), newStoreCmd(logger), newAdminCmd(logger), newJepsenCmd(logger), newNamesrvCmd(logger), newCertCmd(logger),
		newClusterIDCmd())
	finishCommands(root)
	return root
}

// logLevelKey is the context key of the log's *slog.LevelVar, which a
// broker's logLevel setting changes at runtime.
type logLevelKey struct{}

// newLogger is the log of --log-level, --log-format and -v, on w; it
// sets lv to the level and logs at lv's level.
func newLogger(w io.Writer, level, format string, verbose bool, lv *slog.LevelVar) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if verbose {
		lvl = min(lvl, slog.LevelDebug)
	}
	lv.Set(lvl)
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
