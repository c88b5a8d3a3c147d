//go:build !mutant

package store

// UncommittedRecords returns nothing: this build has no uncommitted-reads
// mutant (mutant.go holds it, compiled only with -tags mutant), and its
// callers reach it only behind mutant.Enabled.
func (s *Store) UncommittedRecords(topic string, queueID int32, from int64, max int) [][]byte {
	return nil
}
