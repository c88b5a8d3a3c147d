package remoting

import (
	"encoding/json"
	"hash/crc32"
)

// Name-server wire types: a broker's registration (REGISTER_BROKER 103,
// UNREGISTER_BROKER 104) and the cluster and topic lists an admin asks for
// (GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206,
// GET_TOPICS_BY_CLUSTER 224).

// GetTopicsByCluster lists the topics served by a cluster's brokers.
const GetTopicsByCluster int32 = 224

// RegisterBrokerRequestHeader is the header of REGISTER_BROKER.
type RegisterBrokerRequestHeader struct {
	BrokerName   string // brokerName
	BrokerAddr   string // brokerAddr: the address clients dial
	ClusterName  string // clusterName
	HAServerAddr string // haServerAddr
	BrokerID     int64  // brokerId: 0 is the master (raftmq: the raft leader)
	// HeartbeatTimeoutMillis (optional): how long the registration lives
	// without a renewal; 0 means the name server's default.
	HeartbeatTimeoutMillis int64
	// BodyCRC32 (bodyCrc32, optional): crc32 (IEEE) of the body & 0x7FFFFFFF;
	// 0 skips the check.
	BodyCRC32 int32
}

// Encode returns the ext fields.
func (h *RegisterBrokerRequestHeader) Encode() map[string]string {
	w := newExtMap(7)
	w.str("brokerName", h.BrokerName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("clusterName", h.ClusterName)
	w.str("haServerAddr", h.HAServerAddr)
	w.i64("brokerId", h.BrokerID)
	w.optI64("heartbeatTimeoutMillis", h.HeartbeatTimeoutMillis)
	w.boolean("compressed", false)
	w.i32("bodyCrc32", h.BodyCRC32)
	return w.m
}

// DecodeRegisterBrokerRequestHeader decodes a REGISTER_BROKER header.
func DecodeRegisterBrokerRequestHeader(ext map[string]string) (RegisterBrokerRequestHeader, error) {
	r := extReader{ext: ext}
	h := RegisterBrokerRequestHeader{
		BrokerName:             r.str("brokerName", true),
		BrokerAddr:             r.str("brokerAddr", true),
		ClusterName:            r.str("clusterName", true),
		HAServerAddr:           r.str("haServerAddr", false),
		BrokerID:               r.i64("brokerId", true),
		HeartbeatTimeoutMillis: r.i64("heartbeatTimeoutMillis", false),
		BodyCRC32:              r.i32("bodyCrc32", false),
	}
	if r.boolean("compressed", false) && r.err == nil {
		r.fail("compressed", "compressed registrations are not supported")
	}
	return h, r.err
}

// BodyCRC32 is the checksum REGISTER_BROKER carries for its body.
func BodyCRC32(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

// UnregisterBrokerRequestHeader is the header of UNREGISTER_BROKER.
type UnregisterBrokerRequestHeader struct {
	BrokerName  string // brokerName
	BrokerAddr  string // brokerAddr
	ClusterName string // clusterName
	BrokerID    int64  // brokerId
}

// Encode returns the ext fields.
func (h *UnregisterBrokerRequestHeader) Encode() map[string]string {
	w := newExtMap(4)
	w.str("brokerName", h.BrokerName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("clusterName", h.ClusterName)
	w.i64("brokerId", h.BrokerID)
	return w.m
}

// DecodeUnregisterBrokerRequestHeader decodes an UNREGISTER_BROKER header.
func DecodeUnregisterBrokerRequestHeader(ext map[string]string) (UnregisterBrokerRequestHeader, error) {
	r := extReader{ext: ext}
	h := UnregisterBrokerRequestHeader{
		BrokerName:  r.str("brokerName", true),
		BrokerAddr:  r.str("brokerAddr", true),
		ClusterName: r.str("clusterName", true),
		BrokerID:    r.i64("brokerId", true),
	}
	return h, r.err
}

// DataVersion is RocketMQ's DataVersion of a broker's config. raftmq puts
// the raft term in StateVersion, so that a name server can refuse a stale
// leader's registration.
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// RegisterBrokerBody is the (uncompressed) body of REGISTER_BROKER. Topic
// configs stay raw JSON here: they are RocketMQ's TopicConfig, which
// package offsets reads and writes.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper struct {
		TopicConfigTable map[string]json.RawMessage `json:"topicConfigTable"`
		DataVersion      DataVersion                `json:"dataVersion"`
	} `json:"topicConfigSerializeWrapper"`
	FilterServerList []string `json:"filterServerList"`
}

// ClusterInfo is the body of a GET_BROKER_CLUSTER_INFO answer.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// TopicList is the body of GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
// GET_TOPICS_BY_CLUSTER answers.
type TopicList struct {
	TopicList []string `json:"topicList"`
}

// MarshalJSON writes a nil list as [].
func (l TopicList) MarshalJSON() ([]byte, error) {
	type plain TopicList
	p := plain(l)
	if p.TopicList == nil {
		p.TopicList = []string{}
	}
	return json.Marshal(p)
}
