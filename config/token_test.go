package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestTokenEnv(t *testing.T) {
	const name = "CONTINUITYD_TEST_TOKEN"
	u := Upstream{Kind: KindQDay, TokenEnv: name}

	t.Setenv(name, "  tok-123\n")
	if tok, err := u.Token(); err != nil || tok != "tok-123" {
		t.Errorf("set: %q, %v", tok, err)
	}

	t.Setenv(name, "")
	if _, err := u.Token(); err == nil || !strings.Contains(err.Error(), name+" is empty") {
		t.Errorf("empty: %v", err)
	}

	t.Setenv(name, "a\nb")
	if _, err := u.Token(); err == nil || strings.Contains(err.Error(), "a\nb") {
		t.Errorf("two lines: %v", err)
	}

	os.Unsetenv(name) // t.Setenv restores it afterwards
	if _, err := u.Token(); err == nil || !strings.Contains(err.Error(), name+" is not set") {
		t.Errorf("unset: %v", err)
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is subject to umask
			t.Fatal(err)
		}
		return p
	}
	token := func(p string) (string, error) { return Upstream{Kind: KindDelx, TokenFile: p}.Token() }

	if tok, err := token(write("ok", "tok-456\n", 0o600)); err != nil || tok != "tok-456" {
		t.Errorf("ok: %q, %v", tok, err)
	}
	if tok, err := token(write("ro", "tok-789", 0o400)); err != nil || tok != "tok-789" {
		t.Errorf("0400: %q, %v", tok, err)
	}

	open := write("open", "SECRET", 0o644)
	_, err := token(open)
	if runtime.GOOS != "windows" {
		if err == nil || !strings.Contains(err.Error(), open) || !strings.Contains(err.Error(), "0644") {
			t.Errorf("0644: %v", err)
		}
		if _, err := token(write("group", "SECRET", 0o640)); err == nil {
			t.Error("0640 accepted")
		}
	}
	if err != nil && strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error shows the token: %v", err)
	}

	if _, err := token(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := token(write("empty", " \n", 0o600)); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty: %v", err)
	}
	if _, err := token(write("lines", "a\nb\n", 0o600)); err == nil || strings.Contains(err.Error(), "a\nb") {
		t.Errorf("two lines: %v", err)
	}
	if _, err := token(write("big", strings.Repeat("x", maxTokenFile+1), 0o600)); err == nil {
		t.Error("oversized file accepted")
	}
	if _, err := token(dir); err == nil {
		t.Error("a directory accepted")
	}
}

func TestTokenLocalAndNone(t *testing.T) {
	if tok, err := (Upstream{Kind: KindLocal}).Token(); err != nil || tok != "" {
		t.Errorf("local: %q, %v", tok, err)
	}
	if _, err := (Upstream{Kind: KindQDay}).Token(); err == nil {
		t.Error("no token source accepted")
	}
}
