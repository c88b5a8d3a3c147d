package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/internal/failpoint"
	"github.com/raftmq/raftmq/jepsen"
)

// mutantFlagHelp is the help of a --mutant flag: what it is for and the
// mutants this binary has (none without -tags mutant).
func mutantFlagHelp(what string) string {
	if !failpoint.Built {
		return what + " (only in a binary built with -tags mutant)"
	}
	return what + ": " + strings.Join(failpoint.Names(), ", ")
}

// runInMutantBuild runs cmd's command line again in a raftmq binary built
// with -tags mutant (mutantBin, else one jepsen.BuildMutantBinary builds)
// and returns its exit status. A binary built without the tag knows no
// mutant, so the commands that name mutants (jepsen selftest, jepsen run
// --mutant) run there. Unless --binary says otherwise, the brokers that
// need no mutant build stay this binary.
func runInMutantBuild(cmd *cobra.Command, mutantBin string) error {
	ctx, cancel := signalContext()
	defer cancel()
	if mutantBin == "" {
		var err error
		if mutantBin, err = jepsen.BuildMutantBinary(ctx, os.Stdout); err != nil {
			return &exitError{code: exitHarness, err: err}
		}
	}
	args := strings.Fields(cmd.CommandPath())[1:] // without the root's name
	cmd.Flags().Visit(func(f *pflag.Flag) {
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	if !cmd.Flags().Changed("binary") {
		if self, err := os.Executable(); err == nil {
			args = append(args, "--binary="+self)
		}
	}
	if !cmd.Flags().Changed("mutant-binary") {
		args = append(args, "--mutant-binary="+mutantBin)
	}
	fmt.Printf("jepsen: running %s %s\n", mutantBin, strings.Join(args, " "))
	child := exec.Command(mutantBin, args...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		return &exitError{code: exitHarness, err: fmt.Errorf("start the mutant binary: %w", err)}
	}
	// Signals go to the child, which stops its run cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := child.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return &exitError{code: ee.ExitCode(), err: fmt.Errorf("%s in the mutant binary: exit status %d", cmd.CommandPath(), ee.ExitCode())}
	default:
		return &exitError{code: exitHarness, err: fmt.Errorf("%s in the mutant binary: %w", cmd.CommandPath(), err)}
	}
}
