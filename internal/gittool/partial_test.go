package gittool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			why, err := PartialClone(dir, dir)
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
	if why, err := PartialClone(wt, common); err != nil || !strings.Contains(why, "config.worktree") {
		t.Fatalf("why %q err %v", why, err)
	}
	if why, err := PartialClone(t.TempDir(), t.TempDir()); err != nil || why != "" {
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
