package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/internal/testwait"
)

// Agents on one workdir share its ledger; another workdir has its own, and
// an agent without a workdir has none.
func TestWorkdirLedgersOnePerWorkdir(t *testing.T) {
	var l workdirLedgers
	a, b, c := l.For("/srv/work"), l.For("/srv/work/"), l.For("/srv/other")
	if a == nil || a != b {
		t.Fatalf("two agents on /srv/work got ledgers %p and %p, want one", a, b)
	}
	if c == nil || c == a {
		t.Fatalf("/srv/other got %p, want its own (not %p)", c, a)
	}
	if l.For("") != nil {
		t.Fatal("an agent without a workdir got a ledger")
	}
}

// A conflict found by either agent's capture is told to every agent it
// names on that workdir, once each, and counted; an agent that stopped
// listening is not told.
func TestWorkdirLedgersTellConflictToBoth(t *testing.T) {
	var l workdirLedgers
	told := map[string]int{}
	for _, name := range []string{"builder", "reviewer", "bystander"} {
		l.listen("/srv/work", name, func(c attribution.Conflict) { told[name]++ })
	}
	l.listen("/srv/other", "builder", func(attribution.Conflict) { told["elsewhere"]++ })
	c := attribution.Conflict{Path: "src/a.go", Agents: []string{"builder", "reviewer"}}
	l.teller("/srv/work/")(c)
	if told["builder"] != 1 || told["reviewer"] != 1 || told["bystander"] != 0 || told["elsewhere"] != 0 {
		t.Fatalf("told %v, want builder and reviewer once each", told)
	}
	l.listen("/srv/work", "reviewer", nil)
	l.teller("/srv/work")(c)
	if told["builder"] != 2 || told["reviewer"] != 1 {
		t.Fatalf("after reviewer stopped listening: told %v", told)
	}
}

// Ledgers are kept across runs: what one run's ledger learnt, the next
// run's has; a file that belongs to another workdir (or does not decode)
// is set aside and a new ledger starts, knowing nothing from before.
func TestWorkdirLedgersKeptAcrossRuns(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	var run1 workdirLedgers
	run1.keepIn(dir, log)
	lg := run1.For("/srv/work")
	since := lg.Since()
	if _, err := lg.Tool(attribution.ToolEvent{Agent: "builder", Kind: attribution.KindEdit, Paths: []string{"a.go"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Burst(attribution.Burst{Paths: []string{"a.go"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	run1.save()

	var run2 workdirLedgers
	run2.keepIn(dir, log)
	got := run2.For("/srv/work")
	if !got.Since().Equal(since) || len(got.ChangedBy("builder", since.Add(-time.Second))) != 1 {
		t.Fatalf("the next run's ledger: since %v (want %v), builder changed %v (want a.go)", got.Since(), since, got.ChangedBy("builder", since.Add(-time.Second)))
	}

	// Another workdir's file under this one's name is not believed.
	other := run2.file(workdirKey("/srv/other"))
	raw, err := os.ReadFile(run2.file(workdirKey("/srv/work")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := run2.For("/srv/other")
	if len(fresh.ChangesSince(time.Time{})) != 0 || !fresh.Since().After(since) {
		t.Fatalf("/srv/other believed /srv/work's ledger: %v since %v", fresh.ChangesSince(time.Time{}), fresh.Since())
	}
	if aside, _ := filepath.Glob(other + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("the mismatched file was not set aside: %v", aside)
	}
}

// A ledger's change is saved by saveLoop when it happens, not at the next
// tick of a clock (the interval here is an hour): the file holds it while
// the loop runs. A ledger read back from its file tells saveLoop of its
// changes too.
func TestWorkdirLedgersSavedOnChange(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	changedBy := func(l *workdirLedgers, agent string) func() bool {
		return func() bool {
			raw, err := os.ReadFile(l.file(workdirKey("/srv/work")))
			if err != nil {
				return false
			}
			lg, err := decodeLedger(raw, "/srv/work", attribution.Options{})
			return err == nil && len(lg.ChangedBy(agent, lg.Since().Add(-time.Second))) == 1
		}
	}
	for run, agent := range []string{"builder", "reviewer"} {
		l := workdirLedgers{saveEvery: time.Hour}
		l.keepIn(dir, log)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.saveLoop(ctx)
		}()
		lg := l.For("/srv/work")
		if _, err := lg.Tool(attribution.ToolEvent{Agent: agent, Kind: attribution.KindEdit, Paths: []string{agent + ".go"}, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := lg.Burst(attribution.Burst{Paths: []string{agent + ".go"}, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, func() string { return fmt.Sprintf("run %d: %s's change not in the ledger's file", run+1, agent) }, changedBy(&l, agent))
		cancel()
		<-done
	}
}
