package gittool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/internal/safefile"
)

// TestPartialClone reads what makes a repository a partial clone from its
// configuration as git would, includes followed (all of them, whatever
// their condition), and nothing else.
func TestPartialClone(t *testing.T) {
	for _, c := range []struct {
		name, config string
		include      string // written to inc.cfg beside config
		want         string // a piece of the reason; "" for none
		err          string
	}{
		{"plain", "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = ssh://x/y\n", "", "", ""},
		{"extension", "[core]\nrepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n", "", "extensions.partialClone", ""},
		{"extension, case", "[EXTENSIONS]\n\tPARTIALCLONE=o\n", "", "extensions.partialClone", ""},
		{"promisor", "[remote \"lazy one\"]\n\tpromisor = true\n", "", `remote "lazy one"`, ""},
		{"bare promisor", "[remote \"r\"]\n\tpromisor\n", "", `remote "r"`, ""},
		{"promisor false", "[remote \"r\"]\n\tpromisor = off ; not lazy\n", "", "", ""},
		{"promisor quoted", "[remote \"r\"]\n\tpromisor = \"yes\" # lazy\n", "", `remote "r"`, ""},
		{"old subsection syntax", "[remote.r]\n\tpromisor = 1\n", "", `remote "r"`, ""},
		{"same line", "[remote \"r\"] promisor = true\n", "", `remote "r"`, ""},
		{"continued", "[core]\n\tx = a\\\n b\n[remote \"r\"]\n\tpromisor = \\\ntrue\n", "", `remote "r"`, ""},
		{"in a comment", "# [remote \"r\"] promisor = true\n[core]\n\ty = \"a # b\" ; promisor\n", "", "", ""},
		{"included", "[include]\n\tpath = inc.cfg\n", "[remote \"r\"]\n\tpromisor = true\n", "inc.cfg", ""},
		{"included if", "[includeIf \"gitdir:/nowhere/\"]\n\tpath = inc.cfg\n", "[extensions]\npartialclone = r\n", "inc.cfg", ""},
		{"include missing", "[include]\n\tpath = none.cfg\n", "", "", ""},
		{"include from home", "[include]\n\tpath = ~/.lazy\n", "", "", ""},
		{"include loop", "[include]\n\tpath = config\n", "", "", "nest deeper"},
		{"not a config", "[remote \"r\"\n", "", "", "cannot parse"},
		{"unterminated quote", "[core]\n\tx = \"abc\n", "", "", "cannot parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.include != "" {
				if err := os.WriteFile(filepath.Join(dir, "inc.cfg"), []byte(c.include), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			why, err := PartialClone(nil, dir, dir)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case c.want == "" && why != "":
				t.Fatalf("taken for a partial clone: %s", why)
			case c.want != "" && !strings.Contains(why, c.want):
				t.Fatalf("why = %q, want it to name %q", why, c.want)
			}
		})
	}
}

// TestPartialCloneWorktree: a linked worktree's config.worktree counts.
func TestPartialCloneWorktree(t *testing.T) {
	common, wt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(common, "config"), []byte("[core]\n"), 0o644)
	os.WriteFile(filepath.Join(wt, "config.worktree"), []byte("[remote \"w\"]\npromisor = true\n"), 0o644)
	if why, err := PartialClone(nil, wt, common); err != nil || !strings.Contains(why, "config.worktree") {
		t.Fatalf("why %q err %v", why, err)
	}
	if why, err := PartialClone(nil, t.TempDir(), t.TempDir()); err != nil || why != "" {
		t.Fatalf("no config at all: why %q err %v", why, err)
	}
}

// TestRefuses: only a git too old for GIT_NO_LAZY_FETCH refuses, and only
// a partial clone; the error says why and what to do.
func TestRefuses(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config"), []byte("[extensions]\n\tpartialclone = origin\n"), 0o644)
	old := &Tool{Path: "git", Version: Version{2, 39, 3}}
	err := old.Refuses(dir, dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "partial clone") || !strings.Contains(err.Error(), "upgrade git") {
		t.Fatalf("old git: %v", err)
	}
	if err := (&Tool{Path: "git", Version: Version{2, 39, 4}}).Refuses(dir, dir); err != nil {
		t.Fatalf("a git that honours GIT_NO_LAZY_FETCH refused: %v", err)
	}
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "config"), []byte("[core]\n\tbare = false\n"), 0o644)
	if err := old.Refuses(plain, plain); err != nil {
		t.Fatalf("old git, not a partial clone: %v", err)
	}
	os.WriteFile(filepath.Join(plain, "config"), []byte("[core\n"), 0o644)
	if err := old.Refuses(plain, plain); !errors.Is(err, ErrRefused) {
		t.Fatalf("old git, a config that cannot be read: %v", err)
	}
}

