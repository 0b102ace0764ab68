package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/upstream/local"
)

// userGitEnv is the environment of the git runs that play the user: the
// machine's configuration is not read.
func userGitEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	}
}

func userGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = userGitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirDigest is every entry under dir (names, modes, contents, link
// targets, mtimes): byte-identical means the same digest.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s %v %d\n", rel, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintln(h, target)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// waitWork waits for the archive to hold a work record that passes ok.
func waitWork(t *testing.T, agentDir string, within time.Duration, ok func(*capsule.Work) bool) capsule.Write {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ws, _ := local.ReadAll(agentDir)
		for _, w := range ws {
			if w.Kind == capsule.WriteWork && w.Work != nil && ok(w.Work) {
				return w
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such work record in the archive within %s; archive: %+v", within, ws)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func workFile(w *capsule.Work, path string) *capsule.WorkFile {
	for i := range w.Files {
		if w.Files[i].Path == path {
			return &w.Files[i]
		}
	}
	return nil
}

// TestSnapshotEmbeddedDefaultWritesWorkRecord: the embedded default (the
// local upstream only), in a real git repository: edits and a commit, then
// the burst goes quiet (20 s, the default), and the archive holds an
// automatic work record with the snapshot id, the changed files with their
// line counts and the commit; an ignored file and an oversized one are in
// no snapshot, and the oversized one is listed as skipped.
func TestSnapshotEmbeddedDefaultWritesWorkRecord(t *testing.T) {
	t.Parallel()
	dir, _ := os.MkdirTemp("", "cdsnap")
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	writeFile(t, work, "main.go", "package main\n\nfunc main() {}\n")
	writeFile(t, work, ".gitignore", "*.log\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")

	sock := filepath.Join(dir, "run", "continuityd.sock")
	state := filepath.Join(dir, "state")
	env := []string{"CONTINUITYD_STATE_DIR=" + state, "CONTINUITYD_SOCKET=" + sock}
	p := startProcIn(t, work, sock, env, "run")
	// The start snapshot is taken in the background: the edits below are
	// a burst after it only once it is there.
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()

	writeFile(t, work, "main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n")
	writeFile(t, work, "tokenizer.go", "package main\n\n// tokenize splits.\nfunc tokenize() {}\n")
	writeFile(t, work, "debug.log", "ignored\n")
	writeFile(t, work, "big.bin", strings.Repeat("x", 9<<20))
	userGit(t, work, "add", "tokenizer.go")
	userGit(t, work, "commit", "-q", "-m", "teach the tokenizer")

	agentDir := filepath.Join(state, "agents", "default")
	rec := waitWork(t, agentDir, 40*time.Second, func(w *capsule.Work) bool {
		return w.Snapshot != nil && workFile(w, "tokenizer.go") != nil
	})
	w := rec.Work
	if rec.Origin != capsule.OriginAutomatic || w.Trigger != "quiet" {
		t.Errorf("record origin %s trigger %s", rec.Origin, w.Trigger)
	}
	if f := workFile(w, "main.go"); f == nil || f.Status != "modified" || f.LinesAdded != 3 || f.LinesDeleted != 1 {
		t.Errorf("main.go in the record: %+v (files %+v)", f, w.Files)
	}
	if f := workFile(w, "tokenizer.go"); f.Status != "added" || f.LinesAdded != 4 {
		t.Errorf("tokenizer.go in the record: %+v", f)
	}
	if workFile(w, "debug.log") != nil || workFile(w, "big.bin") != nil {
		t.Errorf("an ignored or oversized file is in the record: %+v", w.Files)
	}
	if !slices.Contains(w.Snapshot.Skipped, "big.bin") {
		t.Errorf("the oversized file is not listed as skipped: %+v", w.Snapshot)
	}
	if len(w.Commits) != 1 || !strings.Contains(w.Commits[0], "teach the tokenizer") {
		t.Errorf("commits in the record: %v", w.Commits)
	}
	if rec.Checkpoint == nil || rec.Checkpoint.WorkingState == nil || rec.Checkpoint.WorkingState.ResultRef.Value != w.Snapshot.ID ||
		!strings.HasPrefix(*rec.Checkpoint.WorkingState.LastResult, "2 files changed (+") {
		t.Errorf("the Q-Day part of the record: %+v", rec.Checkpoint)
	}

	// No snapshot holds the ignored or the oversized file: the start
	// snapshot lists every file it holds as added.
	list := get(t, c, "/v1/snapshots")["snapshots"].([]any)
	for _, s := range list {
		id := s.(map[string]any)["id"].(string)
		d := get(t, c, "/v1/snapshots/"+id)
		for _, f := range d["files"].([]any) {
			if path := f.(map[string]any)["path"]; path == "debug.log" || path == "big.bin" {
				t.Errorf("snapshot %s holds %s", id, path)
			}
		}
	}
	// Resume shows the latest snapshot, and the markdown says it in a line.
	r := get(t, c, "/v1/continuity?peek=1")
	if snap, _ := r["snapshot"].(map[string]any); snap == nil || snap["id"] != w.Snapshot.ID {
		t.Errorf("resume snapshot: %v, want %s", r["snapshot"], w.Snapshot.ID)
	}
	code, out, errOut := cli(t, []string{"CONTINUITYD_SOCKET=" + sock}, "", "resume", "--peek")
	if code != 0 || !strings.Contains(out, "last snapshot ") || !strings.Contains(out, "continuityd snapshot diff") {
		t.Errorf("markdown resume (exit %d): %s %s", code, out, errOut)
	}
}

// snapshotWorkspace is a workspace whose policy acts within a second.
func snapshotWorkspace(t *testing.T, extra string) (*workspace, string) {
	w := newWorkspace(t)
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[watch]\nquiet = \"100ms\"\n%s\n[policy]\nquiet = \"500ms\"\nmin_interval = \"500ms\"\n", extra)
	f.Close()
	return w, filepath.Join(w.dir, "work")
}

func restore(t *testing.T, c *http.Client, id string, body any) (int, map[string]any) {
	t.Helper()
	code, m, err := post(c, "/v1/snapshots/"+id+"/restore", body)
	if err != nil {
		t.Fatal(err)
	}
	return code, m
}

// TestSnapshotRestoreLeavesTheRepositoryAlone: a real repository with a
// stash, its own config and a staged change; snapshots and restores never
// change a byte of its .git. A restore of one path brings back that path
// only; its safety snapshot undoes it; a dry run changes nothing; a path
// outside the workdir is refused.
func TestSnapshotRestoreLeavesTheRepositoryAlone(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "")
	writeFile(t, work, "a.go", "a1\n")
	writeFile(t, work, "b.go", "b1\n")
	userGit(t, work, "init", "-q", "-b", "main")
	userGit(t, work, "config", "user.name", "Someone Else")
	userGit(t, work, "add", "-A")
	userGit(t, work, "commit", "-q", "-m", "first")
	writeFile(t, work, "a.go", "stashed\n")
	userGit(t, work, "stash", "-q")
	writeFile(t, work, "b.go", "staged\n")
	userGit(t, work, "add", "b.go")
	writeFile(t, work, "b.go", "b1\n")
	gitBefore := dirDigest(t, filepath.Join(work, ".git"))

	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	// The start snapshot is taken in the background: the edits below are
	// a burst after it only once it is there.
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()
	agentDir := filepath.Join(w.state, "agents", "builder")

	writeFile(t, work, "a.go", "a2\n")
	writeFile(t, work, "b.go", "b2\n")
	s1 := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && workFile(wk, "a.go") != nil && workFile(wk, "b.go") != nil
	}).Work.Snapshot.ID
	writeFile(t, work, "a.go", "a3\n")
	writeFile(t, work, "b.go", "b3\n")
	writeFile(t, work, "c.go", "c3\n")
	waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool {
		return wk.Snapshot != nil && wk.Snapshot.ID != s1 && workFile(wk, "c.go") != nil
	})

	// A dry run lists and changes nothing.
	code, m := restore(t, c, s1, map[string]any{"paths": []string{"a.go"}, "dry_run": true})
	if code != 200 || m["dry_run"] != true || len(m["changes"].([]any)) != 1 || readFile(t, work, "a.go") != "a3\n" {
		t.Fatalf("dry run: %d %v; a.go %q", code, m, readFile(t, work, "a.go"))
	}
	// Outside the workdir: refused, nothing changes.
	for _, bad := range []string{"../x", "/etc/passwd", ".git/config"} {
		code, m = restore(t, c, s1, map[string]any{"paths": []string{bad}})
		if code != 400 {
			t.Errorf("restore of %q: %d %v", bad, code, m)
		}
	}
	// One path: that path only.
	code, m = restore(t, c, s1, map[string]any{"paths": []string{"a.go"}})
	if code != 200 || m["safety"] == "" {
		t.Fatalf("restore: %d %v", code, m)
	}
	if a, b, cc := readFile(t, work, "a.go"), readFile(t, work, "b.go"), readFile(t, work, "c.go"); a != "a2\n" || b != "b3\n" || cc != "c3\n" {
		t.Fatalf("after restoring a.go: a %q b %q c %q", a, b, cc)
	}
	// The safety snapshot undoes it (through the CLI).
	safety := m["safety"].(string)
	code, out, errOut := cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "restore", safety, "--all")
	if code != 0 || readFile(t, work, "a.go") != "a3\n" {
		t.Fatalf("undo (exit %d): %s %s; a.go %q", code, out, errOut, readFile(t, work, "a.go"))
	}
	// The list holds the snapshot restored from and the tree as it was
	// before the undo: a new one with the trigger restore, unless the
	// policy's quiet snapshot of the restored tree came first (it may, on
	// a slow machine), which the undo then names.
	undoSafety := regexp.MustCompile(`the tree as it was is snapshot ([0-9a-f]{12})`).FindStringSubmatch(out)
	if undoSafety == nil {
		t.Fatalf("the undo does not name the tree as it was: %s", out)
	}
	code, out, _ = cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "list")
	line := regexp.MustCompile(`(?m)^` + undoSafety[1] + `\s.*$`).FindString(out)
	if code != 0 || !strings.Contains(out, s1[:12]) || line == "" || !strings.Contains(line, " restore ") && !strings.Contains(line, " quiet ") {
		t.Errorf("snapshot list (exit %d) without %s and the undo's %s: %s", code, s1[:12], undoSafety[1], out)
	}
	code, out, _ = cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "diff", s1)
	if code != 0 || !strings.Contains(out, "+a2") {
		t.Errorf("snapshot diff (exit %d): %s", code, out)
	}
	// --stat lists the files with their counts; -- PATH... keeps to those.
	code, out, _ = cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "diff", s1, "--stat")
	if code != 0 || !strings.Contains(out, " a.go | 2 +-") || !strings.Contains(out, " b.go | 2 +-") || !strings.Contains(out, "2 files changed") || strings.Contains(out, "@@") {
		t.Errorf("snapshot diff --stat (exit %d): %s", code, out)
	}
	code, out, _ = cli(t, []string{"CONTINUITYD_SOCKET=" + w.socket}, "", "snapshot", "diff", s1, "--", "b.go")
	if code != 0 || !strings.Contains(out, "+b2") || strings.Contains(out, "a.go") {
		t.Errorf("snapshot diff -- b.go (exit %d): %s", code, out)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := dirDigest(t, filepath.Join(work, ".git")); got != gitBefore {
		t.Errorf("the user's .git changed across snapshots and restores")
	}
	if st := userGit(t, work, "stash", "list"); !strings.Contains(st, "stash@{0}") {
		t.Errorf("the stash is gone: %q", st)
	}
}

