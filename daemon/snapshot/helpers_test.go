package snapshot

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"go.uber.org/goleak"
)

// children are the other roles the test binary plays as a child process,
// by the environment variable that asks for each (registered by the
// files that use them).
var children = map[string]func() int{}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	for env, run := range children {
		if os.Getenv(env) != "" {
			os.Exit(run())
		}
	}
	goleak.VerifyTestMain(m)
}

// userGitEnv is the environment for the git runs that build the user's
// repository in tests, isolated from the machine's configuration.
func userGitEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	}
}

// userGit runs git in dir as the user would, isolated from the machine.
func userGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = userGitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testClock hands out distinct, increasing times.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time {
	c.t = c.t.Add(time.Second)
	return c.t
}

// newStore opens a store for workdir in a fresh state directory, with opt's
// other fields as given.
func newStore(t testing.TB, workdir string, opt Options) *Store {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = filepath.Join(t.TempDir(), "agents", "a", "snapshots.git")
	}
	opt.Workdir = workdir
	if opt.Now == nil {
		opt.Now = (&testClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}).now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Open(context.Background(), opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustTake(t testing.TB, s *Store, trigger string, seq uint64) (Snapshot, bool) {
	t.Helper()
	snap, isNew, err := s.Take(context.Background(), trigger, seq)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return snap, isNew
}

// entry is one file of a snapshot's tree.
type entry struct {
	mode, content string
}

// treeOf reads a snapshot's files from the store: path → mode and content
// (a symbolic link's content is its target).
func treeOf(t testing.TB, s *Store, id string) map[string]entry {
	t.Helper()
	ctx := context.Background()
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-z", "--full-tree", id}})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		head, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(head)
		e := entry{mode: f[0]}
		if f[1] == "blob" {
			b, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "blob", f[2]}})
			if err != nil {
				t.Fatal(err)
			}
			e.content = string(b)
		}
		files[path] = e
	}
	return files
}

// newestModes are the mode lines the store holds for its newest
// snapshot (what a Take compares with, to tell whether anything changed).
func newestModes(t testing.TB, s *Store) string {
	t.Helper()
	s.lock.Lock()
	defer s.lock.Unlock()
	_, modes := s.take.Newest()
	return modes
}

// mustOID reads an object id.
func mustOID(t testing.TB, id string) repo.OID {
	t.Helper()
	o, ok := repo.ParseOID(id)
	if !ok {
		t.Fatalf("%q is not an object id", id)
	}
	return o
}

// treeID is the tree of snapshot id.
func treeID(t testing.TB, s *Store, id string) string {
	t.Helper()
	tree, err := s.git.Text(context.Background(), "rev-parse", id+"^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// treeDiff lists the files where trees a and b (treeOf) differ, the
// sides named an and bn.
func treeDiff(a, b map[string]entry, an, bn string) []string {
	var diff []string
	for _, p := range keys(a) {
		if b[p] != a[p] {
			diff = append(diff, fmt.Sprintf("%q: %s %+v, %s %+v", p, an, a[p], bn, b[p]))
		}
	}
	for _, p := range keys(b) {
		if _, ok := a[p]; !ok {
			diff = append(diff, fmt.Sprintf("%q: missing from %s, %s %+v", p, an, bn, b[p]))
		}
	}
	return diff
}

// allObjects returns every object's content in the store, reachable or not.
func allObjects(t testing.TB, s *Store) []byte {
	t.Helper()
	out, err := s.git.Run(context.Background(), repo.Call{Args: []string{"cat-file", "--batch-all-objects", "--batch", "--unordered"}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fingerprint describes every entry under dir: kind, mode, size, modification
// time and content hash (a link's target). Two equal fingerprints mean
// nothing was written, created, removed or renamed there.
func fingerprint(t testing.TB, dir string) map[string]string {
	t.Helper()
	fp := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		fp[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func diffFingerprints(before, after map[string]string) string {
	var lines []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			lines = append(lines, "removed "+k)
		} else if w != v {
			lines = append(lines, fmt.Sprintf("changed %s: %s → %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			lines = append(lines, "added "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
