package remoting

// Request codes (RocketMQ's RequestCode). They are part of the wire format.
const (
	SendMessage                      int32 = 10
	PullMessage                      int32 = 11
	QueryMessage                     int32 = 12
	QueryConsumerOffset              int32 = 14
	UpdateConsumerOffset             int32 = 15
	UpdateAndCreateTopic             int32 = 17
	GetAllTopicConfig                int32 = 21
	SearchOffsetByTimestamp          int32 = 29
	GetMaxOffset                     int32 = 30
	GetMinOffset                     int32 = 31
	ViewMessageByID                  int32 = 33
	HeartBeat                        int32 = 34
	UnregisterClient                 int32 = 35
	ConsumerSendMsgBack              int32 = 36
	EndTransaction                   int32 = 37
	GetConsumerListByGroup           int32 = 38
	CheckTransactionState            int32 = 39 // broker -> client
	NotifyConsumerIDsChanged         int32 = 40 // broker -> client
	LockBatchMQ                      int32 = 41
	UnlockBatchMQ                    int32 = 42
	CheckClientConfig                int32 = 46
	RegisterBroker                   int32 = 103 // broker -> name server
	UnregisterBroker                 int32 = 104 // broker -> name server
	GetRouteInfoByTopic              int32 = 105 // client -> name server
	GetBrokerClusterInfo             int32 = 106 // admin -> name server
	UpdateAndCreateSubscriptionGroup int32 = 200
	GetAllSubscriptionGroupConfig    int32 = 201
	GetAllTopicListFromNameServer    int32 = 206
	DeleteSubscriptionGroup          int32 = 207
	DeleteTopicInBroker              int32 = 215
	DeleteTopicInNameServer          int32 = 216
	ResetConsumerClientOffset        int32 = 220 // broker -> client
	GetConsumerStatusFromClient      int32 = 221 // broker -> client
	GetConsumerRunningInfo           int32 = 307 // broker -> client
	ConsumeMessageDirectly           int32 = 309 // broker -> client
	SendMessageV2                    int32 = 310
	SendBatchMessage                 int32 = 320
	QueryDataVersion                 int32 = 322 // broker -> name server
	SendReplyMessage                 int32 = 324
	SendReplyMessageV2               int32 = 325
	PushReplyMessageToClient         int32 = 326 // broker -> client
	LitePullMessage                  int32 = 361 // same header as PullMessage
	RecallMessage                    int32 = 370 // header producerGroup, topic, recallHandle
	QueryAssignment                  int32 = 400
	BrokerHeartbeat                  int32 = 904 // broker -> name server, 5.x controller mode
)

// raftmq's own admin request codes. They live in 9001..9010, a range no
// RocketMQ request code uses (RocketMQ's codes stop well below 9000), so an
// Apache server answers them REQUEST_CODE_NOT_SUPPORTED.
const (
	// ClusterStatus asks a node for the raft group's membership and roles.
	ClusterStatus int32 = 9001
	// TransferLeader asks the leader to hand leadership to another node.
	TransferLeader int32 = 9002
	// AddNode adds a node to the raft group.
	AddNode int32 = 9003
	// RemoveNode removes a node from the raft group.
	RemoveNode int32 = 9004
	// Fault injects a fault into a node (test clusters only).
	Fault int32 = 9005

	// AdminCodeMin and AdminCodeMax bound the range reserved for raftmq's
	// admin codes.
	AdminCodeMin int32 = 9001
	AdminCodeMax int32 = 9010
)

// DeadLetterMessage (9011) is raftmq's own pop request, outside RocketMQ's
// codes and outside the admin range (a consumer's request: SUB on its
// group and topic): ACK_MESSAGE's header, and the message the receipt
// names goes to the group's dead-letter topic instead of being acked
// (RocketMQ 5's ForwardMessageToDeadLetterQueue, which the gRPC service
// sends this way so that a follower forwards it like an ack). A code of
// its own, not a field of ACK_MESSAGE, so that a node whose build does not
// serve it (an Apache broker, an older raftmq leader) answers
// REQUEST_CODE_NOT_SUPPORTED instead of acking without the copy.
const DeadLetterMessage int32 = 9011

// Response codes (RocketMQ's RemotingSysResponseCode and ResponseCode).
const (
	Success                    int32 = 0
	SystemError                int32 = 1 // send: both clients retry
	SystemBusy                 int32 = 2 // send: Java retries, Go does not
	RequestCodeNotSupported    int32 = 3
	TransactionFailed          int32 = 4
	FlushDiskTimeout           int32 = 10 // send: stored, reported as sent
	SlaveNotAvailable          int32 = 11 // send: stored, reported as sent
	FlushSlaveTimeout          int32 = 12 // send: stored, reported as sent
	MessageIllegal             int32 = 13
	ServiceNotAvailable        int32 = 14 // send: both clients retry
	VersionNotSupported        int32 = 15
	NoPermission               int32 = 16 // send: both clients retry
	TopicNotExist              int32 = 17 // send: both clients retry
	TopicExistAlready          int32 = 18
	PullNotFound               int32 = 19
	PullRetryImmediately       int32 = 20
	PullOffsetMoved            int32 = 21
	QueryNotFound              int32 = 22
	SubscriptionParseFailed    int32 = 23
	SubscriptionNotExist       int32 = 24
	SubscriptionNotLatest      int32 = 25
	SubscriptionGroupNotExist  int32 = 26
	FilterDataNotExist         int32 = 27
	FilterDataNotLatest        int32 = 28
	InvalidParameter           int32 = 29
	TransactionShouldCommit    int32 = 200
	TransactionShouldRollback  int32 = 201
	TransactionStateUnknow     int32 = 202 // sic, as RocketMQ spells it
	TransactionStateGroupWrong int32 = 203
	ConsumerNotOnline          int32 = 206
	FlowControl                int32 = 215
	NotLeaderForQueue          int32 = 501
	IllegalOperation           int32 = 604
	GoAway                     int32 = 1500
)

// Topic permission bits (RocketMQ's PermName), as in QueueData.Perm.
const (
	PermPriority = 8
	PermRead     = 4
	PermWrite    = 2
	PermInherit  = 1
)

// MasterID is the broker id of the master (here: the raft leader) in
// BrokerData.BrokerAddrs. Producers write only to it.
const MasterID int64 = 0

// Pull request sysFlag bits (RocketMQ's PullSysFlag), as in
// PullMessageRequestHeader.SysFlag.
const (
	// PullSysFlagCommitOffset: store CommitOffset for the group and queue.
	PullSysFlagCommitOffset int32 = 1 << 0
	// PullSysFlagSuspend: the broker may hold the request (long polling).
	PullSysFlagSuspend int32 = 1 << 1
	// PullSysFlagSubscription: use Subscription and ExpressionType from the
	// request instead of the group's heartbeat subscription.
	PullSysFlagSubscription int32 = 1 << 2
	// PullSysFlagClassFilter: class filter mode (obsolete).
	PullSysFlagClassFilter int32 = 1 << 3
	// PullSysFlagLitePull: sent by Java's lite pull consumer.
	PullSysFlagLitePull int32 = 1 << 4
)
