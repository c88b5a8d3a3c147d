package acl

import (
	"strings"

	"github.com/raftmq/raftmq/protocol/remoting"
)

// RocketMQ 4.x ACL admin request codes (RequestCode in 4.9.x; gone from
// RocketMQ 5.3), and their failure response codes. protocol/remoting does
// not define them.
const (
	// UpdateAndCreateACLConfig (UPDATE_AND_CREATE_ACL_CONFIG): header
	// accessKey, secretKey, whiteRemoteAddress, admin, defaultTopicPerm,
	// defaultGroupPerm, topicPerms, groupPerms. See UpdateFromRequest.
	UpdateAndCreateACLConfig int32 = 50
	// DeleteACLConfig (DELETE_ACL_CONFIG): header accessKey.
	DeleteACLConfig int32 = 51
	// GetBrokerClusterACLInfo (GET_BROKER_CLUSTER_ACL_INFO): no header.
	GetBrokerClusterACLInfo int32 = 52
	// UpdateGlobalWhiteAddrsConfig (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG):
	// header globalWhiteAddrs (comma list), aclFileFullPath.
	UpdateGlobalWhiteAddrsConfig int32 = 53
	// GetBrokerClusterACLConfig (GET_BROKER_CLUSTER_ACL_CONFIG, 4.6-4.9.0):
	// the whole ACL, secrets included, as JSON.
	GetBrokerClusterACLConfig int32 = 54
	// UpdateBrokerConfig (UPDATE_BROKER_CONFIG) is one of RocketMQ's
	// admin codes (served in cluster/brokerconfig.go).
	UpdateBrokerConfig int32 = 25

	// Response codes of failed ACL updates.
	UpdateAndCreateACLConfigFailed     int32 = 209
	DeleteACLConfigFailed              int32 = 210
	UpdateGlobalWhiteAddrsConfigFailed int32 = 211
)

// adminCodes are the request codes only admin accounts may send:
// RocketMQ's Permission.ADMIN_CODE (17, 25, 200, 207, 215) and, for
// raftmq, DELETE_TOPIC_IN_NAMESRV (216, which raftmq's nodes serve like
// 215), the ACL codes 50-54, and raftmq's own admin codes except
// CLUSTER_STATUS (9001, read-only): TRANSFER_LEADER, ADD_NODE,
// REMOVE_NODE, FAULT and the rest of the range reserved for them, so that
// codes added there later are admin-only until someone decides otherwise.
// An UPDATE_CONSUMER_OFFSET with raftmqReset=true (an offset reset, which
// may move an offset back) is admin-only too, and so is
// INVOKE_BROKER_TO_RESET_OFFSET (222, reset by time: RocketMQ's ACL 1.0
// lets any account with the group's permission send it); see NeedsAdmin.
var adminCodes = func() map[int32]bool {
	m := map[int32]bool{
		remoting.UpdateAndCreateTopic:             true,
		UpdateBrokerConfig:                        true,
		remoting.UpdateAndCreateSubscriptionGroup: true,
		remoting.DeleteSubscriptionGroup:          true,
		remoting.DeleteTopicInBroker:              true,
		remoting.DeleteTopicInNameServer:          true,
		remoting.InvokeBrokerToResetOffset:        true,
		UpdateAndCreateACLConfig:                  true,
		DeleteACLConfig:                           true,
		GetBrokerClusterACLInfo:                   true,
		UpdateGlobalWhiteAddrsConfig:              true,
		GetBrokerClusterACLConfig:                 true,
		// WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER,
		// CLEAN_EXPIRED_CONSUMEQUEUE, DELETE_EXPIRED_COMMITLOG: raftmq's
		// nodes serve them and they change the group or delete files.
		205: true, 327: true, 306: true, 329: true,
	}
	for c := remoting.AdminCodeMin; c <= remoting.AdminCodeMax; c++ {
		m[c] = c != remoting.ClusterStatus
	}
	return m
}()

// NameServerRead reports whether a request with that code is a name
// server's read that Policy.Check lets through unchecked: only
// GET_ROUTEINFO_BY_TOPIC (105), which a raftmq node answers for clients
// that use the group's nodes as name servers. RocketMQ's name server checks
// no ACL, so a RocketMQ client with a wrong secret, or none, gets its
// routes and then the broker's refusal with the reason; refusing the route
// query hid that reason behind "route info not found". What it reveals to
// anyone who can reach the port: whether a topic exists, its queue counts
// and permission, and the group's broker names and addresses. Other name
// server reads (GET_BROKER_CLUSTER_INFO 106, the topic list 206) stay
// checked: clients do not need them, and the tools that do sign.
func NameServerRead(code int32) bool {
	return code == remoting.GetRouteInfoByTopic
}

// NeedsAdmin reports whether a request with that code and ext fields needs
// an admin account.
func NeedsAdmin(code int32, ext map[string]string) bool {
	// EqualFold: the broker reads the flag as Java's Boolean.parseBoolean.
	if code == remoting.UpdateConsumerOffset && strings.EqualFold(ext[remoting.FieldReset], "true") {
		return true
	}
	return adminCodes[code]
}
