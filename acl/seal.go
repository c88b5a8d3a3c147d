package acl

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Sealed secrets. The broker needs every account's secret key itself (an
// HMAC signature can only be checked with the key), so the replicated ACL
// cannot hold a hash of it. Instead the group's nodes share a key (the
// ACL key, KeySize random bytes, in a file written hex-encoded), and a
// secret key the group stores is sealed with it: AES-256-GCM with a
// random nonce and the access key as additional data, so that a sealed
// secret moved to another account does not open. A sealed secret is the
// string
//
//	enc:v1:<key id>:<base64(nonce | ciphertext | tag)>
//
// where the key id is the first 4 bytes of SHA-256 of the ACL key, in hex:
// a node with another key says so instead of failing the tag. A secret
// key without the prefix is plaintext (an ACL stored before secrets were
// sealed) and is used as it is.

// KeySize is the size of an ACL key: AES-256.
const KeySize = 32

// sealedPrefix starts every sealed secret; a plaintext secret key may not
// start with it.
const sealedPrefix = "enc:v1:"

// Errors of sealed secrets.
var (
	// ErrNoKey is returned by Box.Open for a sealed secret when the box
	// has no key (a nil *Box), and by Box.SealUpdate.
	ErrNoKey = errors.New("acl: the ACL's secret keys are sealed and this node has no ACL key (--acl-key-file)")
	// ErrWrongKey is returned by Box.Open for a secret sealed with another
	// ACL key.
	ErrWrongKey = errors.New("acl: a secret key is sealed with another ACL key than this node's")
)

// Box seals and opens secret keys with an ACL key. A nil *Box has no key:
// it opens plaintext secrets only and seals nothing.
type Box struct {
	aead cipher.AEAD
	id   string
}

// NewBox returns the box of an ACL key of KeySize bytes.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("acl: an ACL key is %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	sum := sha256.Sum256(key)
	return &Box{aead: aead, id: hex.EncodeToString(sum[:4])}, nil
}

// NewKey returns a random ACL key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}

// EncodeKey is an ACL key as its file holds it: hex, one line.
func EncodeKey(key []byte) []byte { return []byte(hex.EncodeToString(key) + "\n") }

// ReadKeyFile reads an ACL key file: KeySize bytes in hex (surrounding
// white space ignored), as `openssl rand -hex 32` writes them.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("acl: key file: %w", err)
	}
	key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(key) != KeySize {
		return nil, fmt.Errorf("acl: key file %s: want %d bytes in hex (openssl rand -hex %d)", path, KeySize, KeySize)
	}
	return key, nil
}

// IsSealed reports whether a secret key is sealed.
func IsSealed(secret string) bool { return strings.HasPrefix(secret, sealedPrefix) }

// Seal returns secret sealed for the account accessKey.
func (b *Box) Seal(accessKey, secret string) (string, error) {
	if b == nil {
		return "", ErrNoKey
	}
	nonce := make([]byte, b.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := b.aead.Seal(nonce, nonce, []byte(secret), []byte(accessKey))
	return sealedPrefix + b.id + ":" + base64.StdEncoding.EncodeToString(out), nil
}

// Open returns the secret key of a sealed one, or secret itself when it
// is plaintext.
func (b *Box) Open(accessKey, secret string) (string, error) {
	if !IsSealed(secret) {
		return secret, nil
	}
	if b == nil {
		return "", ErrNoKey
	}
	id, data, ok := strings.Cut(strings.TrimPrefix(secret, sealedPrefix), ":")
	if !ok {
		return "", fmt.Errorf("acl: secret key of %q: malformed sealed secret", accessKey)
	}
	if id != b.id {
		return "", fmt.Errorf("%w (key id %s, this node's %s): account %q", ErrWrongKey, id, b.id, accessKey)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return "", fmt.Errorf("acl: secret key of %q: malformed sealed secret", accessKey)
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(accessKey))
	if err != nil {
		return "", fmt.Errorf("acl: secret key of %q does not open with this node's ACL key: %w", accessKey, err)
	}
	return string(plain), nil
}

// SealUpdate returns u with every secret key it carries sealed, after
// checking them as Validate would (a sealed secret is longer than any
// limit): an OpPutAccount's SecretKey, every account of an OpReplace's
// Config. A plaintext secret key may not look sealed.
func (b *Box) SealUpdate(u Update) (Update, error) {
	check := func(i int, accessKey, secret string) error {
		if IsSealed(secret) {
			return &ValidationError{Account: i, Field: "secretKey", Item: -1, Err: fmt.Errorf("a secret key may not start with %q", sealedPrefix)}
		}
		if len(secret) < minKeyLen {
			return &ValidationError{Account: i, Field: "secretKey", Item: -1, Err: fmt.Errorf("secret key of %q is shorter than %d characters", accessKey, minKeyLen)}
		}
		return nil
	}
	switch {
	case u.Op == OpPutAccount && u.SecretKey != nil:
		if err := check(-1, u.AccessKey, *u.SecretKey); err != nil {
			return Update{}, err
		}
		s, err := b.Seal(u.AccessKey, *u.SecretKey)
		if err != nil {
			return Update{}, err
		}
		u.SecretKey = &s
	case u.Op == OpReplace && u.Config != nil:
		c := u.Config.Clone()
		c.normalize()
		if err := c.Validate(); err != nil {
			return Update{}, err
		}
		for i := range c.Accounts {
			a := &c.Accounts[i]
			if err := check(i, a.AccessKey, a.SecretKey); err != nil {
				return Update{}, err
			}
			var err error
			if a.SecretKey, err = b.Seal(a.AccessKey, a.SecretKey); err != nil {
				return Update{}, err
			}
		}
		u.Config = c
	}
	return u, nil
}

// OpenConfig returns a copy of c with every secret key opened.
func (b *Box) OpenConfig(c *Config) (*Config, error) {
	out := c.Clone()
	for i := range out.Accounts {
		a := &out.Accounts[i]
		var err error
		if a.SecretKey, err = b.Open(a.AccessKey, a.SecretKey); err != nil {
			return nil, err
		}
	}
	return out, nil
}
