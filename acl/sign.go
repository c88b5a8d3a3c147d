package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"unicode/utf16"
)

// Ext field names of a signed request (RocketMQ's SessionCredentials).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
	// FieldUniqueKeyQuery is the QUERY_MESSAGE flag (MixAll.UNIQUE_MSG_QUERY_FLAG)
	// that newer Java tools sign and ACL 1.0 servers leave out of the
	// content; Verify accepts both.
	FieldUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Credentials are an account's keys as a client holds them.
type Credentials struct {
	AccessKey     string
	SecretKey     string
	SecurityToken string // optional
}

// Sign returns RocketMQ's request signature (AclUtils.calSignature over
// AclUtils.combineRequestContent): the values of every ext field except
// Signature, in the order of their keys (Java's TreeMap: String.compareTo,
// UTF-16 code units; the same as byte order for keys below U+E000), with
// no separators, then body; HMAC-SHA1 keyed with secretKey; standard
// Base64 with padding.
//
// Like the Java client (AclClientRPCHook), it signs the AccessKey and
// SecurityToken fields if ext has them, and _UNIQUE_KEY_QUERY: an ACL 2.0
// server expects it signed from clients newer than 4.9.3, and Verify
// accepts it either way.
func Sign(ext map[string]string, body []byte, secretKey string) string {
	return sign(Content(ext, body), secretKey)
}

// Content returns the bytes Sign signs.
func Content(ext map[string]string, body []byte) []byte {
	return content(ext, body, nil)
}

// content is Content leaving out, besides Signature, the keys skip
// reports.
func content(ext map[string]string, body []byte, skip func(string) bool) []byte {
	keys := make([]string, 0, len(ext))
	n := len(body)
	for k, v := range ext {
		if k == FieldSignature || (skip != nil && skip(k)) {
			continue
		}
		keys = append(keys, k)
		n += len(v)
	}
	slices.SortFunc(keys, javaCompare)
	out := make([]byte, 0, n)
	for _, k := range keys {
		out = append(out, ext[k]...)
	}
	return append(out, body...)
}

func sign(content []byte, secretKey string) string {
	m := hmac.New(sha1.New, []byte(secretKey))
	m.Write(content)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether ext carries a Signature that matches ext (less
// Signature) and body under secretKey, compared in constant time. It
// accepts the content the ACL 1.0 server computes (without
// _UNIQUE_KEY_QUERY), the one Java clients sign (with it), and the one
// rocketmq-client-go signs when it has a security token (the token's
// value left out: its interceptor puts SecurityToken in the value map but
// not in the key list).
func Verify(ext map[string]string, body []byte, secretKey string) bool {
	return verify(ext, body, secretKey, nil)
}

// verify is Verify, leaving the unsigned keys out of the content too.
func verify(ext map[string]string, body []byte, secretKey string, unsigned []string) bool {
	got, ok := ext[FieldSignature]
	if !ok || got == "" {
		return false
	}
	_, hasUKQ := ext[FieldUniqueKeyQuery]
	_, hasToken := ext[FieldSecurityToken]
	match := false
	for _, dropUKQ := range []bool{false, true} {
		if dropUKQ && !hasUKQ {
			continue
		}
		for _, dropToken := range []bool{false, true} {
			if dropToken && !hasToken {
				continue
			}
			skip := func(k string) bool {
				return (dropUKQ && k == FieldUniqueKeyQuery) || (dropToken && k == FieldSecurityToken) ||
					slices.Contains(unsigned, k)
			}
			want := sign(content(ext, body, skip), secretKey)
			// Every candidate is computed and compared, so the time does
			// not tell which one matched.
			if subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1 {
				match = true
			}
		}
	}
	return match
}

// SignFields returns a copy of ext with the AccessKey, SecurityToken (if
// c has one) and Signature fields of a request with that body, as
// RocketMQ's clients send them. ext is not modified.
func (c Credentials) SignFields(ext map[string]string, body []byte) map[string]string {
	out := make(map[string]string, len(ext)+3)
	maps.Copy(out, ext)
	delete(out, FieldSignature)
	out[FieldAccessKey] = c.AccessKey
	if c.SecurityToken != "" {
		out[FieldSecurityToken] = c.SecurityToken
	} else {
		delete(out, FieldSecurityToken)
	}
	out[FieldSignature] = Sign(out, body, c.SecretKey)
	return out
}

// javaCompare orders strings as Java's String.compareTo does: by UTF-16
// code units.
func javaCompare(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
