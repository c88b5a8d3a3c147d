package remoting

import (
	"encoding/json"
	"hash/crc32"
)

// Name-server wire types: a broker's registration (REGISTER_BROKER 103,
// UNREGISTER_BROKER 104, QUERY_DATA_VERSION 322, BROKER_HEARTBEAT 904),
// and the calls RocketMQ's admin tools make to a name server: cluster info
// (106), topic lists (206, 224, 304, 311-313), topic deletion and
// registration (216, 217), broker write permission (205, 327), the
// key-value store (100-102, 219) and the server's settings (318, 319).

// Name-server request codes not in codes.go (RocketMQ's RequestCode).
// They are part of the wire format.
const (
	PutKVConfig                  int32 = 100
	GetKVConfig                  int32 = 101
	DeleteKVConfig               int32 = 102
	WipeWritePermOfBroker        int32 = 205
	RegisterTopicInNameServer    int32 = 217
	GetKVListByNamespace         int32 = 219
	GetTopicsByCluster           int32 = 224
	GetSystemTopicListFromNS     int32 = 304
	GetUnitTopicList             int32 = 311
	GetHasUnitSubTopicList       int32 = 312
	GetHasUnitSubUnUnitTopicList int32 = 313
	UpdateNamesrvConfig          int32 = 318
	GetNamesrvConfig             int32 = 319
	AddWritePermOfBroker         int32 = 327
)

// Topic system flag bits (RocketMQ's TopicSysFlag), as in
// QueueData.TopicSysFlag.
const (
	TopicSysFlagUnit    = 1 << 0
	TopicSysFlagUnitSub = 1 << 1
)

// OrderTopicConfigNamespace is the key-value namespace whose entries
// (topic -> "brokerName:queueNums;...") a name server returns to every
// registering broker (RocketMQ's NAMESPACE_ORDER_TOPIC_CONFIG).
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// fieldFullTopicTable is raftmq's own REGISTER_BROKER ext field; an Apache
// name server ignores it.
const fieldFullTopicTable = "raftmqFullTopicTable"

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
	// FullTopicTable (raftmqFullTopicTable, raftmq's own field) says the
	// body lists every topic of the broker name, so a topic it leaves out
	// was deleted. Apache brokers send some registrations with only the
	// topics just created (registerIncrementBrokerData) and never set it.
	FullTopicTable bool
}

// Encode returns the ext fields.
func (h *RegisterBrokerRequestHeader) Encode() map[string]string {
	w := newExtMap(8)
	w.str("brokerName", h.BrokerName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("clusterName", h.ClusterName)
	w.str("haServerAddr", h.HAServerAddr)
	w.i64("brokerId", h.BrokerID)
	w.optI64("heartbeatTimeoutMillis", h.HeartbeatTimeoutMillis)
	w.boolean("compressed", false)
	w.i32("bodyCrc32", h.BodyCRC32)
	w.optBool(fieldFullTopicTable, h.FullTopicTable)
	return w.m
}

// DecodeRegisterBrokerRequestHeader decodes a REGISTER_BROKER header. A
// compressed registration (compressed=true, a zlib stream) is refused.
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
		FullTopicTable:         r.boolean(fieldFullTopicTable, false),
	}
	if r.boolean("compressed", false) && r.err == nil {
		r.fail("compressed", "compressed registrations are not supported")
	}
	return h, r.err
}