// TestDiscover finds the repository git finds: from a subdirectory, a
// linked worktree (its own git directory, the main one's config), a bare
// repository, past a ".git" that is not one; none outside any.
func TestDiscover(t *testing.T) {
	tool, err := Find(t.Context(), "")
	if err != nil {
		t.Skip(err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := tool.Command(t.Context(), Run{Args: args, Dir: dir, Env: []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b",
			"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b"}})
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	top := t.TempDir()
	main := filepath.Join(top, "main")
	os.MkdirAll(filepath.Join(main, "a", "b"), 0o755)
	git(main, "init", "-q", "-b", "main")
	git(main, "commit", "-q", "--allow-empty", "-m", "x")
	git(main, "worktree", "add", "-q", filepath.Join(top, "wt"))
	git(top, "init", "-q", "--bare", filepath.Join(top, "bare.git"))
	os.MkdirAll(filepath.Join(main, "a", "fake", ".git"), 0o755) // not a repository: passed over
	for _, c := range []struct{ dir, gitDir, common string }{
		{main, filepath.Join(main, ".git"), filepath.Join(main, ".git")},
		{filepath.Join(main, "a", "b"), filepath.Join(main, ".git"), filepath.Join(main, ".git")},
		{filepath.Join(main, "a", "fake"), filepath.Join(main, ".git"), filepath.Join(main, ".git")},
		{filepath.Join(top, "wt"), filepath.Join(main, ".git", "worktrees", "wt"), filepath.Join(main, ".git")},
		{filepath.Join(top, "bare.git"), filepath.Join(top, "bare.git"), filepath.Join(top, "bare.git")},
	} {
		g, cd, ok := Discover(nil, c.dir)
		if !ok || g != c.gitDir || cd != c.common {
			t.Errorf("Discover(%s) = %s, %s, %v; want %s, %s", c.dir, g, cd, ok, c.gitDir, c.common)
		}
		if want := git(c.dir, "rev-parse", "--absolute-git-dir"); want != g {
			t.Errorf("git finds %s from %s, Discover %s", want, c.dir, g)
		}
	}
	if g, _, ok := Discover(nil, top); ok {
		t.Errorf("Discover outside any repository = %s", g)
	}
}

// recordingOpener opens as this process does, notes every path it is
// asked for, and refuses those in deny (EACCES) as the open of a user who
// may not read them would.
type recordingOpener struct {
	deny  map[string]bool
	asked []string
}

func (o *recordingOpener) Open(path string, opt safefile.OpenOptions) (*os.File, fs.FileInfo, error) {
	o.asked = append(o.asked, path)
	if o.deny[path] {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	return safefile.Here.Open(path, opt)
}

func (o *recordingOpener) OpenIn(dir, name string) (*os.File, fs.FileInfo, error) {
	return o.Open(filepath.Join(dir, name), safefile.OpenOptions{})
}

// TestRefusesReadsThroughItsOpener: the configuration Refuses reads, and
// the files it includes, are opened through the tool's Opener; a file it
// may not read means the repository cannot be told apart from a partial
// clone, so git is not run on it. Discover looks through the Opener too:
// a repository it may not read is none.
func TestRefusesReadsThroughItsOpener(t *testing.T) {
	dir := t.TempDir()
	config, inc := filepath.Join(dir, "config"), filepath.Join(dir, "inc.cfg")
	os.WriteFile(config, []byte("[include]\n\tpath = inc.cfg\n"), 0o644)
	os.WriteFile(inc, []byte("[core]\n\tbare = false\n"), 0o644)
	old := &Tool{Path: "git", Version: Version{2, 39, 3}}
	op := &recordingOpener{}
	if err := old.ReadsWith(op).Refuses(dir, dir); err != nil {
		t.Fatalf("not a partial clone: %v", err)
	}
	for _, want := range []string{config, inc} {
		if !slices.Contains(op.asked, want) {
			t.Errorf("the Opener was not asked for %s: %q", want, op.asked)
		}
	}
	deny := &recordingOpener{deny: map[string]bool{inc: true}}
	err := old.ReadsWith(deny).Refuses(dir, dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), inc) {
		t.Errorf("an include the Opener refuses: %v, want a refusal naming it", err)
	}
	if old.Opener() != safefile.Here {
		t.Error("ReadsWith changed the tool it was called on")
	}

	repo := t.TempDir()
	for _, d := range []string{".git/objects", ".git/refs", "sub"} {
		os.MkdirAll(filepath.Join(repo, d), 0o755)
	}
	os.WriteFile(filepath.Join(repo, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	if _, _, ok := Discover(&recordingOpener{}, filepath.Join(repo, "sub")); !ok {
		t.Fatal("Discover found no repository")
	}
	op = &recordingOpener{deny: map[string]bool{filepath.Join(repo, ".git", "HEAD"): true}}
	if g, _, ok := Discover(op, filepath.Join(repo, "sub")); ok {
		t.Errorf("Discover found %s through an Opener that may not read its HEAD", g)
	}
	if !slices.Contains(op.asked, filepath.Join(repo, ".git")) {
		t.Errorf("Discover did not look through its Opener: %q", op.asked)
	}
}
