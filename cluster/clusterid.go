package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/raftlog/transport"
)

// A group's identity. Every group has a cluster ID, a nonzero 64-bit
// number recorded with each member's raft state (raftlog, the state
// file's cluster ID field), sent in every raft handshake and frame
// (raftlog/transport) and in every request a member forwards to the
// leader (the extCluster field). A node refuses to start on a data
// directory of another cluster, and refuses raft streams, frames and
// forwarded requests of another cluster, naming both IDs.
//
// Where the ID comes from (resolveClusterID), in this order:
//
//   - recorded: a node that has one recorded uses it; Config.ClusterID, if
//     given, must be the same, or the node refuses to start;
//   - given: Config.ClusterID (--cluster-id), chosen at random once per
//     group (NewClusterID; `raftmq cluster` and the harnesses do it) and
//     given to every member;
//   - upgrade: a node with raft state but no ID recorded (its data predates
//     the ID) adopts Config.ClusterID if given, else the ID its transport
//     used before, derived from the cluster and broker names
//     (legacyClusterID), so that the members not yet upgraded still hear
//     it; it logs which;
//   - bootstrap without one: a single member picks a random one; a group
//     of several members cannot agree on a random one without it, and a
//     value derived from what they share (names, addresses) would be the
//     same for two groups configured alike, so it refuses to start
//     (ErrNoClusterID), suggesting a fresh random ID;
//   - join without one: learnt from the first raft stream of the group
//     that reaches the node (transport.Config.LearnClusterID), recorded
//     before any of its messages is handled.

// extCluster carries the forwarding node's cluster ID (16 hex digits) in
// every forwarded request.
const extCluster = "raftmqCluster"

// NewClusterID returns a random nonzero cluster ID.
func NewClusterID() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// FormatClusterID writes id as 16 hex digits, as ParseClusterID reads it.
func FormatClusterID(id uint64) string { return transport.FormatClusterID(id) }

// ParseClusterID parses a cluster ID: 1 to 16 hex digits, not zero.
func ParseClusterID(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("cluster: cluster ID %q: want 1 to 16 hex digits", s)
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: cluster ID %q: want 1 to 16 hex digits", s)
	}
	if id == 0 {
		return 0, fmt.Errorf("cluster: cluster ID 0 is not allowed")
	}
	return id, nil
}

// legacyClusterID is the ID the transport derived from the names before
// groups had a recorded one (kept for data directories of that time).
func legacyClusterID(names string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(names))
	return max(h.Sum64(), 1)
}

// ErrOtherCluster is returned by Start (and OpenReplica) when the data
// directory belongs to another cluster than the one the node was given.
var ErrOtherCluster = errors.New("cluster: data directory of another cluster")

// ErrNoClusterID is returned by Start (and OpenReplica) when a group of
// several members is bootstrapped without a cluster ID.
var ErrNoClusterID = errors.New("cluster: no cluster ID to bootstrap the group with")

// resolveClusterID decides the node's cluster ID before raft starts (see
// the list above) and records it. It leaves it 0 for a joining node that
// was given none.
func (r *Replica) resolveClusterID(cfg ReplicaConfig) error {
	stored, given := r.rs.ClusterID(), cfg.ClusterID
	dir := cfg.Store.Dir
	var id uint64
	switch {
	case stored != 0 && given != 0 && stored != given:
		return fmt.Errorf("%w: %s holds the raft state of cluster %s, but this node was started as a member of cluster %s (--cluster-id); "+
			"refusing to start: a directory copied from another group must not join this one (to replace a member, "+
			"`raftmq admin node remove`, empty the directory, `admin node add`, start it with --join)",
			ErrOtherCluster, dir, FormatClusterID(stored), FormatClusterID(given))
	case stored != 0:
		r.clusterID.Store(stored)
		return nil
	case r.rs.HasState():
		how := "given with --cluster-id"
		if id = given; id == 0 {
			id, how = legacyClusterID(cfg.Names), "derived from the cluster and broker names, as before"
		}
		r.log.Warn("cluster: this node's raft state has no cluster ID (written by an older version): adopting one",
			"cluster_id", FormatClusterID(id), "how", how, "dir", dir)
	case len(cfg.Bootstrap) > 1 && given == 0:
		return fmt.Errorf("%w: bootstrapping a group of %d members needs a cluster ID chosen once at random and given to every member: "+
			"start each of them with --cluster-id %s (a fresh one; `raftmq cluster-id` prints others)",
			ErrNoClusterID, len(cfg.Bootstrap), FormatClusterID(NewClusterID()))
	case len(cfg.Bootstrap) > 0:
		if id = given; id == 0 {
			id = NewClusterID() // a group of one: its own choice is the group's
		}
	default: // joining
		if given == 0 {
			r.log.Info("cluster: joining without --cluster-id: the cluster ID will be learnt from the group's first raft stream")
			return nil
		}
		id = given
	}
	if err := r.rs.SetClusterID(id); err != nil {
		return fmt.Errorf("cluster: record cluster ID: %w", err)
	}
	r.clusterID.Store(id)
	r.log.Info("cluster: cluster ID recorded", "cluster_id", FormatClusterID(id))
	return nil
}

// learnClusterID records the cluster ID a joining node learnt from its
// first raft stream (transport.Config.LearnClusterID).
func (r *Replica) learnClusterID(id uint64) error {
	if err := r.rs.SetClusterID(id); err != nil {
		return fmt.Errorf("cluster: record learnt cluster ID: %w", err)
	}
	r.clusterID.Store(id)
	return nil
}

// ClusterID returns the group's cluster ID, 0 while a joining node has
// not learnt it yet.
func (r *Replica) ClusterID() uint64 { return r.clusterID.Load() }
