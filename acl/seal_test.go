package acl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBoxSealOpen(t *testing.T) {
	box, err := NewBox(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	s1, err := box.Seal("account1", "secret-one")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := box.Seal("account1", "secret-one")
	if !IsSealed(s1) || strings.Contains(s1, "secret-one") || s1 == s2 {
		t.Fatalf("sealed %q, %q: want the prefix, no plaintext, a fresh nonce each time", s1, s2)
	}
	if got, err := box.Open("account1", s1); err != nil || got != "secret-one" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := box.Open("account2", s1); err == nil {
		t.Fatal("a sealed secret opened for another account")
	}
	if got, err := box.Open("account1", "plain-secret"); err != nil || got != "plain-secret" {
		t.Fatalf("a plaintext secret: Open = %q, %v", got, err)
	}
	other, _ := NewBox(NewKey())
	if _, err := other.Open("account1", s1); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("another key: %v, want ErrWrongKey", err)
	}
	var none *Box
	if _, err := none.Open("account1", s1); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v, want ErrNoKey", err)
	}
	if got, err := none.Open("account1", "plain-secret"); err != nil || got != "plain-secret" {
		t.Fatalf("no key, a plaintext secret: Open = %q, %v", got, err)
	}
	tampered := s1[:len(s1)-4] + "AAA="
	if _, err := box.Open("account1", tampered); err == nil {
		t.Fatal("a tampered sealed secret opened")
	}
}

func TestSealUpdate(t *testing.T) {
	box, _ := NewBox(NewKey())
	sec := "put-secret-1"
	u, err := box.SealUpdate(Update{Op: OpPutAccount, AccessKey: "account1", SecretKey: &sec})
	if err != nil || !IsSealed(*u.SecretKey) || sec != "put-secret-1" {
		t.Fatalf("put: %+v, %v (input %q)", u, err, sec)
	}
	for _, bad := range []string{"short", "enc:v1:looks-sealed"} {
		if _, err := box.SealUpdate(Update{Op: OpPutAccount, AccessKey: "account1", SecretKey: &bad}); err == nil {
			t.Fatalf("put with secret %q: no error", bad)
		}
	}
	cfg := &Config{Accounts: []Account{{AccessKey: "account1", SecretKey: "replace-secret-1"}, {AccessKey: "account2", SecretKey: "replace-secret-2"}}}
	u, err = box.SealUpdate(Update{Op: OpReplace, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Accounts[0].SecretKey != "replace-secret-1" {
		t.Fatal("SealUpdate changed its input")
	}
	opened, err := box.OpenConfig(u.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range u.Config.Accounts {
		if !IsSealed(a.SecretKey) || opened.Accounts[i].SecretKey != cfg.Accounts[i].SecretKey {
			t.Fatalf("account %d: sealed %q, opened %q", i, a.SecretKey, opened.Accounts[i].SecretKey)
		}
	}
	var none *Box
	if _, err := none.SealUpdate(Update{Op: OpPutAccount, AccessKey: "account1", SecretKey: &sec}); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v, want ErrNoKey", err)
	}
	if _, err := none.SealUpdate(Update{Op: OpDeleteAccount, AccessKey: "account1"}); err != nil {
		t.Fatalf("no key, no secret: %v", err)
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	key := NewKey()
	good := filepath.Join(dir, "acl.key")
	if err := os.WriteFile(good, EncodeKey(key), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKeyFile(good)
	if err != nil || string(got) != string(key) {
		t.Fatalf("ReadKeyFile = %x, %v", got, err)
	}
	for name, content := range map[string]string{"short": "abcd\n", "nothex": strings.Repeat("zz", KeySize)} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKeyFile(p); err == nil {
			t.Fatalf("%s: no error", name)
		}
	}
}
