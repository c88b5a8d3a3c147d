//go:build !mutant

package main

import "github.com/raftmq/raftmq/cluster"

// Stubs of the failpoints in failpoints_mutant.go: the default build never
// calls them (failpoint.On is constant false there).

func readdedNodeCrash(cluster.Config) <-chan error {
	panic("failpoint readded-node-crash: built without -tags mutant")
}
