package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/capture"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// restoreAgent starts agent "builder" with snapshots over workdir (a real
// git repository holding files), watched, sharing ledger; it returns the
// agent and its start snapshot.
func restoreAgent(t *testing.T, workdir string, ledger *attribution.Ledger, watch bool) (*testAgent, ops.Snapshot) {
	t.Helper()
	o := testOptions(t, t.TempDir())
	o.Config.Workdir = workdir
	o.Snapshots = &snapshot.Options{}
	o.Capture.Attribution = ledger
	o.Capture.Watch = capture.WatchOptions{Enabled: watch, Quiet: 100 * time.Millisecond}
	a := startAgent(t, o)
	var list []ops.Snapshot
	testwait.Until(t, func() string { return fmt.Sprintf("no start snapshot: %+v", list) }, func() bool {
		var err error
		list, err = a.SnapshotList(context.Background())
		return err == nil && len(list) == 1
	})
	return a, list[0]
}

// gitRepo makes a git repository in a fresh directory holding files
// (path → content), committed.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	for p, c := range files {
		writeWork(t, dir, p, c)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@example.com", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func writeWork(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// files reads the workdir's files (those of interest) as they are now;
// "" for one that is not there.
func files(t *testing.T, dir string, paths ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		m[p] = string(b)
	}
	return m
}

func changedPaths(cs []snapshot.FileChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path+":"+c.Status)
	}
	return out
}

