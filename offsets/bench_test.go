package offsets

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkApplyBatch measures one applied raft batch as the apply loop
// writes it: the applied index, 64 consumer offsets and 64 queue offsets in
// one Update, fsynced (NoSync false) on a real file.
func BenchmarkApplyBatch(b *testing.B) {
	const perTx = 64
	db, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{Logger: testLogger(b)})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, db.Close()) })
	groups := make([]string, 4)
	for i := range groups {
		groups[i] = fmt.Sprintf("consumer_group_%d", i)
	}
	topics := make([]string, 8)
	for i := range topics {
		topics[i] = fmt.Sprintf("BenchTopic_%d", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := db.Update(func(tx *Tx) error {
			if err := tx.SetApplied(uint64(i+1), 1); err != nil {
				return err
			}
			for j := range perTx {
				topic, q := topics[j%len(topics)], int32(j/len(topics))
				if err := tx.SetConsumerOffset(groups[j%len(groups)], topic, q, int64(i)); err != nil {
					return err
				}
				if err := tx.SetQueueOffset(topic, q, int64(i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	elapsed := b.Elapsed()
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "µs/tx")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tx/s")
	b.ReportMetric(2*perTx+1, "writes/tx")
}
