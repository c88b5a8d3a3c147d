package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// RocketMQ 5's gRPC clients sign a request in its metadata rather than in
// ext fields: the "x-mq-date-time" value (yyyyMMdd'T'HHmmss'Z', UTC) is
// signed with HMAC-SHA1 keyed by the secret key, and the "authorization"
// value is
//
//	MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=HEX
//
// with the digest in hex (either case). The Credential may carry more
// after a "/" (older clients' AK/region form); the access key is the part
// before it.

// V2Request is what CheckV2 needs of a gRPC request.
type V2Request struct {
	RemoteAddr    string // "host:port" of the client
	Authorization string // the authorization metadata value; "" if none
	DateTime      string // the x-mq-date-time metadata value
	// Need is what the RPC touches and the perm each needs (topics and
	// consumer groups, as for remoting requests).
	Need []Resource
}

// SignV2 returns the authorization value a RocketMQ 5 client sends with
// dateTime under c.
func (c Credentials) SignV2(dateTime string) string {
	return "MQv2-HMAC-SHA1 Credential=" + c.AccessKey + ", SignedHeaders=x-mq-date-time, Signature=" + signV2(dateTime, c.SecretKey)
}

func signV2(dateTime, secretKey string) string {
	m := hmac.New(sha1.New, []byte(secretKey))
	m.Write([]byte(dateTime))
	return strings.ToUpper(hex.EncodeToString(m.Sum(nil)))
}

// ParseAuthorization splits an authorization value into its access key
// and hex signature.
func ParseAuthorization(v string) (accessKey, signature string, err error) {
	_, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok {
		return "", "", fmt.Errorf("acl: authorization %q: want \"MQv2-HMAC-SHA1 Credential=..., SignedHeaders=..., Signature=...\"", v)
	}
	for _, part := range strings.Split(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			accessKey, _, _ = strings.Cut(val, "/")
		case "Signature":
			signature = val
		}
	}
	if accessKey == "" || signature == "" {
		return "", "", fmt.Errorf("acl: authorization %q: no Credential or no Signature", v)
	}
	return accessKey, signature, nil
}

// CheckV2 decides a gRPC request in the order Check decides a remoting
// one: global white address, access key, account white address, the
// signature of the date-time, then each needed resource's perm. It
// returns the access key the request was made with ("" if none).
//
// Like RocketMQ's proxy, it does not check how old the date-time is.
func (p *Policy) CheckV2(r V2Request) (Grant, string, error) {
	white := whiteMatcher(r.RemoteAddr)
	if p.globalWhite(white) {
		return GrantGlobalWhite, "", nil
	}
	if r.Authorization == "" {
		return 0, "", &DeniedError{Msg: "No accessKey is configured"}
	}
	ak, sig, err := ParseAuthorization(r.Authorization)
	if err != nil {
		return 0, "", &DeniedError{Msg: strings.TrimPrefix(err.Error(), "acl: ")}
	}
	deny := func(format string, args ...any) (Grant, string, error) {
		return 0, ak, &DeniedError{AccessKey: ak, Msg: fmt.Sprintf(format, args...)}
	}
	a := p.accounts[ak]
	if a == nil {
		return deny("No acl config for %s", ak)
	}
	if white(a.white) {
		return GrantAccountWhite, ak, nil
	}
	if r.DateTime == "" {
		return deny("Check signature failed for accessKey=%s: no x-mq-date-time", ak)
	}
	if !hmac.Equal([]byte(strings.ToUpper(sig)), []byte(signV2(r.DateTime, a.SecretKey))) {
		return deny("Check signature failed for accessKey=%s", ak)
	}
	if err := a.allows(r.Need); err != nil {
		return deny("%s", err.Error())
	}
	return GrantSigned, ak, nil
}

// SecretKey returns the secret key of accessKey's account.
func (p *Policy) SecretKey(accessKey string) (string, bool) {
	a := p.accounts[accessKey]
	if a == nil {
		return "", false
	}
	return a.SecretKey, true
}

// allows checks need against the account's perms (Check's last step).
func (a *account) allows(need []Resource) error {
	if a.Admin && len(a.topics) == 0 && len(a.groups) == 0 {
		return nil
	}
	for _, res := range need {
		if !res.Group && res.Name == TraceTopic && res.Perm == Pub {
			continue
		}
		list, def := a.topics, a.DefaultTopicPerm
		if res.Group {
			list, def = a.groups, a.DefaultGroupPerm
		}
		owned, listed := list[res.Name]
		if !listed {
			owned = def
		}
		if !owned.Allows(res.Perm) {
			return fmt.Errorf("No default permission for %s", res)
		}
	}
	return nil
}