// TestRestoreKeepsToTheAgentsOwnPaths: two agents and a person change a
// shared workdir after a snapshot (the ledger told directly what each
// did). A restore without paths puts back only this agent's files (a
// change and a file it created; a directory credited to it is not
// restored whole over the person's file in it), leaves the other agent's
// and the person's and names them with whose they are; its dry run says the same
// and changes nothing; all then restores the whole tree.
func TestRestoreKeepsToTheAgentsOwnPaths(t *testing.T) {
	work := gitRepo(t, map[string]string{"mine.go": "mine v1\n", "theirs.go": "theirs v1\n", "notes/person.txt": "person v1\n", "same.txt": "same\n"})
	ledger := attribution.New(attribution.Options{Since: time.Now()})
	a, start := restoreAgent(t, work, ledger, true)
	ctx := context.Background()
	all := []string{"mine.go", "new.go", "theirs.go", "notes/person.txt", "same.txt"}

	// After the snapshot: builder edits mine.go and creates new.go, agent
	// "other" edits theirs.go, a person edits notes/person.txt.
	writeWork(t, work, "mine.go", "mine v2\n")
	writeWork(t, work, "new.go", "new\n")
	writeWork(t, work, "theirs.go", "theirs v2\n")
	writeWork(t, work, "notes/person.txt", "person v2\n")
	at := time.Now()
	for _, ev := range []attribution.ToolEvent{
		// The directory too (as a watcher may report one): that is not
		// the person's file in it.
		{Agent: "builder", Kind: attribution.KindEdit, Paths: []string{"mine.go", "new.go", "notes"}, At: at},
		{Agent: "other", Kind: attribution.KindTranscript, Paths: []string{"theirs.go"}, At: at},
	} {
		if _, err := ledger.Tool(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ledger.Burst(attribution.Burst{Paths: []string{"mine.go", "new.go", "notes", "theirs.go", "notes/person.txt"}, At: at}); err != nil {
		t.Fatal(err)
	}
	before := files(t, work, all...)
	wantChanges := []string{"mine.go:modified", "new.go:deleted"}
	wantLeft := []LeftAlone{{Path: "notes/person.txt", By: "outside"}, {Path: "theirs.go", By: "agent:other"}}

	dry, err := a.SnapshotRestore(ctx, start.ID[:12], []byte(`{"dry_run":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if dry.Scope != ScopeMine || !dry.DryRun || dry.Safety != "" || !slices.Equal(changedPaths(dry.Changes), wantChanges) || !slices.Equal(dry.LeftAlone, wantLeft) {
		t.Fatalf("dry run: scope %q, changes %v, left alone %+v, safety %q; want mine, %v, %+v, none", dry.Scope, changedPaths(dry.Changes), dry.LeftAlone, dry.Safety, wantChanges, wantLeft)
	}
	if now := files(t, work, all...); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Fatalf("a dry run changed the tree: %v, was %v", now, before)
	}

	res, err := a.SnapshotRestore(ctx, start.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scope != ScopeMine || res.DryRun || res.Safety == "" || !slices.Equal(changedPaths(res.Changes), wantChanges) || !slices.Equal(res.LeftAlone, wantLeft) {
		t.Fatalf("restore: scope %q, changes %v, left alone %+v, safety %q; want mine, %v, %+v, a safety snapshot", res.Scope, changedPaths(res.Changes), res.LeftAlone, res.Safety, wantChanges, wantLeft)
	}
	want := map[string]string{"mine.go": "mine v1\n", "new.go": "", "theirs.go": "theirs v2\n", "notes/person.txt": "person v2\n", "same.txt": "same\n"}
	if now := files(t, work, all...); fmt.Sprint(now) != fmt.Sprint(want) {
		t.Fatalf("after the restore the tree is %v, want %v", now, want)
	}

	// all: the whole tree, the other agent's and the person's files too.
	dryAll, err := a.SnapshotRestore(ctx, start.ID, []byte(`{"all":true,"dry_run":true}`))
	wantAll := []string{"notes/person.txt:modified", "theirs.go:modified"}
	if err != nil || dryAll.Scope != ScopeAll || !slices.Equal(changedPaths(dryAll.Changes), wantAll) || dryAll.LeftAlone != nil {
		t.Fatalf("all, dry run: %+v (%v); want %v", dryAll, err, wantAll)
	}
	resAll, err := a.SnapshotRestore(ctx, start.ID, []byte(`{"all":true}`))
	if err != nil || !slices.Equal(changedPaths(resAll.Changes), wantAll) {
		t.Fatalf("all: %+v (%v)", resAll, err)
	}
	want = map[string]string{"mine.go": "mine v1\n", "new.go": "", "theirs.go": "theirs v1\n", "notes/person.txt": "person v1\n", "same.txt": "same\n"}
	if now := files(t, work, all...); fmt.Sprint(now) != fmt.Sprint(want) {
		t.Fatalf("after restoring all the tree is %v, want %v", now, want)
	}

	// all with paths is refused: which is meant?
	_, err = a.SnapshotRestore(ctx, start.ID, []byte(`{"all":true,"paths":["mine.go"]}`))
	if ce := refusal(t, err, capsule.CodeInvalidField); ce.Field != "all" {
		t.Fatalf("all with paths: field %q", ce.Field)
	}
}

// TestRestoreRefusedWhenWhoseIsUnknown: a restore without paths when the
// ledger cannot tell who changed what since the snapshot (it began after
// the snapshot was taken, as after a daemon restart; or the workdir is not
// watched) is refused, naming why and the way out, and changes nothing;
// its dry run gives the same verdict; paths and all still restore.
func TestRestoreRefusedWhenWhoseIsUnknown(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		ledger *attribution.Ledger
		watch  bool
		says   string
	}{
		{"ledger younger than the snapshot", attribution.New(attribution.Options{Since: time.Now().Add(time.Hour)}), true, "before the daemon began to follow"},
		{"workdir not watched", attribution.New(attribution.Options{Since: time.Now()}), false, "not watched"},
	} {
		t.Run(c.name, func(t *testing.T) {
			work := gitRepo(t, map[string]string{"a.txt": "v1\n"})
			a, start := restoreAgent(t, work, c.ledger, c.watch)
			writeWork(t, work, "a.txt", "v2\n")
			for _, body := range []string{`{"dry_run":true}`, ``} {
				_, err := a.SnapshotRestore(ctx, start.ID, []byte(body))
				ce := refusal(t, err, capsule.CodeWhoseUnknown)
				if ce.Status != 409 || !strings.Contains(ce.Message, c.says) || !strings.Contains(ce.Message, "--all") || !strings.Contains(ce.Message, "--path") {
					t.Fatalf("body %q: refusal %d %q: want 409 saying %q and naming --path and --all", body, ce.Status, ce.Message, c.says)
				}
				if got := files(t, work, "a.txt")["a.txt"]; got != "v2\n" {
					t.Fatalf("a refused restore changed a.txt: %q", got)
				}
			}
			res, err := a.SnapshotRestore(ctx, start.ID, []byte(`{"paths":["a.txt"]}`))
			if err != nil || res.Scope != ScopePaths || files(t, work, "a.txt")["a.txt"] != "v1\n" {
				t.Fatalf("restore of a path: %+v (%v)", res, err)
			}
		})
	}
}
