//go:build packaging

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/config"
)

// TestDeb builds the .deb with build-deb.sh and checks what it holds; runs
// lintian when it is installed. It needs Go, the module proxy (for nfpm) and
// dpkg-deb:
//
//	go test -tags packaging -run Deb ./packaging/
func TestDeb(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed")
	}
	cmd := exec.Command("./build-deb.sh")
	cmd.Env = append(os.Environ(), "PACKAGER=deb")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	deb := filepath.Join("..", lines[len(lines)-1])
	t.Logf("built %s", deb)

	listing, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v", err)
	}
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/continuityd",
		"-rwxr-xr-x root/root .* ./usr/bin/continuityd-daemon",
		"./usr/lib/systemd/system/continuityd.service",
		"./usr/lib/systemd/user/continuityd.service",
		"./usr/lib/sysusers.d/continuityd.conf",
		"./etc/continuityd/continuityd.toml",
		"./usr/share/man/man1/continuityd.1.gz",
		"./usr/share/bash-completion/completions/continuityd",
		"./usr/share/zsh/vendor-completions/_continuityd",
		"./usr/share/fish/vendor_completions.d/continuityd.fish",
		"./usr/share/doc/continuityd/copyright",
		"./usr/share/doc/continuityd/changelog.Debian.gz",
	} {
		if !listed(string(listing), want) {
			t.Errorf("dpkg-deb -c lists no %s:\n%s", want, listing)
		}
	}

	// The control part: the config is a conffile, and the scripts are there.
	ctl := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-e", deb, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ctl, "conffiles")); !strings.Contains(string(b), "/etc/continuityd/continuityd.toml") {
		t.Errorf("conffiles: %q", b)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		b, err := os.ReadFile(filepath.Join(ctl, s))
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "echo ") && enablesOrStarts.MatchString(line) {
				t.Errorf("%s enables or starts something: %s", s, line)
			}
		}
	}

	// The files as installed: the unit verifies against the packaged
	// binary, and that binary accepts the packaged config.
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	bin := filepath.Join(root, "usr/bin/continuityd")
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/continuityd.service"))
	if err != nil {
		t.Fatal(err)
	}
	verify(t, "the packaged system unit", bytes.ReplaceAll(unit, []byte("ExecStart="+PackagedBinary+" "), []byte("ExecStart="+bin+" ")), false)
	if out, err := exec.Command(bin, "config", "check", filepath.Join(root, "etc/continuityd/continuityd.toml")).CombinedOutput(); err != nil {
		t.Errorf("the packaged binary refuses the packaged config: %v\n%s", err, out)
	}
	// The front hands `run` to the continuityd-daemon packed beside it: its
	// own refusal answers a flag it does not know.
	if out, err := exec.Command(bin, "run", "--no-such-flag").CombinedOutput(); !strings.Contains(string(out), "continuityd run: unknown flag --no-such-flag") {
		t.Errorf("the packaged front does not reach the packaged continuityd-daemon: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/continuityd/continuityd.toml")); err != nil {
		t.Error(err)
	} else if cfg, err := config.Decode(b, PackagedConfig); err != nil || cfg.Daemon.StateDir != SystemStateDir {
		t.Errorf("the packaged config: %v", err)
	}

	lintian, err := exec.LookPath("lintian")
	if err != nil {
		t.Log("lintian is not installed (Debian: apt-get install lintian); the package is not linted")
		return
	}
	out, err = exec.Command(lintian, "--fail-on", "error,warning", "--pedantic", "--info", deb).CombinedOutput()
	t.Logf("lintian --pedantic --info:\n%s", out)
	if err != nil {
		t.Errorf("lintian: %v", err)
	}
}

var enablesOrStarts = regexp.MustCompile(`\b(enable|start|reenable|preset)\b`)

// listed reports whether a `dpkg-deb -c` line ends with the path of want;
// a want with " .* " also matches the line's start.
func listed(listing, want string) bool {
	head, path, ok := strings.Cut(want, " .* ")
	if !ok {
		head, path = "", want
	}
	for _, line := range strings.Split(listing, "\n") {
		if strings.HasSuffix(line, " "+path) && strings.HasPrefix(line, head) {
			return true
		}
	}
	return false
}