// BodyCRC32 is the checksum REGISTER_BROKER carries for its body.
func BodyCRC32(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

// RegisterBrokerResponseHeader is the header of a REGISTER_BROKER answer:
// for a registration of a broker id other than 0, the master's address and
// its HA address (empty when the broker name has no master).
type RegisterBrokerResponseHeader struct {
	HAServerAddr string // haServerAddr
	MasterAddr   string // masterAddr
}

// Encode returns the ext fields.
func (h *RegisterBrokerResponseHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.optStr("haServerAddr", h.HAServerAddr)
	w.optStr("masterAddr", h.MasterAddr)
	return w.m
}

// DecodeRegisterBrokerResponseHeader decodes a REGISTER_BROKER answer's
// header.
func DecodeRegisterBrokerResponseHeader(ext map[string]string) (RegisterBrokerResponseHeader, error) {
	r := extReader{ext: ext}
	h := RegisterBrokerResponseHeader{HAServerAddr: r.str("haServerAddr", false), MasterAddr: r.str("masterAddr", false)}
	return h, r.err
}

// UnregisterBrokerRequestHeader is the header of UNREGISTER_BROKER, and of
// QUERY_DATA_VERSION, which has the same fields.
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

// DecodeUnregisterBrokerRequestHeader decodes an UNREGISTER_BROKER or
// QUERY_DATA_VERSION header.
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

// QueryDataVersionResponseHeader is the header of a QUERY_DATA_VERSION
// answer: whether the broker's data version differs from the one the name
// server holds (or it holds none). The body is the held DataVersion.
type QueryDataVersionResponseHeader struct {
	Changed bool // changed
}

// Encode returns the ext fields.
func (h *QueryDataVersionResponseHeader) Encode() map[string]string {
	w := newExtMap(1)
	w.boolean("changed", h.Changed)
	return w.m
}

// DecodeQueryDataVersionResponseHeader decodes a QUERY_DATA_VERSION
// answer's header.
func DecodeQueryDataVersionResponseHeader(ext map[string]string) (QueryDataVersionResponseHeader, error) {
	r := extReader{ext: ext}
	h := QueryDataVersionResponseHeader{Changed: r.boolean("changed", true)}
	return h, r.err
}

// BrokerHeartbeatRequestHeader is the header of BROKER_HEARTBEAT (904),
// which renews a registration without resending it. RocketMQ's other
// fields (epoch, maxOffset, ...) serve its controller mode and are ignored.
type BrokerHeartbeatRequestHeader struct {
	ClusterName string // clusterName
	BrokerAddr  string // brokerAddr
	BrokerName  string // brokerName
	BrokerID    int64  // brokerId (optional)
}

// Encode returns the ext fields.
func (h *BrokerHeartbeatRequestHeader) Encode() map[string]string {
	w := newExtMap(4)
	w.str("clusterName", h.ClusterName)
	w.str("brokerAddr", h.BrokerAddr)
	w.str("brokerName", h.BrokerName)
	w.i64("brokerId", h.BrokerID)
	return w.m
}

// DecodeBrokerHeartbeatRequestHeader decodes a BROKER_HEARTBEAT header.
func DecodeBrokerHeartbeatRequestHeader(ext map[string]string) (BrokerHeartbeatRequestHeader, error) {
	r := extReader{ext: ext}
	h := BrokerHeartbeatRequestHeader{
		ClusterName: r.str("clusterName", true),
		BrokerAddr:  r.str("brokerAddr", true),
		BrokerName:  r.str("brokerName", true),
		BrokerID:    r.i64("brokerId", false),
	}
	return h, r.err
}

// DeleteTopicInNamesrvRequestHeader is the header of
// DELETE_TOPIC_IN_NAMESRV (216): the topic leaves every route, or only the
// broker names of ClusterName when it is set.
type DeleteTopicInNamesrvRequestHeader struct {
	Topic       string // topic
	ClusterName string // clusterName (optional)
}

// Encode returns the ext fields.
func (h *DeleteTopicInNamesrvRequestHeader) Encode() map[string]string {
	w := newExtMap(2)
	w.str(fieldTopic, h.Topic)
	w.optStr("clusterName", h.ClusterName)
	return w.m
}

// DecodeDeleteTopicInNamesrvRequestHeader decodes a
// DELETE_TOPIC_IN_NAMESRV header.
func DecodeDeleteTopicInNamesrvRequestHeader(ext map[string]string) (DeleteTopicInNamesrvRequestHeader, error) {
	r := extReader{ext: ext}
	h := DeleteTopicInNamesrvRequestHeader{Topic: r.str(fieldTopic, true), ClusterName: r.str("clusterName", false)}
	return h, r.err
}

// RegisterTopicRequestHeader is the header of REGISTER_TOPIC_IN_NAMESRV
// (217); the body is a TopicRouteData whose queueDatas are added to the
// topic's route.
type RegisterTopicRequestHeader struct {
	Topic string // topic
}

// Encode returns the ext fields.
func (h *RegisterTopicRequestHeader) Encode() map[string]string {
	return map[string]string{fieldTopic: h.Topic}
}

// DecodeRegisterTopicRequestHeader decodes a REGISTER_TOPIC_IN_NAMESRV
// header.
func DecodeRegisterTopicRequestHeader(ext map[string]string) (RegisterTopicRequestHeader, error) {
	r := extReader{ext: ext}
	h := RegisterTopicRequestHeader{Topic: r.str(fieldTopic, true)}
	return h, r.err
}

// BrokerNameRequestHeader is the header of WIPE_WRITE_PERM_OF_BROKER (205)
// and ADD_WRITE_PERM_OF_BROKER (327).
type BrokerNameRequestHeader struct {
	BrokerName string // brokerName
}

// Encode returns the ext fields.
func (h *BrokerNameRequestHeader) Encode() map[string]string {
	return map[string]string{"brokerName": h.BrokerName}
}

// DecodeBrokerNameRequestHeader decodes a WIPE_WRITE_PERM_OF_BROKER or
// ADD_WRITE_PERM_OF_BROKER header.
func DecodeBrokerNameRequestHeader(ext map[string]string) (BrokerNameRequestHeader, error) {
	r := extReader{ext: ext}
	h := BrokerNameRequestHeader{BrokerName: r.str("brokerName", true)}
	return h, r.err
}

// WritePermResponseHeader is the header of a WIPE_WRITE_PERM_OF_BROKER
// answer (wipeTopicCount) or an ADD_WRITE_PERM_OF_BROKER answer
// (addTopicCount): how many topics' queues were changed.
type WritePermResponseHeader struct {
	TopicCount int32
}

// Encode returns the ext fields of the answer to a request of code
// WipeWritePermOfBroker or AddWritePermOfBroker.
func (h *WritePermResponseHeader) Encode(code int32) map[string]string {
	w := newExtMap(1)
	w.i32(writePermCountField(code), h.TopicCount)
	return w.m
}

// DecodeWritePermResponseHeader decodes the answer to a request of code
// WipeWritePermOfBroker or AddWritePermOfBroker.
func DecodeWritePermResponseHeader(code int32, ext map[string]string) (WritePermResponseHeader, error) {
	r := extReader{ext: ext}
	h := WritePermResponseHeader{TopicCount: r.i32(writePermCountField(code), true)}
	return h, r.err
}

func writePermCountField(code int32) string {
	if code == AddWritePermOfBroker {
		return "addTopicCount"
	}
	return "wipeTopicCount"
}

// KVConfigRequestHeader is the header of PUT_KV_CONFIG (100; all three
// fields required), GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102)
// (namespace and key), and GET_KVLIST_BY_NAMESPACE (219; namespace).
type KVConfigRequestHeader struct {
	Namespace string // namespace
	Key       string // key
	Value     string // value
}

// Encode returns the ext fields, leaving out empty ones.
func (h *KVConfigRequestHeader) Encode() map[string]string {
	w := newExtMap(3)
	w.str("namespace", h.Namespace)
	w.optStr("key", h.Key)
	w.optStr("value", h.Value)
	return w.m
}

// DecodeKVConfigRequestHeader decodes the header of a request of code
// PutKVConfig, GetKVConfig, DeleteKVConfig or GetKVListByNamespace,
// requiring the fields that code's Java header requires.
func DecodeKVConfigRequestHeader(code int32, ext map[string]string) (KVConfigRequestHeader, error) {
	r := extReader{ext: ext}
	h := KVConfigRequestHeader{
		Namespace: r.str("namespace", true),
		Key:       r.str("key", code != GetKVListByNamespace),
		Value:     r.str("value", code == PutKVConfig),
	}
	return h, r.err
}

// GetKVConfigResponseHeader is the header of a GET_KV_CONFIG answer.
type GetKVConfigResponseHeader struct {
	Value string // value
}

// Encode returns the ext fields.
func (h *GetKVConfigResponseHeader) Encode() map[string]string {
	return map[string]string{"value": h.Value}
}

// GetTopicsByClusterRequestHeader is the header of GET_TOPICS_BY_CLUSTER
// (224).
type GetTopicsByClusterRequestHeader struct {
	Cluster string // cluster
}

// Encode returns the ext fields.
func (h *GetTopicsByClusterRequestHeader) Encode() map[string]string {
	return map[string]string{"cluster": h.Cluster}
}

// DecodeGetTopicsByClusterRequestHeader decodes a GET_TOPICS_BY_CLUSTER
// header.
func DecodeGetTopicsByClusterRequestHeader(ext map[string]string) (GetTopicsByClusterRequestHeader, error) {
	r := extReader{ext: ext}
	h := GetTopicsByClusterRequestHeader{Cluster: r.str("cluster", true)}
	return h, r.err
}

// DataVersion is RocketMQ's DataVersion of a broker's config. raftmq puts
// the raft term in StateVersion, so that a name server can refuse a stale
// leader's registration. Two versions are equal when all three fields are.
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// RegisterBrokerBody is the (uncompressed) body of REGISTER_BROKER:
//
//	{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{...TopicConfig...}},
//	  "dataVersion":{"stateVersion":3,"timestamp":1700000000000,"counter":1},
//	  "topicQueueMappingInfoMap":{}},"filterServerList":[]}
//
// Topic configs stay raw JSON here: they are RocketMQ's TopicConfig, which
// package offsets reads and writes.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper struct {
		TopicConfigTable map[string]json.RawMessage `json:"topicConfigTable"`
		DataVersion      DataVersion                `json:"dataVersion"`
		// TopicQueueMappingInfoMap is for static topics, which raftmq
		// does not have; Apache 5 brokers send it, raftmq sends {}.
		TopicQueueMappingInfoMap map[string]json.RawMessage `json:"topicQueueMappingInfoMap,omitempty"`
	} `json:"topicConfigSerializeWrapper"`
	FilterServerList []string `json:"filterServerList"`
}