// TestSnapshotNonGitWorkdir: a workdir that is no repository; .gitignore,
// [watch] ignore and the size limit hold; resume and the MCP-facing list
// work; with git missing the daemon runs on, degraded ["snapshots"].
func TestSnapshotNonGitWorkdir(t *testing.T) {
	t.Parallel()
	w, work := snapshotWorkspace(t, "ignore = [\"private/\"]\n\n[snapshots]\nmax_file_size = 1000\n")
	writeFile(t, work, ".gitignore", "*.tmp\n")
	writeFile(t, work, "notes.md", "one\n")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	// The start snapshot is taken in the background: the edits below are
	// a burst after it only once it is there.
	waitSnapshots(t, p, 1, time.Minute, "the start snapshot")
	c := p.client()
	defer c.CloseIdleConnections()
	agentDir := filepath.Join(w.state, "agents", "builder")
	writeFile(t, work, "notes.md", "one\ntwo\n")
	writeFile(t, work, "scratch.tmp", "x\n")
	writeFile(t, work, "private/key.txt", "x\n")
	writeFile(t, work, "large.dat", strings.Repeat("y", 2000))
	rec := waitWork(t, agentDir, 60*time.Second, func(wk *capsule.Work) bool { return workFile(wk, "notes.md") != nil })
	for _, f := range rec.Work.Files {
		if f.Path != "notes.md" {
			t.Errorf("the record lists %s", f.Path)
		}
	}
	if !slices.Contains(rec.Work.Snapshot.Skipped, "large.dat") {
		t.Errorf("large.dat is not listed as skipped: %+v", rec.Work.Snapshot)
	}
	d := get(t, c, "/v1/snapshots/"+rec.Work.Snapshot.ID+"?diff=1")
	if diff, _ := d["diff"].(string); !strings.Contains(diff, "+two") || strings.Contains(diff, "key.txt") {
		t.Errorf("diff: %v", d)
	}
	p.terminate(t)

	// Without git: the daemon runs, the agent is degraded and says why.
	p = startProc(t, w.socket, []string{"PATH=" + t.TempDir()}, "run", "--config", w.config)
	c = p.client()
	defer c.CloseIdleConnections()
	r := get(t, c, "/v1/continuity?peek=1")
	if deg, _ := r["degraded"].([]any); !slices.Contains(deg, any("snapshots")) {
		t.Errorf("degraded without git: %v", r["degraded"])
	}
	resp, err := c.Get("http://d/v1/snapshots")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(p.stderr.String(), "snapshots") {
		t.Errorf("snapshots without git: %d; log %s", resp.StatusCode, p.stderr)
	}
	if code, m, _ := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": "still here"}); code != 200 {
		t.Errorf("a checkpoint without git: %d %v", code, m)
	}
}
