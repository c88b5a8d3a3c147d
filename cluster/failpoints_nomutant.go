//go:build !mutant

package cluster

import (
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/store/pop"
	"github.com/raftmq/raftmq/store/schedule"
	"github.com/raftmq/raftmq/store/txn"
)

// Stubs of the failpoints and the fault endpoint in failpoints_mutant.go:
// the default build never calls them (failpoint.On and failpoint.Built are
// constant false there).

// fpState is empty: this build has no failpoint and no fault endpoint.
type fpState struct{}

const notBuilt = ": built without -tags mutant"

func (b *Broker) warnFailpoints()                  { panic("failpoints" + notBuilt) }
func (b *Broker) startFaultEndpoint(*store.Config) { panic("fault endpoint" + notBuilt) }
func (b *Broker) injectFault(*remoting.Command) *remoting.Command {
	panic("fault endpoint" + notBuilt)
}
func noClientDeadlines(*remoting.Server) { panic("failpoint no-client-deadlines" + notBuilt) }
func lockTwoOwners(_, _ []remoting.MessageQueue) []remoting.MessageQueue {
	panic("failpoint lock-two-owners" + notBuilt)
}
func (b *Broker) forgetMembers() { panic("failpoint forget-members" + notBuilt) }
func (b *Broker) offsetToMemory(store.OffsetCommit) bool {
	panic("failpoint offsets-in-memory" + notBuilt)
}
func (b *Broker) offsetFromMemory(store.OffsetCommit) (int64, bool, bool) {
	panic("failpoint offsets-in-memory" + notBuilt)
}
func (b *Broker) updateOffsetInMemory(*remoting.Command, store.OffsetCommit) *remoting.Command {
	panic("failpoint offsets-in-memory" + notBuilt)
}
func uncommittedReads(*store.Store, *store.GetResult, *remoting.PullMessageRequestHeader, int, int64) int64 {
	panic("failpoint uncommitted-reads" + notBuilt)
}
func deliverHalf(bool) bool                  { panic("failpoint deliver-half" + notBuilt) }
func delayEarly(bool) bool                   { panic("failpoint delay-early" + notBuilt) }
func rollbackDelivers(txn.Action) bool       { panic("failpoint rollback-delivers" + notBuilt) }
func (b *Broker) scheduleCursor(int32) int64 { panic("failpoint schedule-in-memory" + notBuilt) }
func (b *Broker) scheduleDelivered(*schedule.Delivery, error) {
	panic("failpoint schedule-in-memory" + notBuilt)
}
func (b *Broker) ackInMemory([]Receipt) []error { panic("failpoint ack-in-memory" + notBuilt) }
func (b *Broker) inlineAckInMemory() bool       { panic("failpoint ack-in-memory" + notBuilt) }
func (b *Broker) unackedInMemory(pop.Key, []pop.Record) []pop.Record {
	panic("failpoint ack-in-memory" + notBuilt)
}
func (b *Broker) popBeforeCommit(*PopRequest, bool, []builtPop, *PopResult) error {
	panic("failpoint pop-before-commit" + notBuilt)
}
