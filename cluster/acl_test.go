package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/protocol/remoting"
	"github.com/raftmq/raftmq/store"
)

const testACL = `
globalWhiteRemoteAddresses:
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - T=PUB|SUB
  - accessKey: operator
    secretKey: operator-secret
    admin: true
`

// signed returns req signed with creds (a copy of its ext fields).
func signed(req *remoting.Command, creds acl.Credentials) *remoting.Command {
	out := *req
	out.ExtFields = creds.SignFields(req.ExtFields, req.Body)
	return &out
}

// With --acl-file, the group takes the file's ACL through the log and every
// node enforces it: unsigned and unpermitted requests are refused with
// NO_PERMISSION, signed ones go through (through a follower too), admin
// requests need an admin account, and an ACL update (code 50) reaches
// every node.
func TestACLEnforcedThroughTheLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o644))
	key := acl.NewKey()
	tb := startBrokersWith(t, func(c *Config) { c.ACLFile, c.ACLKey = file, key })
	l := tb.leader()
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if blob, _ := b.Replica().Store().ACL(); len(blob) == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the file's ACL reaches every node through the log")

	producer := acl.Credentials{AccessKey: "producer1", SecretKey: "producer-secret"}
	operator := acl.Credentials{AccessKey: "operator", SecretKey: "operator-secret"}
	lc := dial(t, l.ClientAddr())
	create := func(topic string) *remoting.Command {
		ch := remoting.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
		return remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil)
	}
	require.Equal(t, remoting.NoPermission, invoke(t, lc, create("T")).Code, "unsigned")
	resp := invoke(t, lc, signed(create("T"), producer))
	require.Equal(t, remoting.NoPermission, resp.Code, "not an admin")
	require.Contains(t, resp.Remark, "Need admin permission")
	require.Equal(t, remoting.Success, invoke(t, lc, signed(create("T"), operator)).Code)

	require.Equal(t, remoting.NoPermission, invoke(t, lc, sendCmd("T", 0, "x", "U0")).Code, "an unsigned send")
	require.Equal(t, remoting.Success, invoke(t, lc, signed(sendCmd("T", 0, "x", "U1"), producer)).Code)
	bad := acl.Credentials{AccessKey: "producer1", SecretKey: "wrong"}
	resp = invoke(t, lc, signed(sendCmd("T", 0, "x", "U2"), bad))
	require.Equal(t, remoting.NoPermission, resp.Code)
	require.Contains(t, resp.Remark, "Check signature failed")
	fc := dial(t, tb.follower().ClientAddr())
	require.Equal(t, remoting.Success, invoke(t, fc, signed(sendCmd("T", 0, "y", "U3"), producer)).Code, "forwarded by a follower")
	require.Equal(t, remoting.NoPermission, invoke(t, fc, signed(sendCmd("Other", 0, "y", "U4"), producer)).Code, "a topic the account may not write")

	// The leader asks its members for their status on its own behalf,
	// signed with the ACL's admin account: every member answers.
	view, err := l.AdminCluster(t.Context())
	require.NoError(t, err)
	for _, m := range view.Members {
		require.True(t, m.Reachable, "member %d: %s", m.ID, m.Error)
	}

	// An operator adds an account through any node; every node knows it.
	upd := remoting.NewRequest(acl.UpdateAndCreateACLConfig, map[string]string{"accessKey": "latecomer", "secretKey": "late-secret-1",
		"admin": "false", "defaultTopicPerm": "PUB"}, nil)
	require.Equal(t, remoting.NoPermission, invoke(t, fc, signed(upd, producer)).Code)
	resp = invoke(t, fc, signed(upd, operator))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	late := acl.Credentials{AccessKey: "latecomer", SecretKey: "late-secret-1"}
	for _, b := range tb.bs {
		c := dial(t, b.ClientAddr())
		require.Eventually(t, func() bool {
			return invoke(t, c, signed(sendCmd("T", 0, "z", "U5"), late)).Code == remoting.Success
		}, 5*time.Second, 20*time.Millisecond, "node %d takes the new account", b.cfg.ID)
	}

	// The accounts, asked of a follower right after the change: the new
	// one is there (read barrier), no secret is; admin accounts only.
	info := remoting.NewRequest(acl.GetBrokerClusterACLInfo, map[string]string{remoting.FieldAdminView: remoting.AdminViewJSON}, nil)
	require.Equal(t, remoting.NoPermission, invoke(t, fc, signed(info, producer)).Code, "not an admin")
	info = remoting.NewRequest(acl.GetBrokerClusterACLInfo, map[string]string{remoting.FieldAdminView: remoting.AdminViewJSON}, nil)
	resp = invoke(t, fc, signed(info, operator))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	for _, secret := range []string{"secretKey", "producer-secret", "operator-secret", "late-secret-1"} {
		require.NotContains(t, string(resp.Body), secret)
	}
	var v AdminACL
	require.NoError(t, json.Unmarshal(resp.Body, &v))
	require.True(t, v.Enabled)
	names := map[string]bool{}
	for _, a := range v.Accounts {
		names[a.AccessKey] = a.Admin
	}
	require.Equal(t, map[string]bool{"producer1": false, "operator": true, "latecomer": false}, names)
}

