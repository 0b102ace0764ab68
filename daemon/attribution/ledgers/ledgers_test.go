package ledgers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestMain checks that no test leaves a goroutine behind (a save loop
// whose context ended has returned).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Agents on one workdir share its ledger; another workdir has its own, and
// an agent without a workdir has none.
func TestWorkdirLedgersOnePerWorkdir(t *testing.T) {
	var l Set
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
	var l Set
	told := map[string]int{}
	for _, name := range []string{"builder", "reviewer", "bystander"} {
		l.Listen("/srv/work", name, func(c attribution.Conflict) { told[name]++ })
	}
	l.Listen("/srv/other", "builder", func(attribution.Conflict) { told["elsewhere"]++ })
	c := attribution.Conflict{Path: "src/a.go", Agents: []string{"builder", "reviewer"}}
	l.Teller("/srv/work/")(c)
	if told["builder"] != 1 || told["reviewer"] != 1 || told["bystander"] != 0 || told["elsewhere"] != 0 {
		t.Fatalf("told %v, want builder and reviewer once each", told)
	}
	l.Listen("/srv/work", "reviewer", nil)
	l.Teller("/srv/work")(c)
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
	var run1 Set
	run1.KeepIn(dir, log)
	lg := run1.For("/srv/work")
	since := lg.Since()
	if _, err := lg.Tool(attribution.ToolEvent{Agent: "builder", Kind: attribution.KindEdit, Paths: []string{"a.go"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Burst(attribution.Burst{Paths: []string{"a.go"}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	run1.Save()

	var run2 Set
	run2.KeepIn(dir, log)
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

// A ledger's change is saved by SaveLoop when it happens, not at the next
// tick of a clock (the interval here is an hour): the file holds it while
// the loop runs. A ledger read back from its file tells SaveLoop of its
// changes too.
func TestWorkdirLedgersSavedOnChange(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	changedBy := func(l *Set, agent string) func() bool {
		return func() bool {
			var next Set // what the next run would read
			next.KeepIn(dir, log)
			lg := next.For("/srv/work")
			return len(lg.ChangedBy(agent, lg.Since().Add(-time.Second))) == 1
		}
	}
	for run, agent := range []string{"builder", "reviewer"} {
		l := Set{saveEvery: time.Hour}
		l.KeepIn(dir, log)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.SaveLoop(ctx)
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

// TestLedgerJournal: after the first write of a run (the whole ledger), a
// write appends what changed to the journal and leaves the file alone; the
// next run reads the file and the journal back to the ledger this one
// holds; a journal past the file's size is folded into it (emptied); a
// journal left over from before the last whole write changes nothing; a
// last line cut short is dropped, and a damaged line is set aside with
// what follows it.
func TestLedgerJournal(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	const workdir = "/srv/work"
	var run1 Set
	run1.KeepIn(dir, log)
	lg := run1.For(workdir)
	file := run1.file(workdirKey(workdir))
	journal := file + journalExt
	now := time.Now()
	edit := func(i int) {
		t.Helper()
		p := fmt.Sprintf("src/f%04d.go", i)
		if _, err := lg.Tool(attribution.ToolEvent{Agent: "builder", Kind: attribution.KindEdit, Paths: []string{p}, At: now.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if _, err := lg.Burst(attribution.Burst{Paths: []string{p, "shared.md"}, At: now.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	read := func() string {
		var next Set
		next.KeepIn(dir, log)
		raw, _ := json.Marshal(next.For(workdir).State())
		return string(raw)
	}
	state := func() string {
		raw, _ := json.Marshal(lg.State())
		return string(raw)
	}

	edit(0)
	run1.Save()
	whole := size(file)
	edit(1)
	lg.Visit("builder", now.Add(90*time.Second))
	run1.Save()
	if size(file) != whole || size(journal) <= 0 {
		t.Fatalf("the second write: file %d bytes (was %d), journal %d: want the file alone and the change in the journal", size(file), whole, size(journal))
	}
	if got, want := read(), state(); got != want {
		t.Fatalf("the next run reads\n%s\nthis one holds\n%s", got, want)
	}

	// A journal past the file's size (and minJournal) is folded in.
	for i := 2; size(journal) != 0; i++ {
		if i > 5000 {
			t.Fatalf("the journal grew to %d bytes (the file %d) and was never folded in", size(journal), size(file))
		}
		edit(i)
		run1.Save()
	}
	if size(file) <= whole {
		t.Fatalf("folded in: the file is %d bytes, was %d", size(file), whole)
	}
	if got, want := read(), state(); got != want {
		t.Fatalf("after folding the next run reads\n%s\nthis one holds\n%s", got, want)
	}

	// A journal a crash left whole after the file was written: its records
	// are older than the file, and change nothing.
	edit(9000)
	run1.Save()
	stale, err := os.ReadFile(journal)
	if err != nil || len(stale) == 0 {
		t.Fatalf("no journal record: %v", err)
	}
	var run2 Set
	run2.KeepIn(dir, log)
	lg2 := run2.For(workdir)
	if _, err := lg2.Burst(attribution.Burst{Paths: []string{"late.go"}, At: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	run2.Save() // the run's first write: whole, the journal emptied
	want2, _ := json.Marshal(lg2.State())
	if err := os.WriteFile(journal, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != string(want2) {
		t.Fatalf("a stale journal changed the ledger:\n%s\nwant\n%s", got, want2)
	}

	// A last line cut short is dropped; the lines before it count.
	if _, err := lg2.Burst(attribution.Burst{Paths: []string{"later.go"}, At: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	os.Truncate(journal, 0)
	run2.Save()
	want3, _ := json.Marshal(lg2.State())
	f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"gen":999999,"delta":{"paths":{"cut.go":`)
	f.Close()
	if got := read(); got != string(want3) {
		t.Fatalf("with a line cut short the next run reads\n%s\nwant\n%s", got, want3)
	}
	if aside, _ := filepath.Glob(journal + ".damaged-*"); len(aside) != 0 {
		t.Fatalf("a line cut short set the journal aside: %v", aside)
	}

	// A damaged line before the end: the journal is set aside.
	if err := os.WriteFile(journal, []byte("not json\n"+string(stale)), 0o600); err != nil {
		t.Fatal(err)
	}
	read()
	if aside, _ := filepath.Glob(journal + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("the damaged journal was not set aside: %v", aside)
	}

	// A journal without its file is not read (a new ledger's generations
	// start again), and goes aside.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	var run3 Set
	run3.KeepIn(dir, log)
	if got := run3.For(workdir).ChangesSince(time.Time{}); len(got) != 0 {
		t.Fatalf("a journal without its file was read: %v", got)
	}
	if aside, _ := filepath.Glob(journal + ".orphan-*"); len(aside) != 1 {
		t.Fatalf("the journal without its file was not set aside: %v", aside)
	}
}