// ClusterInfo is the body of a GET_BROKER_CLUSTER_INFO answer: every
// broker name with its addresses, and every cluster's broker names.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// MarshalJSON writes nil tables as {}.
func (c ClusterInfo) MarshalJSON() ([]byte, error) {
	type plain ClusterInfo
	p := plain(c)
	if p.BrokerAddrTable == nil {
		p.BrokerAddrTable = map[string]BrokerData{}
	}
	if p.ClusterAddrTable == nil {
		p.ClusterAddrTable = map[string][]string{}
	}
	return json.Marshal(p)
}

// TopicList is the body of the topic-list answers (206, 224, 304,
// 311-313). BrokerAddr is set only by GET_SYSTEM_TOPIC_LIST_FROM_NS: the
// address of some broker, which an admin tool asks for the broker-side
// system topics.
type TopicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
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

// KVTable is the body of a GET_KVLIST_BY_NAMESPACE answer, and of a
// REGISTER_BROKER answer (the ORDER_TOPIC_CONFIG namespace) when that
// namespace has entries.
type KVTable struct {
	Table map[string]string `json:"table"`
}

// MarshalJSON writes a nil table as {}.
func (t KVTable) MarshalJSON() ([]byte, error) {
	type plain KVTable
	p := plain(t)
	if p.Table == nil {
		p.Table = map[string]string{}
	}
	return json.Marshal(p)
}
