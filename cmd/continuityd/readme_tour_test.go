//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// firstCommand is the README's first command, as "The two commands" gives
// it; TestReadmeTour runs it, so the README cannot drift from what works.
const firstCommand = "go install ./cmd/... && continuityd run --workdir ~/myproject"

// readmeTour returns the README's first command and the shell blocks of
// its tour (between the tour markers), in order.
func readmeTour(t *testing.T) (first string, blocks []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	two, _, ok := strings.Cut(readme[strings.Index(readme, "## The two commands"):], "\n## ")
	if !ok {
		t.Fatal("README: no section after The two commands")
	}
	for _, l := range strings.Split(two, "\n") {
		if strings.HasPrefix(l, "    go install") {
			first = strings.TrimSpace(l)
			break
		}
	}
	_, tour, ok := strings.Cut(readme, "<!-- tour: TestReadmeTour")
	tour, _, ok2 := strings.Cut(tour, "<!-- tour: end -->")
	if !ok || !ok2 {
		t.Fatal("README: the tour markers are missing")
	}
	for {
		_, rest, ok := strings.Cut(tour, "```sh\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatal("README: an unclosed sh block in the tour")
		}
		blocks, tour = append(blocks, block), after
	}
	return first, blocks
}

// TestReadmeTour follows the README as a newcomer would, on a fresh HOME
// and as an unprivileged user: the first command (installing with go
// install, then running the daemon for a project of their own), then the
// tour's shell blocks, every command of which must succeed on the
// embedded default.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary with go install")
	}
	first, blocks := readmeTour(t)
	if first != firstCommand {
		t.Fatalf("the README's first command is %q; this test runs %q: change both together", first, firstCommand)
	}
	if len(blocks) < 2 {
		t.Fatalf("the tour has %d shell blocks, want the API's and the CLI's", len(blocks))
	}
	top, err := os.MkdirTemp("", "cdtour")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	home, run, bin := filepath.Join(top, "home"), filepath.Join(top, "run"), filepath.Join(top, "bin")
	project, scratch := filepath.Join(home, "myproject"), filepath.Join(home, "tour")
	for _, d := range []string{home, run, bin, project, scratch} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, project, "main.go", "package main\n\nfunc main() {}\n")

	// The install step, as the README gives it (GOBIN stands for the user's
	// ~/go/bin): both binaries, as `continuityd run` hands itself to
	// continuityd-daemon.
	install := exec.Command("go", "install", "./cmd/...")
	install.Dir = filepath.Join("..", "..")
	install.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/...: %v\n%s", err, out)
	}
	installed := filepath.Join(bin, "continuityd")

	cred := func(*exec.Cmd) {}
	if os.Geteuid() == 0 { // CI runs as root: be a user of one's own
		if err := os.Chmod(top, 0o755); err != nil {
			t.Fatal(err)
		}
		filepath.Walk(top, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, daemonID, daemonID) })
		cred = func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }
	}
	env := []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + run, "XDG_STATE_HOME=", "XDG_CONFIG_HOME=",
		"CONTINUITYD_STATE_DIR=", "CONTINUITYD_SOCKET=", "PATH=" + bin + ":" + os.Getenv("PATH")}
	sock := filepath.Join(run, "continuityd", "continuityd.sock")
	_, runPart, _ := strings.Cut(first, "&& ")
	args := strings.Fields(strings.ReplaceAll(runPart, "~", home))
	p := startProcWith(t, func(c *exec.Cmd) {
		c.Path, c.Args = installed, args
		cred(c)
	}, sock, env)
	if st := get(t, p.client(), "/v1/status"); !strings.Contains(mustJSON(t, st), project) {
		t.Fatalf("the first command's daemon does not work in %s: %v", project, st)
	}

	for i, block := range blocks {
		sh := exec.Command("bash", "-e", "-x", "-o", "pipefail", "-c", block)
		sh.Dir = scratch
		sh.Env = append(os.Environ(), env...)
		cred(sh)
		var out bytes.Buffer
		sh.Stdout, sh.Stderr = &out, &out
		if err := sh.Run(); err != nil {
			t.Fatalf("tour block %d: %v (the last command traced is the one that failed)\n%s\ndaemon log:\n%s", i+1, err, out.String(), p.stderr)
		}
		if strings.Contains(out.String(), `"code":"INTERNAL"`) {
			t.Fatalf("tour block %d: an INTERNAL error:\n%s", i+1, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(scratch, "continuityd.toml")); err != nil {
		t.Fatalf("the tour's last step left no config: %v", err)
	}
}
