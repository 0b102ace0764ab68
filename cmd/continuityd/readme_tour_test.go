//go:build linux

package main

import (
	"bytes"
	"fmt"
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
// tour's shell blocks, in order and in one shell as a person pastes them,
// started in the project. Every command must succeed on the embedded
// default, with XDG_RUNTIME_DIR set and without it (a `su -` or ssh
// session: the socket is then under the state directory), and the tour
// must leave nothing in the project.
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
	// The install step, as the README gives it (GOBIN stands for the user's
	// ~/go/bin): both binaries, as `continuityd run` hands itself to
	// continuityd-daemon.
	bin, err := os.MkdirTemp("", "cdtourbin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	install := exec.Command("go", "install", "./cmd/...")
	install.Dir = filepath.Join("..", "..")
	install.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/...: %v\n%s", err, out)
	}
	if os.Geteuid() == 0 {
		os.Chmod(bin, 0o755)
	}
	for _, runtimeDir := range []bool{true, false} {
		name := "without XDG_RUNTIME_DIR"
		if runtimeDir {
			name = "with XDG_RUNTIME_DIR"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tour(t, first, blocks, bin, runtimeDir)
		})
	}
}

// tour runs the first command and the tour's blocks with the binaries
// installed in bin, on a HOME of its own.
func tour(t *testing.T, first string, blocks []string, bin string, runtimeDir bool) {
	top, err := os.MkdirTemp("", "cdtour")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	home, run, tmp := filepath.Join(top, "home"), filepath.Join(top, "run"), filepath.Join(top, "tmp")
	project := filepath.Join(home, "myproject")
	for _, d := range []string{home, run, tmp, project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, project, "main.go", "package main\n\nfunc main() {}\n")
	installed := filepath.Join(bin, "continuityd")

	cred := func(*exec.Cmd) {}
	if os.Geteuid() == 0 { // CI runs as root: be a user of one's own
		if err := os.Chmod(top, 0o755); err != nil {
			t.Fatal(err)
		}
		filepath.Walk(top, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, daemonID, daemonID) })
		cred = func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Credential: asDaemon} }
	}
	// TMPDIR: the tour's scratch directory (mktemp -d) is this test's.
	env := []string{"HOME=" + home, "XDG_STATE_HOME=", "XDG_CONFIG_HOME=", "TMPDIR=" + tmp,
		"CONTINUITYD_STATE_DIR=", "CONTINUITYD_SOCKET=", "PATH=" + bin + ":" + os.Getenv("PATH")}
	sock := filepath.Join(home, ".local", "state", "continuityd", "continuityd.sock")
	if runtimeDir {
		env = append(env, "XDG_RUNTIME_DIR="+run)
		sock = filepath.Join(run, "continuityd", "continuityd.sock")
	} else {
		env = append(env, "XDG_RUNTIME_DIR=")
	}
	_, runPart, _ := strings.Cut(first, "&& ")
	args := strings.Fields(strings.ReplaceAll(runPart, "~", home))
	p := startProcWith(t, func(c *exec.Cmd) {
		c.Path, c.Args = installed, args
		cred(c)
	}, sock, env)
	if st := get(t, p.client(), "/v1/status"); !strings.Contains(mustJSON(t, st), project) {
		t.Fatalf("the first command's daemon does not work in %s: %v", project, st)
	}
	before := dirList(t, project)

	var script strings.Builder
	for i, block := range blocks {
		fmt.Fprintf(&script, "echo '=== tour block %d'\n%s\n", i+1, block)
	}
	sh := exec.Command("bash", "-e", "-x", "-o", "pipefail", "-c", script.String())
	sh.Dir = project
	sh.Env = append(os.Environ(), env...)
	cred(sh)
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Run(); err != nil {
		t.Fatalf("the tour: %v (the last command traced is the one that failed)\n%s\ndaemon log:\n%s", err, out.String(), p.stderr)
	}
	for _, bad := range []string{`"code":"INTERNAL"`, "not reachable"} {
		if strings.Contains(out.String(), bad) {
			t.Fatalf("the tour printed %s:\n%s", bad, out.String())
		}
	}
	if after := dirList(t, project); after != before {
		t.Errorf("the tour left files in the project:\nbefore %s\nafter  %s", before, after)
	}
	configs, _ := filepath.Glob(filepath.Join(tmp, "*", "continuityd.toml"))
	if len(configs) != 1 {
		t.Fatalf("the tour's last steps left no config in its scratch directory: %v", configs)
	}
	// The commitment the tour dropped is dropped, with its reason.
	r := get(t, p.client(), "/v1/continuity?peek=1")
	dropped := false
	for _, c := range r["commitments"].([]any) {
		c := c.(map[string]any)
		dropped = dropped || c["title"] == "try the old client once more" && c["status"] == "dropped"
	}
	if !dropped {
		t.Errorf("the tour's commitment was not dropped: %v", r["commitments"])
	}
}

// dirList names what dir holds, its files and directories, and their sizes.
func dirList(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "%s:%d ", strings.TrimPrefix(p, dir), fi.Size())
		}
		return nil
	})
	return b.String()
}
