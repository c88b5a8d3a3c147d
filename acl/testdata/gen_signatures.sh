#!/bin/sh
# Regenerates signatures.jsonl: RocketMQ ACL signature vectors computed
# with openssl, independently of the Go code. For each vector the signed
# content (the ext field values in Java's key order, less Signature, then
# the body) is written out by hand below as hex, and
#   HMAC-SHA1(secret, content) | base64
# is computed by openssl. sign_test.go checks that acl.Content builds the
# same content from the ext fields and that acl.Sign gives the signature.
#
# Usage: sh gen_signatures.sh > signatures.jsonl
set -eu

# vector NAME SECRET_HEX EXT_JSON BODY_HEX CONTENT_HEX
vector() {
	sig=$(printf '%s' "$5" | xxd -r -p | openssl dgst -sha1 -mac HMAC -macopt "hexkey:$2" -binary | base64)
	printf '{"name":"%s","secretHex":"%s","ext":%s,"bodyHex":"%s","contentHex":"%s","signature":"%s"}\n' "$1" "$2" "$3" "$4" "$5" "$sig"
}

hex() { printf '%s' "$1" | xxd -p | tr -d '\n'; }

# The research note's vector (Java client with a security token).
# Keys sorted: AccessKey SecurityToken a b c.
vector research-java "$(hex 12345678)" \
	'{"AccessKey":"RocketMQ","SecurityToken":"tok","a":"PG","b":"TopicTest","c":"TBW102","Signature":"ignored"}' \
	"$(hex hello)" "$(hex RocketMQtokPGTopicTestTBW102hello)"

# A pull without a body. Keys sorted: AccessKey commitOffset consumerGroup
# maxMsgNums queueId queueOffset subVersion suspendTimeoutMillis sysFlag topic:
# pull-access 0 cg 32 3 17 0 20000 2 T1.
vector pull-no-body "$(hex secret-key-1)" \
	'{"topic":"T1","consumerGroup":"cg","queueId":"3","queueOffset":"17","maxMsgNums":"32","sysFlag":"2","commitOffset":"0","suspendTimeoutMillis":"20000","subVersion":"0","AccessKey":"pull-access"}' \
	"" "$(hex pull-access0cg323170200002T1)"

# Upper case before '_' before lower case (ASCII order); an empty value
# adds nothing; a binary body with a zero byte.
vector ascii-order-binary-body "$(hex 'k3y with spaces')" \
	'{"b":"2","B":"1","_x":"U","a":"0","e":"","AccessKey":"AKAKAKAK"}' \
	"00ff10" "$(hex AKAKAKAK1U02)00ff10"

# Java orders keys by UTF-16 code units: the emoji U+1F600 (surrogates
# D83D DE00) comes before U+FF21, although its UTF-8 (f0...) sorts after
# U+FF21's (ef...). A UTF-8 secret.
vector utf16-key-order "$(hex '密钥secret')" \
	'{"\uff21":"y","\ud83d\ude00":"x","AccessKey":"AccessKey7"}' \
	"" "$(hex AccessKey7xy)"
