package capture

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/daemon/sources/transcript"
	"github.com/continuityd/continuityd/internal/testwait"
)

// Two agents on one workdir, each with its capture and its real watcher,
// one ledger: a hook's edit claim credits its agent, a shell window its
// agent, a transcript's edit its agent, an unclaimed change goes to
// outside; each change is credited once although both watchers see it
// (builder's reports them);
// a path both agents change is a conflict, told once, until one
// checkpoints; by_others names the others' changes.
func TestAttributionTwoAgentsOneWorkdir(t *testing.T) {
	ledger := attribution.New(attribution.Options{})
	var mu sync.Mutex
	var conflicts []attribution.Conflict
	onConflict := func(c attribution.Conflict) { mu.Lock(); conflicts = append(conflicts, c); mu.Unlock() }
	ob := testOptions(t)
	ob.Attribution, ob.OnConflict, ob.CreditBursts = ledger, onConflict, true
	or := testOptions(t)
	or.Agent, or.Workdir, or.Attribution, or.OnConflict = "reviewer", ob.Workdir, ledger, onConflict
	builder, reviewer := startCapture(t, ob), startCapture(t, or)
	wd := ob.Workdir

	edit := func(c *running, rel string) {
		c.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
			Tool: &capsule.SignalTool{Name: "Edit", Kind: capsule.ToolEdit, Paths: []string{filepath.Join(wd, rel)}, Cwd: wd}})
	}
	// Nobody's: before any tool ran.
	writeFile(t, filepath.Join(wd, "notes.md"), "by hand\n")
	waitCredit(t, ledger, "notes.md", "")
	edit(builder, "src/a.go")
	writeFile(t, filepath.Join(wd, "src", "a.go"), "package a\n")
	reviewer.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
		Tool: &capsule.SignalTool{Name: "Bash", Kind: capsule.ToolShellStart, ID: "toolu_sh", Cwd: wd}})
	writeFile(t, filepath.Join(wd, "gen", "out.txt"), "generated\n")
	waitCredit(t, ledger, "gen/out.txt", "reviewer")
	reviewer.Signal(&capsule.Signal{Kind: capsule.SignalActivity, Event: "tool", At: time.Now(),
		Tool: &capsule.SignalTool{Name: "Bash", Kind: capsule.ToolShellEnd, ID: "toolu_sh"}})
	waitCredit(t, ledger, "src/a.go", "builder")
	// A transcript's edit (no hook ran), relative to the session's cwd.
	reviewer.transcriptTools(&transcript.ToolCalls{Edits: []transcript.Edit{{Tool: "apply_patch", Paths: []string{"docs/b.md"}, At: time.Now()}}}, wd)
	writeFile(t, filepath.Join(wd, "docs", "b.md"), "# b\n")
	waitCredit(t, ledger, "docs/b.md", "reviewer")

	for _, c := range ledger.ChangesSince(time.Time{}) {
		n := 0
		for _, d := range ledger.ChangesSince(time.Time{}) {
			if d.Path == c.Path && d.By == c.By {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s by %q credited %d times (two watchers saw it), want once", c.Path, c.By, n)
		}
	}
	byOthers := builder.ByOthers()
	if !containsByOther(byOthers, "gen/out.txt", "agent:reviewer") || !containsByOther(byOthers, "docs/b.md", "agent:reviewer") ||
		!containsByOther(byOthers, "notes.md", "outside") || containsByOther(byOthers, "src/a.go", "agent") {
		t.Errorf("builder's by_others = %+v", byOthers)
	}

	// Both change src/a.go: a conflict, told once, listed for both.
	edit(reviewer, "src/a.go")
	writeFile(t, filepath.Join(wd, "src", "a.go"), "package a // reviewed\n")
	testwait.Until(t, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("a conflict on src/a.go; told %+v, builder lists %+v", conflicts, builder.Conflicts())
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(conflicts) == 1 && conflicts[0].Path == "src/a.go" && len(reviewer.Conflicts()) == 1 && len(builder.Conflicts()) == 1
	})
	builder.Checkpointed(time.Now())
	if got := reviewer.Conflicts(); len(got) != 0 {
		t.Errorf("after builder checkpointed past it, reviewer still lists %+v", got)
	}
}

// waitCredit waits until the ledger credits path to by ("" : outside).
func waitCredit(t *testing.T, l *attribution.Ledger, path, by string) {
	t.Helper()
	testwait.Until(t, func() string {
		return fmt.Sprintf("%s credited to %q; the ledger holds %+v", path, by, l.ChangesSince(time.Time{}))
	}, func() bool {
		for _, c := range l.ChangesSince(time.Time{}) {
			if c.Path == path && c.By == by {
				return true
			}
		}
		return false
	})
}

func containsByOther(bo []attribution.ByOther, path, by string) bool {
	for _, o := range bo {
		if o.Path == path && o.By == by {
			return true
		}
	}
	return false
}
