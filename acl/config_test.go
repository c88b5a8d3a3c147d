package acl

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleYAML is RocketMQ's distribution/conf/plain_acl.yml (4.9.x), with
// the dataVersion the broker writes into it.
const sampleYAML = `globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1684290520350
`

func TestParseYAMLSample(t *testing.T) {
	c, err := ParseYAML([]byte(sampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		GlobalWhiteRemoteAddresses: []string{"10.10.103.*", "192.168.0.*"},
		Accounts: []Account{{
			AccessKey: "RocketMQ", SecretKey: "12345678",
			DefaultTopicPerm: Deny, DefaultGroupPerm: Sub,
			TopicPerms: []ResourcePerm{{"topicA", Deny}, {"topicB", Pub | Sub}, {"topicC", Sub}},
			GroupPerms: []ResourcePerm{{"groupA", Deny}, {"groupB", Pub | Sub}, {"groupC", Sub}},
		}, {
			AccessKey: "rocketmq2", SecretKey: "12345678", WhiteRemoteAddress: "192.168.1.*", Admin: true,
			DefaultTopicPerm: Deny, DefaultGroupPerm: Deny,
		}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "plain_acl.yml")
	if err := os.WriteFile(path, []byte(sampleYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c2, err := LoadFile(path)
	if err != nil || !reflect.DeepEqual(c2, want) {
		t.Fatalf("LoadFile: %v %+v", err, c2)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yml")); err == nil {
		t.Fatal("missing file loaded")
	}
}

func TestParseYAMLEmpty(t *testing.T) {
	for _, s := range []string{"", "\n# nothing\n", "accounts: []\n"} {
		c, err := ParseYAML([]byte(s))
		if err != nil || len(c.Accounts) != 0 || len(c.GlobalWhiteRemoteAddresses) != 0 {
			t.Errorf("%q: %v %+v", s, err, c)
		}
	}
}

func TestParseYAMLErrors(t *testing.T) {
	acct := func(extra string) string {
		return "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n" + extra
	}
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"unknown top key", "globalWhiteRemoteAddresses: []\nacounts: []\n", []string{"line 2", "acounts"}},
		{"unknown account key", acct("    adminn: true\n"), []string{"line 4", "adminn"}},
		{"bad default perm", acct("    defaultTopicPerm: ANY\n"), []string{"line 4", `"ANY"`}},
		{"lower case perm", acct("    defaultGroupPerm: sub\n"), []string{"line 4", `"sub"`}},
		{"bad topic perm", acct("    topicPerms:\n      - a=PUB\n      - b=WRITE\n"), []string{"line 6", `"WRITE"`}},
		{"no equals", acct("    groupPerms:\n      - groupA\n"), []string{"line 5", "name=PERM"}},
		{"empty resource name", acct("    topicPerms:\n      - =PUB\n"), []string{"line 5"}},
		{"retry prefix", acct("    groupPerms:\n      - '%RETRY%g=SUB'\n"), []string{"line 5", "%RETRY%"}},
		{"perm not a string", acct("    defaultTopicPerm: [PUB]\n"), []string{"line 4"}},
		{"duplicate key", acct("    admin: true\n    admin: false\n"), []string{"line 5", "admin"}},
		{"short access key", "accounts:\n  - accessKey: abc\n    secretKey: 12345678\n", []string{"line 2", "accounts[0].accessKey", "shorter than 7"}},
		{"short secret", "accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", []string{"line 3", "accounts[0].secretKey"}},
		{"missing secret", "accounts:\n  - accessKey: RocketMQ\n", []string{"accounts[0].secretKey"}},
		{"duplicate access key", acct("  - accessKey: RocketMQ\n    secretKey: 87654321\n"), []string{"line 4", "accounts[1].accessKey", "also accounts[0]"}},
		{"duplicate topic", acct("    topicPerms:\n      - a=PUB\n      - a=SUB\n"), []string{"line 6", "topicPerms[1]", "twice"}},
		{"bad white address", acct("    whiteRemoteAddress: 192.168.1.300\n"), []string{"line 4", "whiteRemoteAddress"}},
		{"bad global address", "globalWhiteRemoteAddresses:\n  - 10.0.0.*\n  - 10.0.0.a\n", []string{"line 3", "globalWhiteRemoteAddresses[1]"}},
		{"blank global address", "globalWhiteRemoteAddresses:\n  - ''\n", []string{"line 2", "blank"}},
		{"two documents", "accounts: []\n---\naccounts: []\n", []string{"one YAML document"}},
		{"not a mapping", "- a\n", []string{"line 1"}},
		{"bad data version", "dataVersion:\n  - counter: x\n", []string{"line 2"}},
	}
	for _, c := range cases {
		_, err := ParseYAML([]byte(c.yaml))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	c, err := ParseYAML([]byte(sampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"globalWhiteRemoteAddresses":["10.10.103.*","192.168.0.*"],"accounts":[` +
		`{"accessKey":"RocketMQ","secretKey":"12345678","whiteRemoteAddress":"","admin":false,"defaultTopicPerm":"DENY","defaultGroupPerm":"SUB","topicPerms":["topicA=DENY","topicB=PUB|SUB","topicC=SUB"],"groupPerms":["groupA=DENY","groupB=PUB|SUB","groupC=SUB"]},` +
		`{"accessKey":"rocketmq2","secretKey":"12345678","whiteRemoteAddress":"192.168.1.*","admin":true,"defaultTopicPerm":"DENY","defaultGroupPerm":"DENY","topicPerms":null,"groupPerms":null}]}`
	if string(b) != want {
		t.Fatalf("json\n%s\nwant\n%s", b, want)
	}
	back, err := ParseJSON(b)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("ParseJSON: %v\n%+v\n%+v", err, back, c)
	}
	// The YAML writer gives a file ParseYAML reads back the same.
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseYAML(y)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("YAML round trip: %v\n%s", err, y)
	}
	for _, bad := range []string{
		`{"accounts":[],"extra":1}`,
		`{"accounts":[{"accessKey":"RocketMQ","secretKey":"12345678","defaultTopicPerm":"ANY"}]}`,
		`{"accounts":[{"accessKey":"Rock","secretKey":"12345678"}]}`,
		`{"accounts":[]} {}`,
	} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("ParseJSON(%s): no error", bad)
		}
	}
	if _, err := json.Marshal(&Config{Accounts: []Account{{DefaultTopicPerm: Any}}}); err == nil {
		t.Error("encoded perm ANY")
	}
	// A perm not given is DENY.
	if b, err := json.Marshal(&Config{Accounts: []Account{{}}}); err != nil || !strings.Contains(string(b), `"defaultTopicPerm":"DENY"`) {
		t.Errorf("%s %v", b, err)
	}
}

func TestParsePerm(t *testing.T) {
	cases := map[string]Perm{"DENY": Deny, "PUB": Pub, "SUB": Sub, "PUB|SUB": Pub | Sub, "SUB|PUB": Pub | Sub, " PUB ": Pub}
	for s, want := range cases {
		if p, err := ParsePerm(s); err != nil || p != want {
			t.Errorf("%q: %v %v", s, p, err)
		}
	}
	for _, s := range []string{"", "ANY", "pub", "PUB|", "PUB||SUB", "PUB | SUB", "DENY|PUB", "WRITE"} {
		if _, err := ParsePerm(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestPermAllows(t *testing.T) {
	cases := []struct {
		owned, needed Perm
		want          bool
	}{
		{Pub, Pub, true}, {Pub, Sub, false}, {Sub, Sub, true}, {Sub, Pub, false},
		{Pub | Sub, Pub, true}, {Pub | Sub, Sub, true},
		{Deny, Pub, false}, {Deny, Any, false}, {Deny | Pub, Pub, false},
		{Pub, Any, true}, {Sub, Any, true}, {0, Any, false}, {0, Sub, false},
	}
	for _, c := range cases {
		if got := c.owned.Allows(c.needed); got != c.want {
			t.Errorf("%v allows %v = %v", c.owned, c.needed, got)
		}
	}
}

func TestValidationErrorUnwrap(t *testing.T) {
	c := &Config{Accounts: []Account{{AccessKey: "short", SecretKey: "12345678"}}}
	err := c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Account != 0 || ve.Field != "accessKey" || ve.Line != 0 {
		t.Fatalf("%v", err)
	}
}

func TestAddrPattern(t *testing.T) {
	cases := []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{"", nil, []string{"10.0.0.1:1", "::1"}},
		{"*", []string{"10.0.0.1:1", "[::1]:5", "not-an-ip"}, nil},
		{"*.*.*.*", []string{"1.2.3.4:5"}, nil},
		{"*:*:*:*:*:*:*:*", []string{"[fe80::1]:5"}, nil},
		{"192.168.0.1", []string{"192.168.0.1:10911", "192.168.0.1", "[::ffff:192.168.0.1]:1"}, []string{"192.168.0.10:1", "192.168.0.2:1", "garbage"}},
		{"192.168.0.{1,2}", []string{"192.168.0.1:1", "192.168.0.2:1"}, []string{"192.168.0.3:1", "192.168.0.12:1"}},
		{"192.168.0.{ 1, 20 }", []string{"192.168.0.20:1"}, []string{"192.168.0.2:1"}},
		{"10.0.0.1,10.0.0.3", []string{"10.0.0.1:1", "10.0.0.3:1"}, []string{"10.0.0.2:1"}},
		{"192.168.1.1-5", []string{"192.168.1.1:1", "192.168.1.5:1", "192.168.1.3"}, []string{"192.168.1.6:1", "192.168.1.0:1", "192.168.2.3:1"}},
		{"192.168.*", []string{"192.168.0.1:1", "192.168.255.255:1"}, []string{"192.169.0.1:1", "10.168.0.1:1"}},
		{"192.168.*.*", []string{"192.168.7.9:1"}, []string{"192.167.7.9:1"}},
		{"192.168.1.*", []string{"192.168.1.200:1"}, []string{"192.168.2.1:1"}},
		{"10.10.103.*", []string{"10.10.103.7:9876"}, []string{"10.10.104.7:9876"}},
		{"192.168.1-5.*", []string{"192.168.3.1:1", "192.168.5.255:1"}, []string{"192.168.6.1:1", "192.168.0.1:1"}},
		{"10.*", []string{"10.1.2.3:1"}, []string{"11.1.2.3:1", "[::1]:1"}},
		{"::1", []string{"[::1]:10911", "::1", "[0:0:0:0:0:0:0:1]:1"}, []string{"127.0.0.1:1"}},
		{"fe80::{1,2}", []string{"[fe80::2]:1", "[fe80::1%eth0]:1"}, []string{"[fe80::3]:1"}},
		{"1050:0:0:0:5:600:300c:*", []string{"[1050::5:600:300c:326b]:1"}, []string{"[1050::5:600:300d:1]:1", "10.0.0.1:1"}},
		{"1050:0:0:0:5:600:1-a", []string{"[1050::5:600:5:1]:1", "[1050::5:600:a:ffff]:1"}, []string{"[1050::5:600:b:0]:1"}},
	}
	for _, c := range cases {
		p, err := CompileAddrPattern(c.pattern)
		if err != nil {
			t.Errorf("%q: %v", c.pattern, err)
			continue
		}
		for _, a := range c.match {
			if !p.Match(a) {
				t.Errorf("%q does not match %q", c.pattern, a)
			}
		}
		for _, a := range c.nomatch {
			if p.Match(a) {
				t.Errorf("%q matches %q", c.pattern, a)
			}
		}
	}
	for _, bad := range []string{
		"192.168.0.256", "192.168.0", "abc", "192.168.0.{1,300}", "{1,2}", "192.168.0.1{1}",
		"10.0.0.1,x", "*.168.0.1", "192.168.5-1.*", "192.168.1-300.*", "192.168.*.1", "192.168.-1.*",
		"1.2.3.4.5.*", "fe80::*", "10.0.0.1-",
	} {
		if _, err := CompileAddrPattern(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}
