package acl

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestApply(t *testing.T) {
	base, err := ParseYAML([]byte(sampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	baseJSON, _ := json.Marshal(base)
	cases := []struct {
		name  string
		u     Update
		check func(t *testing.T, c *Config)
		err   string
	}{
		{name: "create", u: Update{Op: OpPutAccount, AccessKey: "newAccount", SecretKey: ptr("newSecret"), DefaultTopicPerm: ptr(Pub),
			TopicPerms: &[]ResourcePerm{{"t1", Sub}}},
			check: func(t *testing.T, c *Config) {
				a, ok := c.Account("newAccount")
				want := Account{AccessKey: "newAccount", SecretKey: "newSecret", DefaultTopicPerm: Pub, DefaultGroupPerm: Deny, TopicPerms: []ResourcePerm{{"t1", Sub}}}
				if !ok || !reflect.DeepEqual(a, want) || c.Accounts[len(c.Accounts)-1].AccessKey != "newAccount" {
					t.Fatalf("%+v", c.Accounts)
				}
			}},
		{name: "create without secret", u: Update{Op: OpPutAccount, AccessKey: "newAccount"}, err: "needs a secret key"},
		{name: "create short key", u: Update{Op: OpPutAccount, AccessKey: "new", SecretKey: ptr("newSecret")}, err: "shorter than 7"},
		{name: "merge", u: Update{Op: OpPutAccount, AccessKey: "RocketMQ", Admin: ptr(true), GroupPerms: &[]ResourcePerm{}},
			check: func(t *testing.T, c *Config) {
				a, _ := c.Account("RocketMQ")
				if !a.Admin || a.GroupPerms != nil || a.SecretKey != "12345678" || len(a.TopicPerms) != 3 || a.DefaultGroupPerm != Sub || c.Accounts[0].AccessKey != "RocketMQ" {
					t.Fatalf("%+v", a)
				}
			}},
		{name: "change secret and white address", u: Update{Op: OpPutAccount, AccessKey: "rocketmq2", SecretKey: ptr("87654321"), WhiteRemoteAddress: ptr("")},
			check: func(t *testing.T, c *Config) {
				a, _ := c.Account("rocketmq2")
				if a.SecretKey != "87654321" || a.WhiteRemoteAddress != "" || !a.Admin {
					t.Fatalf("%+v", a)
				}
			}},
		{name: "bad white address", u: Update{Op: OpPutAccount, AccessKey: "rocketmq2", WhiteRemoteAddress: ptr("1.2.3")}, err: "whiteRemoteAddress"},
		{name: "bad perm value", u: Update{Op: OpPutAccount, AccessKey: "rocketmq2", DefaultTopicPerm: ptr(Any)}, err: "defaultTopicPerm"},
		{name: "delete", u: Update{Op: OpDeleteAccount, AccessKey: "RocketMQ"},
			check: func(t *testing.T, c *Config) {
				if _, ok := c.Account("RocketMQ"); ok || len(c.Accounts) != 1 {
					t.Fatalf("%+v", c.Accounts)
				}
			}},
		{name: "delete missing", u: Update{Op: OpDeleteAccount, AccessKey: "nobody12"}, err: "no such access key"},
		{name: "global white", u: Update{Op: OpSetGlobalWhite, GlobalWhiteRemoteAddresses: []string{"10.*"}},
			check: func(t *testing.T, c *Config) {
				if !reflect.DeepEqual(c.GlobalWhiteRemoteAddresses, []string{"10.*"}) {
					t.Fatalf("%v", c.GlobalWhiteRemoteAddresses)
				}
			}},
		{name: "global white cleared", u: Update{Op: OpSetGlobalWhite},
			check: func(t *testing.T, c *Config) {
				if c.GlobalWhiteRemoteAddresses != nil {
					t.Fatalf("%v", c.GlobalWhiteRemoteAddresses)
				}
			}},
		{name: "global white bad", u: Update{Op: OpSetGlobalWhite, GlobalWhiteRemoteAddresses: []string{"10.0.0.x"}}, err: "globalWhiteRemoteAddresses[0]"},
		{name: "unknown op", u: Update{Op: "grant"}, err: "unknown update op"},
		{name: "replace", u: Update{Op: OpReplace, Config: &Config{Accounts: []Account{{AccessKey: "onlyOne", SecretKey: "onlyOneSecret", DefaultTopicPerm: Deny, DefaultGroupPerm: Deny}}}},
			check: func(t *testing.T, c *Config) {
				a, ok := c.Account("onlyOne")
				if !ok || len(c.Accounts) != 1 || c.GlobalWhiteRemoteAddresses != nil || a.DefaultTopicPerm != Deny {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "replace invalid", u: Update{Op: OpReplace, Config: &Config{GlobalWhiteRemoteAddresses: []string{"x"}}}, err: "globalWhiteRemoteAddresses[0]"},
		{name: "replace nothing", u: Update{Op: OpReplace}, err: "without a config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The update travels as JSON, like a raft entry.
			// (A perm no config may hold does not even encode.)
			u := c.u
			if b, err := json.Marshal(c.u); err == nil {
				u = Update{}
				if err := json.Unmarshal(b, &u); err != nil || !reflect.DeepEqual(u, c.u) {
					t.Fatalf("update round trip: %v\n%+v\n%+v", err, u, c.u)
				}
			} else if c.err == "" {
				t.Fatal(err)
			}
			got, err := base.Apply(u)
			if after, _ := json.Marshal(base); string(after) != string(baseJSON) {
				t.Fatal("Apply modified its receiver")
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, got)
			// Deterministic: the same update gives the same bytes.
			again, _ := base.Apply(u)
			j1, _ := json.Marshal(got)
			j2, _ := json.Marshal(again)
			if string(j1) != string(j2) {
				t.Fatal("Apply is not deterministic")
			}
			// And the result survives the JSON encoding of the whole config.
			back, err := ParseJSON(j1)
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("config round trip: %v", err)
			}
		})
	}
	if _, err := base.Apply(Update{Op: OpDeleteAccount, AccessKey: "x"}); !errors.Is(err, ErrNoAccount) {
		t.Fatalf("%v", err)
	}
}

func TestPolicyApply(t *testing.T) {
	p := testPolicy(t)
	ext := sendV2("topicB", "pg")
	signed := Credentials{AccessKey: "newAccount", SecretKey: "newSecret"}.SignFields(ext, nil)
	r := Request{RemoteAddr: "127.0.0.1:1", Code: 310, ExtFields: signed}
	if _, err := p.Check(r); err == nil || err.Error() != "No acl config for newAccount" {
		t.Fatalf("%v", err)
	}
	p2, err := p.Apply(Update{Op: OpPutAccount, AccessKey: "newAccount", SecretKey: ptr("newSecret"), DefaultTopicPerm: ptr(Pub)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Check(r); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(r); err == nil {
		t.Fatal("the old policy changed")
	}
	if _, err := p.Apply(Update{Op: OpDeleteAccount, AccessKey: "nobody12"}); err == nil {
		t.Fatal("no error")
	}
	if _, err := NewPolicy(&Config{GlobalWhiteRemoteAddresses: []string{"x"}}); err == nil {
		t.Fatal("bad config compiled")
	}
}

func TestUpdateFromRequest(t *testing.T) {
	cases := []struct {
		name string
		code int32
		ext  map[string]string
		want Update
		err  string
	}{
		{name: "put all", code: 50, ext: map[string]string{"accessKey": "newAccount", "secretKey": "newSecret", "whiteRemoteAddress": "10.0.0.*",
			"admin": "true", "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB|PUB", "topicPerms": "a=PUB, b=DENY", "groupPerms": ""},
			want: Update{Op: OpPutAccount, AccessKey: "newAccount", SecretKey: ptr("newSecret"), WhiteRemoteAddress: ptr("10.0.0.*"), Admin: ptr(true),
				DefaultTopicPerm: ptr(Pub), DefaultGroupPerm: ptr(Pub | Sub), TopicPerms: &[]ResourcePerm{{"a", Pub}, {"b", Deny}}, GroupPerms: &[]ResourcePerm{}}},
		{name: "put minimal", code: 50, ext: map[string]string{"accessKey": "newAccount", "secretKey": ""},
			want: Update{Op: OpPutAccount, AccessKey: "newAccount", Admin: ptr(false)}},
		{name: "put no key", code: 50, ext: map[string]string{"secretKey": "newSecret"}, err: "<accessKey> is null"},
		{name: "put bad perm", code: 50, ext: map[string]string{"accessKey": "newAccount", "defaultTopicPerm": "ANY"}, err: "defaultTopicPerm"},
		{name: "put bad resource", code: 50, ext: map[string]string{"accessKey": "newAccount", "topicPerms": "a=PUB,b"}, err: "topicPerms"},
		{name: "delete", code: 51, ext: map[string]string{"accessKey": "RocketMQ"}, want: Update{Op: OpDeleteAccount, AccessKey: "RocketMQ"}},
		{name: "delete no key", code: 51, ext: nil, err: "<accessKey> is null"},
		{name: "global", code: 53, ext: map[string]string{"globalWhiteAddrs": "10.*, 192.168.0.1", "aclFileFullPath": "/x"},
			want: Update{Op: OpSetGlobalWhite, GlobalWhiteRemoteAddresses: []string{"10.*", "192.168.0.1"}}},
		{name: "global clear", code: 53, ext: map[string]string{"globalWhiteAddrs": ""}, want: Update{Op: OpSetGlobalWhite}},
		{name: "global missing", code: 53, ext: map[string]string{}, err: "<globalWhiteAddrs> is null"},
		{name: "not an update", code: 52, err: "not an ACL update"},
	}
	for _, c := range cases {
		u, err := UpdateFromRequest(c.code, c.ext)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(u, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, u, err, c.want)
		}
	}
}
