package store

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Format levels. An entry format that an older build cannot apply (it
// would skip the entry as malformed and diverge from the nodes that apply
// it) is proposed only once every member of the group has announced a
// level that reads it, as etcd gates features on its cluster version.
//
// Each build has one level, FormatLevel. A node announces it with an
// OpFormatLevel command (cluster's Replica.AnnounceLevel), which Apply records in
// the replicated state by member ID (the meta key "formatLevels" of
// meta.db, carried by checkpoints and snapshots). The group's level is the
// lowest recorded level among the current voters and learners, a member
// that never announced counting as level 0 (GroupLevel); leaders
// choose entry formats from it.
//
// A build from before the gate treats the announcement as a command of an
// unknown op: applyCommand's default case, ErrBadCommand in the entry's
// Result, nothing changed, the node goes on.
const (
	// FormatLevelBase is the level of builds from before the gate (and of
	// members that never announced one).
	FormatLevelBase uint32 = 0
	// FormatLevelAcks reads pop.OpAcks and pop's binary entry head (both
	// came before the gate: a build that announces reads them).
	FormatLevelAcks uint32 = 1
	// FormatLevel is this build's level.
	FormatLevel = FormatLevelAcks
)

// OpFormatLevel records Member's announced format level.
const OpFormatLevel = "formatLevel"

// MemberLevel is one member's announced format level.
type MemberLevel struct {
	ID    uint64 `json:"id"`
	Level uint32 `json:"level"`
}

// metaFormatLevels holds the members' announced levels as a JSON object
// (member ID in decimal → level).
const metaFormatLevels = "formatLevels"

// applyFormatLevelLocked records c's announcement. The caller holds
// state.mu.
func (st *state) applyFormatLevelLocked(c *Command) error {
	if c.Member == nil || c.Member.ID == 0 {
		return fmt.Errorf("%w: formatLevel without a member", ErrBadCommand)
	}
	next := maps.Clone(st.levels)
	if next == nil {
		next = map[uint64]uint32{}
	}
	next[c.Member.ID] = c.Member.Level
	st.levels = next
	st.dirtyLevels = true
	return nil
}

func encodeLevels(m map[uint64]uint32) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("store: encode format levels: %w", err)
	}
	return b, nil
}

func decodeLevels(b []byte) (map[uint64]uint32, error) {
	var m map[uint64]uint32
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("store: format levels: %w", err)
	}
	return m, nil
}

// FormatLevels returns each member's announced format level as applied
// (members that never announced are absent). The map is not to be
// modified: Apply replaces it rather than changing it.
func (s *Store) FormatLevels() map[uint64]uint32 {
	s.state.mu.RLock()
	defer s.state.mu.RUnlock()
	return s.state.levels
}

// GroupLevel is the lowest level of members in levels, a member absent
// from levels counting as FormatLevelBase; FormatLevelBase for no members.
func GroupLevel(levels map[uint64]uint32, members []uint64) uint32 {
	if len(members) == 0 {
		return FormatLevelBase
	}
	low := ^uint32(0)
	for _, id := range members {
		l, ok := levels[id]
		if !ok {
			return FormatLevelBase
		}
		low = min(low, l)
	}
	return low
}
