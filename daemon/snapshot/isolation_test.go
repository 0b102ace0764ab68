package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/gittool/gittooltest"
)

// The user's repository is byte-identical before and after snapshots and
// restores (.git contents, index, refs, stash, config, hooks), none of its
// hooks or configured programs run, no user or system git configuration
// applies, and GIT_* variables of the daemon's environment do not leak in.
func TestUserRepositoryUntouched(t *testing.T) {
	wd := t.TempDir()
	marker := filepath.Join(t.TempDir(), "markers")
	if err := os.MkdirAll(marker, 0o755); err != nil {
		t.Fatal(err)
	}
	// A hook that leaves a marker if anything runs it.
	hook := func(name string) string {
		return "#!/bin/sh\necho ran >> " + filepath.Join(marker, name) + "\ncat >/dev/null 2>&1 || true\nexit 0\n"
	}

	// The user's repository: commits, a branch, a stash, a staged change,
	// hooks for every event, a configured fsmonitor, a user info/exclude.
	write(t, wd, "src/main.go", "package main\n")
	write(t, wd, "README.md", "readme\n")
	write(t, wd, ".gitignore", "*.tmp\n")
	userGit(t, wd, "init", "-q", "-b", "main")
	userGit(t, wd, "add", "-A")
	userGit(t, wd, "commit", "-q", "-m", "first")
	userGit(t, wd, "branch", "feature")
	write(t, wd, "README.md", "stashed change\n")
	userGit(t, wd, "stash", "-q")
	write(t, wd, "src/main.go", "package main // staged\n")
	userGit(t, wd, "add", "src/main.go")
	write(t, wd, "src/main.go", "package main // staged, then edited\n")
	userGit(t, wd, "config", "core.fsmonitor", filepath.Join(wd, ".git", "hooks", "fsmonitor"))
	userGit(t, wd, "config", "core.hooksPath", filepath.Join(wd, ".git", "hooks"))
	for _, h := range []string{"pre-commit", "post-commit", "post-checkout", "reference-transaction", "post-index-change", "pre-auto-gc", "fsmonitor"} {
		write(t, wd, ".git/hooks/"+h, hook(h))
		os.Chmod(filepath.Join(wd, ".git", "hooks", h), 0o755)
	}
	write(t, wd, ".git/info/exclude", "local-notes.md\n")
	write(t, wd, "local-notes.md", "excluded by the user's info/exclude\n")
	// A linked-worktree style .git file and a nested repository.
	write(t, wd, "wt/.git", "gitdir: "+filepath.Join(wd, ".git", "worktrees", "wt")+"\n")
	write(t, wd, "wt/file.txt", "in a linked worktree\n")
	write(t, wd, "nested/lib.go", "package nested\n")
	userGit(t, filepath.Join(wd, "nested"), "init", "-q")
	userGit(t, filepath.Join(wd, "nested"), "add", "-A")
	userGit(t, filepath.Join(wd, "nested"), "commit", "-q", "-m", "nested")

	// A hostile environment for the daemon: a global config with hooks, an
	// fsmonitor, an excludes file and a pager; GIT_DIR and friends pointing
	// at the user's repository.
	home := t.TempDir()
	write(t, home, ".gitconfig", "[core]\n\thooksPath = "+filepath.Join(home, "hooks")+"\n\tfsmonitor = "+filepath.Join(home, "hooks", "fsmonitor")+
		"\n\texcludesFile = "+filepath.Join(home, "ignore")+"\n[user]\n\tname = Global\n")
	write(t, home, "ignore", "*.go\n")
	for _, h := range []string{"pre-commit", "reference-transaction", "post-index-change", "fsmonitor"} {
		write(t, home, "hooks/"+h, hook("global-"+h))
		os.Chmod(filepath.Join(home, "hooks", h), 0o755)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	t.Setenv("GIT_DIR", filepath.Join(wd, ".git"))
	t.Setenv("GIT_WORK_TREE", wd)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(wd, ".git", "index"))
	t.Setenv("GIT_OBJECT_DIRECTORY", filepath.Join(wd, ".git", "objects"))
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
	t.Setenv("GIT_CONFIG_VALUE_0", filepath.Join(home, "hooks"))

	userRepo := fingerprint(t, filepath.Join(wd, ".git"))
	nestedRepo := fingerprint(t, filepath.Join(wd, "nested", ".git"))

	s := newStore(t, wd, Options{})
	ctx := context.Background()
	v1, _ := mustTake(t, s, "start", 1)
	write(t, wd, "src/main.go", "package main // edited by the agent\n")
	write(t, wd, "new.txt", "new\n")
	v2, isNew := mustTake(t, s, "quiet", 2)
	if !isNew {
		t.Fatal("no snapshot after changes")
	}
	if _, err := s.Restore(ctx, v1.ID, []string{"src/main.go"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, v2.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, v2.ID, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Diff(ctx, v2.ID, "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}

	if d := diffFingerprints(userRepo, fingerprint(t, filepath.Join(wd, ".git"))); d != "" {
		t.Errorf("the user's .git changed:\n%s", d)
	}
	if d := diffFingerprints(nestedRepo, fingerprint(t, filepath.Join(wd, "nested", ".git"))); d != "" {
		t.Errorf("the nested repository's .git changed:\n%s", d)
	}
	if ents, _ := os.ReadDir(marker); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("hooks or configured programs ran: %v", names)
	}

	// The user's own git sees exactly what it saw: the staged change, the
	// stash, the branches.
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_WORK_TREE")
	os.Unsetenv("GIT_INDEX_FILE")
	os.Unsetenv("GIT_OBJECT_DIRECTORY")
	os.Unsetenv("GIT_CONFIG_COUNT")
	if got := userGit(t, wd, "stash", "list"); !strings.Contains(got, "stash@{0}") {
		t.Errorf("stash list = %q", got)
	}
	if got := userGit(t, wd, "diff", "--cached", "--name-only"); !strings.HasSuffix(got, "\nsrc/main.go") && got != "src/main.go" {
		t.Errorf("staged = %q", got)
	}

	tree := treeOf(t, s, v2.ID)
	for p := range tree {
		if p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git") {
			t.Errorf("a snapshot holds %s", p)
		}
	}
	// The global excludesFile (*.go) did not apply; the user's info/exclude
	// was not read (it is the user's repository's, not the workdir's rules).
	for _, p := range []string{"src/main.go", "local-notes.md"} {
		if _, ok := tree[p]; !ok {
			t.Errorf("the snapshot lacks %s: %v", p, keys(tree))
		}
	}
	// A nested repository is left out whole (git would otherwise run
	// `git status` inside it, with its own configuration), and named.
	if _, ok := tree["nested"]; ok {
		t.Error("the snapshot holds the nested repository")
	}
	if _, ok := tree["nested/lib.go"]; ok {
		t.Error("the snapshot read into the nested repository")
	}
	d, err := s.Show(ctx, v2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tree["wt/file.txt"]; ok {
		t.Error("the snapshot holds a linked worktree's files")
	}
	if !slices.Contains(d.SkippedFiles, Skipped{Path: "nested", Reason: ReasonRepository}) ||
		!slices.Contains(d.SkippedFiles, Skipped{Path: "wt", Reason: ReasonRepository}) {
		t.Errorf("skipped = %+v, want the nested repository named", d.SkippedFiles)
	}
}

// TestHostileWorkdirRunsNothing: a workdir whose repository points every
// key that can start a program at a marker script (gittooltest), whose
// .gitattributes names filter, diff and merge drivers defined there, and
// which is a partial clone fetching through core.sshCommand: snapshots
// (full, and from what changed), restores (a path, a dry run, the whole
// tree), diffs, Show and GC run none of them, and the snapshots hold the
// bytes as they are. The work tree's own git runs the clean filter (the
// setup is live).
func TestHostileWorkdirRunsNothing(t *testing.T) {
	wd := t.TempDir()
	h := gittooltest.New(t, wd)
	h.MakePartialClone(t)
	ctx := context.Background()
	s := newStore(t, wd, Options{})
	v1, _ := mustTake(t, s, "start", 1)
	write(t, wd, "a.txt", "edited by the agent\n")
	write(t, wd, "new.txt", "new\n")
	v2, isNew := mustTake(t, s, "quiet", 2)
	if !isNew {
		t.Fatal("no snapshot after changes")
	}
	s.NoteChanged([]string{"b.txt"})
	write(t, wd, "b.txt", "edited again\n")
	mustTake(t, s, "quiet", 3)
	if _, err := s.Restore(ctx, v1.ID, []string{"a.txt"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, v2.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, v2.ID, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, against := range []string{"", v1.ID} {
		if _, _, err := s.Diff(ctx, v2.ID, against, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Show(ctx, v2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if f := h.Fired(); len(f) > 0 {
		t.Fatalf("the store's git ran the workdir's programs: %v", f)
	}
	if got := treeOf(t, s, v2.ID)["a.txt"].content; got != "edited by the agent\n" {
		t.Errorf("a.txt in the snapshot = %q: a filter applied", got)
	}
	if got := read(t, wd, "a.txt"); got != "edited by the agent\n" {
		t.Errorf("a.txt restored = %q", got)
	}
	if out, _ := h.Plain("add", "-A"); len(h.Fired()) == 0 {
		t.Fatalf("the control does not work: the work tree's own git add ran no filter:\n%s", out)
	}
}
