//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestConfigCheckFlagsBadTokenFiles: `config check` reads each token_file
// as the daemon would: a missing one, a FIFO and one others may read are
// errors naming the key and the file (exit 2); a private one passes.
func TestConfigCheckFlagsBadTokenFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		plant func(path string) error
		says  string
	}{
		{"missing", func(string) error { return nil }, "no such file"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "FIFO"},
		{"world-readable", func(p string) error {
			if err := os.WriteFile(p, []byte("tok-0123456789\n"), 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o644)
		}, "0644"},
		{"private", func(p string) error { return os.WriteFile(p, []byte("tok-0123456789\n"), 0o600) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := filepath.Join(dir, c.name+".token")
			if err := c.plant(tok); err != nil {
				t.Fatal(err)
			}
			cfgPath := filepath.Join(dir, c.name+".toml")
			cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\n\n[upstream.qday]\nurl = \"https://q.example\"\ntoken_file = %q\n",
				filepath.Join(dir, "state"), filepath.Join(dir, "d.sock"), tok)
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := cli(t, nil, "", "config", "check", cfgPath)
			if c.says == "" {
				if code != exitOK || !strings.Contains(out, "is valid") {
					t.Fatalf("a private token file: %d %s %s", code, out, errs)
				}
				return
			}
			if code != exitUsage || !strings.Contains(errs, "upstream.qday.token_file") || !strings.Contains(errs, tok) || !strings.Contains(errs, c.says) {
				t.Fatalf("config check with a %s token file: exit %d\n%s%s", c.name, code, out, errs)
			}
		})
	}
}
