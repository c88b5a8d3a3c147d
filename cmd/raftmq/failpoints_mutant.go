//go:build mutant

package main

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/raftmq/raftmq/cluster"
)

// The failpoints of the broker command (internal/failpoint), compiled only
// with -tags mutant.

// readdedNodeCrash is the readded-node-crash failpoint (runBroker, before
// cluster.Start): a node started with --join on an empty data directory (a
// member added to a running group, as the membership nemesis re-adds one)
// gets an error a second after it started, and exits with it; started
// again, on the data it has by then, it runs. Nil (never ready) for every
// other node.
func readdedNodeCrash(cfg cluster.Config) <-chan error {
	if !cfg.Join {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "raft")); err == nil {
		return nil // not its first start
	}
	c := make(chan error, 1)
	time.AfterFunc(time.Second, func() { c <- errors.New("readded-node-crash mutant: a member added with --join gives up") })
	return c
}
