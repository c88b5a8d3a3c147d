// Package acl is RocketMQ's plain ACL (ACL 1.0, the acl module of RocketMQ
// 4.x and 5.0-5.2) for raftmq: request signatures, the plain_acl.yml
// configuration, and the decision whether a request may pass.
//
// # Signatures
//
// A client with credentials adds the ext fields AccessKey, Signature and,
// if it has one, SecurityToken to every request. Signature is
// Base64(HmacSHA1(secretKey, values of all other ext fields sorted by
// key, concatenated, then the body)): Sign computes it, Credentials.SignFields
// adds the three fields, Verify checks one in constant time, tolerating
// the differences between RocketMQ's Java client, its Go client and the
// 1.0 server (_UNIQUE_KEY_QUERY signed or not, a security token's value
// signed or not).
//
// # Configuration
//
// Config is what plain_acl.yml holds: globalWhiteRemoteAddresses and
// accounts, each with accessKey, secretKey, whiteRemoteAddress, admin,
// defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms (DENY,
// PUB, SUB, PUB|SUB). ParseYAML reads the file strictly (unknown keys,
// bad perms and bad address patterns are errors with their line);
// json.Marshal and ParseJSON carry a Config whole, for raft snapshots.
// AddrPattern lists the address patterns.
//
// Changes come as Update values (UpdateFromRequest reads them from the
// UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG and
// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG requests; OpReplace installs a whole
// Config, such as one read from a file); Config.Apply returns the
// changed Config without touching the old one, deterministically, so
// that every node that applies the same updates in the same order holds
// the same ACL.
//
// # Sealed secrets
//
// Box seals secret keys with a group's ACL key (AES-256-GCM, the access
// key as additional data) so that the replicated ACL, and so the log,
// holds them encrypted; Box.SealUpdate seals an Update's, Box.OpenConfig
// opens a Config's; plaintext secrets pass through. seal.go has the
// format.
//
// # Decisions
//
// NewPolicy compiles a Config; Policy.Check decides a request from its
// remote address, code, ext fields and body, in RocketMQ's order, with
// RocketMQ's messages (DeniedError). Resources says which topics and
// groups a request code touches and with which perm; NeedsAdmin which
// requests need an admin account (RocketMQ's five admin codes plus
// raftmq's membership, leadership, fault, topic deletion, ACL and offset
// reset requests). NameServerRead is the one request let through
// unchecked: a route query (GET_ROUTEINFO_BY_TOPIC), which RocketMQ's name
// server answers to anyone, so that a client whose keys are wrong reaches
// the broker and hears the reason its send is refused.
package acl
