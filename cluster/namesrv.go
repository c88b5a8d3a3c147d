package cluster

import (
	"time"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/offsets"
	"github.com/raftmq/raftmq/protocol/remoting"
)

// Name-server registration (Config.NameServers): every node registers its
// group's broker name, under broker id 0 while it leads (and has applied
// its predecessors' entries) and under its node id otherwise, with the raft
// term as state version; with failover routes, also its own write-only
// broker name (FailoverBrokerName). It registers every 30 s and at once
// when the leadership or the topic table changes, so routes move to a new
// leader within a second.

// registrations is what this node registers now.
func (b *Broker) registrations() []namesrv.Registration {
	n := b.rep.Node()
	st := n.Status()
	id := int64(b.cfg.ID)
	if n.LeaderReady() {
		id = remoting.MasterID
	}
	topics := b.rep.Store().Topics()
	if bp := int32(b.brokerPerm()); bp != remoting.PermRead|remoting.PermWrite {
		for i := range topics {
			topics[i].Perm &= bp | remoting.PermInherit | remoting.PermPriority
		}
	}
	addr := b.ClientAddr()
	published := topics
	if b.autoCreate() {
		// The auto-creation template, as RocketMQ's brokers publish it.
		published = append(append([]offsets.TopicConfig{}, topics...), autoCreateTemplate())
	}
	regs := []namesrv.Registration{{Cluster: b.cfg.ClusterName, BrokerName: b.cfg.BrokerName, BrokerAddr: addr,
		BrokerID: id, StateVersion: int64(st.Term), Topics: published}}
	if b.cfg.FailoverRoutes && id != remoting.MasterID {
		var writable []offsets.TopicConfig
		for _, tc := range topics {
			if tc.Perm&remoting.PermWrite != 0 {
				tc.WriteQueueNums, _ = FailoverQueues(b.failoverWriteQueues(tc), tc.WriteQueueNums, b.cfg.ID)
				tc.ReadQueueNums, tc.Perm = 0, remoting.PermWrite
				writable = append(writable, tc)
			}
		}
		regs = append(regs, namesrv.Registration{Cluster: b.cfg.ClusterName, BrokerName: FailoverBrokerName(b.cfg.BrokerName, b.cfg.ID),
			BrokerAddr: addr, BrokerID: remoting.MasterID, StateVersion: int64(st.Term), Topics: writable})
	}
	return regs
}

// watchRegistration triggers a registration when this node's leadership
// or the topic table changes.
func (b *Broker) watchRegistration(r *namesrv.Registrar) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	type view struct {
		ready  bool
		term   uint64
		topics uint64
	}
	var last view
	for {
		select {
		case <-t.C:
		case <-b.stopc:
			return
		}
		v := view{b.rep.Node().LeaderReady(), b.rep.Node().Status().Term, b.rep.Store().TopicsVersion()}
		if v != last {
			last = v
			r.Trigger()
		}
	}
}