// With the ACL on, route queries are answered without the signature check,
// as RocketMQ's name server answers them, so that a client with a wrong
// secret (or none) reaches the broker and hears why its send is refused,
// instead of "route info not found". The send itself is refused with
// NO_PERMISSION naming the access key and the reason.
func TestACLRoutesOpenSendsRefusedWithTheReason(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o644))
	key := acl.NewKey() // the group's: the same on every node
	tb := startBrokersWith(t, func(c *Config) { c.ACLFile, c.ACLKey = file, key })
	l := tb.leader()
	operator := acl.Credentials{AccessKey: "operator", SecretKey: "operator-secret"}
	lc := dial(t, l.ClientAddr())
	ch := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}
	require.Eventually(t, func() bool {
		return invoke(t, lc, signed(remoting.NewRequest(remoting.UpdateAndCreateTopic, ch.Encode(), nil), operator)).Code == remoting.Success
	}, 10*time.Second, 20*time.Millisecond, "the file's ACL in force, the operator creates T")

	bad := acl.Credentials{AccessKey: "producer1", SecretKey: "wrong"}
	route := func(topic string) *remoting.Command {
		return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	}
	f := tb.follower()
	require.Eventually(t, func() bool { _, ok := f.Replica().Store().Topic("T"); return ok }, 5*time.Second, 5*time.Millisecond)
	for _, b := range []*Broker{l, f} {
		c := dial(t, b.ClientAddr())
		for name, req := range map[string]*remoting.Command{"wrong secret": signed(route("T"), bad), "unsigned": route("T")} {
			resp := invoke(t, c, req)
			require.Equal(t, remoting.Success, resp.Code, "node %d, %s: %s", b.cfg.ID, name, resp.Remark)
			rd, err := remoting.DecodeTopicRouteData(resp.Body)
			require.NoError(t, err)
			require.Equal(t, 2, rd.QueueDatas[0].WriteQueueNums)
		}
		// A topic the node does not know: asked of the leader by a
		// follower, and answered TOPIC_NOT_EXIST, not refused.
		resp := invoke(t, c, signed(route("Missing"), bad))
		require.Equal(t, remoting.TopicNotExist, resp.Code, "node %d: %s", b.cfg.ID, resp.Remark)

		resp = invoke(t, c, signed(sendCmd("T", 0, "x", "W1"), bad))
		require.Equal(t, remoting.NoPermission, resp.Code, "node %d: %s", b.cfg.ID, resp.Remark)
		require.Contains(t, resp.Remark, "Check signature failed for accessKey=producer1")
		h := remoting.PullMessageRequestHeader{ConsumerGroup: "g", Topic: "T", QueueID: 0, MaxMsgNums: 1}
		resp = invoke(t, c, signed(remoting.NewRequest(remoting.PullMessage, h.Encode(), nil), bad))
		require.Equal(t, remoting.NoPermission, resp.Code, "node %d: %s", b.cfg.ID, resp.Remark)
		require.Contains(t, resp.Remark, "Check signature failed for accessKey=producer1")
	}
}

// requireNotIn requires that no file under dir holds any of the secrets.
func requireNotIn(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, s := range secrets {
			require.False(t, bytes.Contains(b, []byte(s)), "%s holds the secret key %q", path, s)
		}
		return nil
	}))
	require.Greater(t, n, 3, "files under %s", dir)
}

// The secret keys of the ACL are sealed with the group's ACL key in the
// log, the state and snapshots: no file of a node's data directory holds
// one (those of the --acl-file, and one added by an operator), while
// every node, restarted, still checks signatures with them. An ACL
// written before secrets were sealed (a plaintext secret in the log)
// still applies. A node with another ACL key refuses every request.
func TestACLSecretsSealed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(testACL), 0o600))
	key := acl.NewKey()
	tb := startBrokersWith(t, func(c *Config) { c.ACLFile, c.ACLKey = file, key })
	require.Eventually(t, func() bool {
		for _, b := range tb.bs {
			if blob, _ := b.Replica().Store().ACL(); len(blob) == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the file's ACL reaches every node through the log")
	operator := acl.Credentials{AccessKey: "operator", SecretKey: "operator-secret"}
	const secret = "Sx9-latecomer-secret-4711"
	late := acl.Credentials{AccessKey: "latecomer", SecretKey: secret}
	upd := remoting.NewRequest(acl.UpdateAndCreateACLConfig, map[string]string{"accessKey": "latecomer", "secretKey": secret,
		"admin": "false", "defaultTopicPerm": "PUB"}, nil)
	resp := invoke(t, dial(t, tb.follower().ClientAddr()), signed(upd, operator))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	short := remoting.NewRequest(acl.UpdateAndCreateACLConfig, map[string]string{"accessKey": "shortone", "secretKey": "short"}, nil)
	resp = invoke(t, dial(t, tb.leader().ClientAddr()), signed(short, operator))
	require.Equal(t, acl.UpdateAndCreateACLConfigFailed, resp.Code, "a secret key too short is refused before it is sealed")
	require.Contains(t, resp.Remark, "shorter than 7")

	// An ACL entry of an older raftmq: the secret key in plaintext.
	const oldSecret = "Py7-plaintext-secret-0815"
	old := acl.Credentials{AccessKey: "oldtimer", SecretKey: oldSecret}
	js, err := json.Marshal(acl.Update{Op: acl.OpPutAccount, AccessKey: "oldtimer", SecretKey: ptr(oldSecret), DefaultTopicPerm: ptr(acl.Pub)})
	require.NoError(t, err)
	require.NoError(t, tb.leader().exec(t.Context(), &store.Command{Op: store.OpACL, ACL: js}))

	topic := remoting.CreateTopicRequestHeader{Topic: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	require.Equal(t, remoting.Success, invoke(t, dial(t, tb.leader().ClientAddr()),
		signed(remoting.NewRequest(remoting.UpdateAndCreateTopic, topic.Encode(), nil), operator)).Code)
	sends := func(what string) {
		t.Helper()
		for _, b := range tb.bs {
			c := dial(t, b.ClientAddr())
			for i, cr := range []acl.Credentials{late, old, operator} {
				require.Eventually(t, func() bool {
					return invoke(t, c, signed(sendCmd("T", 0, "x", fmt.Sprintf("%s-%d-%d", what, b.cfg.ID, i)), cr)).Code == remoting.Success
				}, 5*time.Second, 20*time.Millisecond, "%s: node %d checks %s's signature", what, b.cfg.ID, cr.AccessKey)
			}
			bad := acl.Credentials{AccessKey: "latecomer", SecretKey: "not-the-secret"}
			require.Equal(t, remoting.NoPermission, invoke(t, c, signed(sendCmd("T", 0, "x", what+"-bad"), bad)).Code)
		}
	}
	sends("before restart")

	_, snap, err := tb.leader().Replica().Store().Snapshot()
	require.NoError(t, err)
	require.False(t, bytes.Contains(snap, []byte(secret)), "a snapshot holds the secret key")
	require.True(t, bytes.Contains(snap, []byte(oldSecret)), "the plaintext entry's secret stays as it was (the test's control)")
	for id, b := range tb.bs {
		require.NoError(t, b.Close())
		requireNotIn(t, tb.dirs[id], secret, "operator-secret", "producer-secret")
	}
	for id := range tb.dirs {
		tb.start(id)
	}
	sends("after restart")

	// A node with another ACL key cannot open the secrets: it refuses
	// every request rather than serve without the ACL.
	f := tb.follower()
	require.NoError(t, f.Close())
	tb.mod = func(c *Config) { c.ACLFile, c.ACLKey = file, acl.NewKey() }
	tb.start(f.cfg.ID)
	resp = invoke(t, dial(t, tb.bs[f.cfg.ID].ClientAddr()), signed(sendCmd("T", 0, "x", "wrong-key"), operator))
	require.Equal(t, remoting.NoPermission, resp.Code, resp.Remark)
}

func ptr[T any](v T) *T { return &v }
