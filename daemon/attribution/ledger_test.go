package attribution

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// mustOK returns a checker for a ledger call's (Result, error).
func mustOK(t *testing.T) func(Result, error) Result {
	return func(res Result, err error) Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// credits returns path→"by/kind" for a result's credits.
func credits(res Result) map[string]string {
	m := map[string]string{}
	for _, c := range res.Credits {
		k := c.Path
		if _, dup := m[k]; dup {
			k += "#2"
		}
		m[k] = c.By + "/" + c.Kind
	}
	return m
}

// Each kind of source credits its agent; what nobody claimed is outside.
func TestLedgerCreditsEachKind(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"src/a.go"}, At: at(1)}))
	must(l.Tool(ToolEvent{Agent: "reviewer", Kind: KindTranscript, Paths: []string{"src/b.go"}, At: at(1.2)}))
	must(l.ShellStart("builder", "toolu_1", at(2)))
	res := must(l.Burst(Burst{Paths: []string{"src/a.go", "src/b.go", "gen/out.txt", "notes.md"}, At: at(2.5)}))
	must(l.ShellEnd("builder", "toolu_1", at(3)))
	want := map[string]string{
		"src/a.go":    "builder/edit",
		"src/b.go":    "reviewer/transcript",
		"gen/out.txt": "builder/shell",
		"notes.md":    "builder/shell", // the shell ran: its window takes everything unclaimed
	}
	if got := credits(res); !reflect.DeepEqual(got, want) {
		t.Errorf("credits = %v, want %v", got, want)
	}
	// After the window (and its slack), a change nobody claims is outside.
	res = must(l.Burst(Burst{Paths: []string{"notes.md"}, At: at(3 + DefaultSlack.Seconds() + 1)}))
	if got := credits(res); got["notes.md"] != "/outside" {
		t.Errorf("a change after the shell window = %v, want outside", got)
	}
}

// A claim that comes after the watcher saw the change (a hook is slower than
// fsnotify) credits it anew; one too far apart in time does not.
func TestLedgerLateClaimRecredits(t *testing.T) {
	must := mustOK(t)
	l := New(Options{Slack: 2 * time.Second})
	res := must(l.Burst(Burst{Paths: []string{"a.go", "b.go"}, At: at(10)}))
	if got := credits(res); got["a.go"] != "/outside" || got["b.go"] != "/outside" {
		t.Fatalf("before any claim: %v", got)
	}
	res = must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"a.go"}, At: at(11)}))
	if got := credits(res); !reflect.DeepEqual(got, map[string]string{"a.go": "builder/edit"}) {
		t.Errorf("late claim credits %v", got)
	}
	res = must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"b.go"}, At: at(13)}))
	if len(res.Credits) != 0 {
		t.Errorf("a claim 3 s after the change (slack 2 s) credited %v", res.Credits)
	}
	// A shell start reported late covers the changes since it began.
	must(l.Burst(Burst{Paths: []string{"c.go"}, At: at(20)}))
	res = must(l.ShellStart("reviewer", "call_9", at(19)))
	if got := credits(res); !reflect.DeepEqual(got, map[string]string{"c.go": "reviewer/shell"}) {
		t.Errorf("late shell start credits %v", got)
	}
	got := l.ChangesSince(at(0))
	byPath := map[string]string{}
	for _, c := range got {
		byPath[c.Path] = c.By
	}
	if want := map[string]string{"a.go": "builder", "b.go": "", "c.go": "reviewer"}; !reflect.DeepEqual(byPath, want) {
		t.Errorf("ChangesSince = %v, want %v", byPath, want)
	}
}

// A path two agents change is a conflict told once, to both, until one of
// them checkpoints past it.
func TestLedgerConflictUntilCheckpoint(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"src/shared.go"}, At: at(1)}))
	res := must(l.Burst(Burst{Paths: []string{"src/shared.go"}, At: at(1)}))
	if len(res.Conflicts) != 0 {
		t.Fatalf("one agent's change is a conflict: %v", res.Conflicts)
	}
	must(l.Tool(ToolEvent{Agent: "reviewer", Kind: KindEdit, Paths: []string{"src/shared.go"}, At: at(60)}))
	res = must(l.Burst(Burst{Paths: []string{"src/shared.go"}, At: at(60)}))
	want := []Conflict{{Path: "src/shared.go", Agents: []string{"builder", "reviewer"}, At: at(60)}}
	if !reflect.DeepEqual(res.Conflicts, want) {
		t.Fatalf("conflicts = %v, want %v", res.Conflicts, want)
	}
	for _, a := range []string{"builder", "reviewer"} {
		if got := l.Conflicts(a); !reflect.DeepEqual(got, want) {
			t.Errorf("Conflicts(%s) = %v, want %v", a, got, want)
		}
	}
	// The reviewer changes it again: still the same conflict, not a new one.
	must(l.Tool(ToolEvent{Agent: "reviewer", Kind: KindEdit, Paths: []string{"src/shared.go"}, At: at(120)}))
	if res = must(l.Burst(Burst{Paths: []string{"src/shared.go"}, At: at(120)})); len(res.Conflicts) != 0 {
		t.Errorf("a second change told the conflict again: %v", res.Conflicts)
	}
	l.Checkpoint("builder", at(200))
	for _, a := range []string{"builder", "reviewer"} {
		if got := l.Conflicts(a); len(got) != 0 {
			t.Errorf("after builder's checkpoint, Conflicts(%s) = %v", a, got)
		}
	}
	// A checkpoint before the latest change does not end it.
	must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"src/shared.go"}, At: at(300)}))
	if res = must(l.Burst(Burst{Paths: []string{"src/shared.go"}, At: at(300)})); len(res.Conflicts) != 1 {
		t.Errorf("builder's change after its checkpoint, reviewer's still open: conflicts %v", res.Conflicts)
	}
	l.Checkpoint("reviewer", at(250))
	if got := l.Conflicts("builder"); len(got) != 0 {
		t.Errorf("reviewer checkpointed past its change; Conflicts(builder) = %v", got)
	}
}

// by_others lists what others changed since the agent last looked, named
// as that agent sees them.
func TestLedgerByOthersSinceVisit(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	must(l.Tool(ToolEvent{Agent: "reviewer", Kind: KindEdit, Paths: []string{"src/b.go"}, At: at(1)}))
	must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"src/a.go"}, At: at(1)}))
	must(l.Burst(Burst{Paths: []string{"src/a.go", "src/b.go", "README.md"}, At: at(1)}))
	l.Visit("builder", at(0))
	want := []ByOther{{Path: "README.md", By: "outside"}, {Path: "src/b.go", By: "agent:reviewer"}}
	if got := l.ByOthers("builder"); !reflect.DeepEqual(got, want) {
		t.Errorf("ByOthers(builder) = %v, want %v", got, want)
	}
	l.Visit("builder", at(5))
	if got := l.ByOthers("builder"); len(got) != 0 {
		t.Errorf("after a visit, ByOthers = %v", got)
	}
	if got := l.ChangedBy("builder", at(0)); !reflect.DeepEqual(got, []string{"src/a.go"}) {
		t.Errorf("ChangedBy(builder) = %v", got)
	}
	if Label("builder", "builder") != "agent" || Label("builder", "") != "outside" || Label("builder", "reviewer") != "agent:reviewer" {
		t.Error("Label")
	}
}

// Two agents' shells running at once both take a change neither claimed:
// it is then a conflict between them.
func TestLedgerOverlappingShells(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	must(l.ShellStart("builder", "1", at(1)))
	must(l.ShellStart("reviewer", "1", at(2)))
	res := must(l.Burst(Burst{Paths: []string{"go.sum"}, At: at(3)}))
	if got := credits(res); got["go.sum"] != "builder/shell" || got["go.sum#2"] != "reviewer/shell" {
		t.Errorf("credits = %v", got)
	}
	if len(res.Conflicts) != 1 {
		t.Errorf("conflicts = %v", res.Conflicts)
	}
	// An end without a start is ignored; an end before its start is clamped.
	if res, err := l.ShellEnd("nobody", "x", at(4)); err != nil || len(res.Credits) != 0 {
		t.Errorf("ShellEnd without start: %v, %v", res, err)
	}
}

// What comes in is checked: a bad event is refused whole, naming the
// problem; nothing is half recorded.
func TestLedgerRefusesBadInput(t *testing.T) {
	l := New(Options{})
	for name, ev := range map[string]ToolEvent{
		"no agent":      {Kind: KindEdit, Paths: []string{"a"}},
		"odd kind":      {Agent: "a", Kind: "magic", Paths: []string{"a"}},
		"absolute":      {Agent: "a", Kind: KindEdit, Paths: []string{"/etc/passwd"}},
		"climbs out":    {Agent: "a", Kind: KindEdit, Paths: []string{"ok.go", "../x"}},
		"unclean":       {Agent: "a", Kind: KindEdit, Paths: []string{"src//a.go"}},
		"control chars": {Agent: "a", Kind: KindEdit, Paths: []string{"a\x1b[31m.go"}},
		"agent escape":  {Agent: "a\nb", Kind: KindEdit, Paths: []string{"a"}},
	} {
		if _, err := l.Tool(ev); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "\x1b") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error carries a raw control character: %q", name, err)
		}
	}
	if _, err := l.Burst(Burst{Paths: []string{"ok", ""}}); err == nil {
		t.Error("a burst with an empty path was accepted")
	}
	if got := l.ChangesSince(time.Time{}); len(got) != 0 {
		t.Errorf("refused events left changes: %v", got)
	}
}

// Memory is bounded: the oldest paths are forgotten, each path keeps its
// last changes only.
func TestLedgerBounds(t *testing.T) {
	must := mustOK(t)
	l := New(Options{MaxPaths: 3, MaxHistory: 2})
	for i, p := range []string{"a", "b", "c", "d"} {
		must(l.Burst(Burst{Paths: []string{p}, At: at(float64(i))}))
	}
	for i := range 5 {
		must(l.Burst(Burst{Paths: []string{"d"}, At: at(float64(10 + i))}))
	}
	got := l.ChangesSince(time.Time{})
	var paths []string
	for _, c := range got {
		paths = append(paths, c.Path)
	}
	if want := []string{"b", "c", "d", "d"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("kept %v, want %v", paths, want)
	}
}

// Claims are bounded too: the oldest is forgotten first, and no longer
// explains a change.
func TestLedgerClaimBound(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	must(l.Tool(ToolEvent{Agent: "a", Kind: KindEdit, Paths: []string{"old.go"}, At: at(0)}))
	must(l.Tool(ToolEvent{Agent: "a", Kind: KindEdit, Paths: []string{"kept.go"}, At: at(0)}))
	paths := make([]string, 0, maxClaims-1)
	for i := range maxClaims - 1 {
		paths = append(paths, "gen/f"+strconv.Itoa(i))
	}
	must(l.Tool(ToolEvent{Agent: "a", Kind: KindEdit, Paths: paths, At: at(0)}))
	got := credits(must(l.Burst(Burst{Paths: []string{"old.go", "kept.go", "gen/f0"}, At: at(0)})))
	want := map[string]string{"old.go": "/outside", "kept.go": "a/edit", "gen/f0": "a/edit"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("credits = %v, want %v", got, want)
	}
}

// The ledger answers about changes only from when it began to be told of
// them (Options.Since): before that, and with no start at all, it cannot.
func TestLedgerKnowsSinceItBegan(t *testing.T) {
	began := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := New(Options{Since: began})
	if !l.Knows(began) || !l.Knows(began.Add(time.Minute)) || l.Knows(began.Add(-time.Nanosecond)) || !l.Since().Equal(began) {
		t.Fatalf("a ledger begun at %s: Knows(began) %v, Knows(later) %v, Knows(earlier) %v, Since %s",
			began, l.Knows(began), l.Knows(began.Add(time.Minute)), l.Knows(began.Add(-time.Nanosecond)), l.Since())
	}
	if New(Options{}).Knows(began) {
		t.Fatal("a ledger with no start knows the past")
	}
}

// An edit claim that arrives after the watcher credited the change to
// another agent's shell window takes it back, as it would have had it come
// first: the change is the claimant's, and the shell's agent holds no
// conflict over it.
func TestLedgerLateEditClaimBeatsAShellWindow(t *testing.T) {
	must := mustOK(t)
	l := New(Options{Slack: 2 * time.Second})
	must(l.ShellStart("reviewer", "call_1", at(9)))
	res := must(l.Burst(Burst{Paths: []string{"a.go", "gen.txt"}, At: at(10)}))
	if got := credits(res); got["a.go"] != "reviewer/shell" {
		t.Fatalf("before the edit hook: %v", got)
	}
	res = must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"a.go"}, At: at(10.5)}))
	if got := credits(res); !reflect.DeepEqual(got, map[string]string{"a.go": "builder/edit"}) {
		t.Fatalf("late edit claim credits %v, want a.go to builder", got)
	}
	if len(res.Conflicts) != 0 {
		t.Errorf("a change taken back from a shell is a conflict: %v", res.Conflicts)
	}
	must(l.ShellEnd("reviewer", "call_1", at(11)))
	byPath := map[string][]string{}
	for _, c := range l.ChangesSince(at(0)) {
		byPath[c.Path] = append(byPath[c.Path], c.By+"/"+c.Kind)
	}
	if want := map[string][]string{"a.go": {"builder/edit"}, "gen.txt": {"reviewer/shell"}}; !reflect.DeepEqual(byPath, want) {
		t.Errorf("ChangesSince = %v, want %v", byPath, want)
	}
	for _, agent := range []string{"builder", "reviewer"} {
		if c := l.Conflicts(agent); len(c) != 0 {
			t.Errorf("Conflicts(%s) = %v, want none", agent, c)
		}
	}
	if got := l.ChangedBy("reviewer", at(0)); !reflect.DeepEqual(got, []string{"gen.txt"}) {
		t.Errorf("ChangedBy(reviewer) = %v, want only gen.txt", got)
	}
	// The same when the shell's agent is the claimant: one change, an edit.
	must(l.ShellStart("builder", "call_2", at(30)))
	must(l.Burst(Burst{Paths: []string{"b.go"}, At: at(31)}))
	res = must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"b.go"}, At: at(31.2)}))
	if got := credits(res); !reflect.DeepEqual(got, map[string]string{"b.go": "builder/edit"}) {
		t.Errorf("own shell then own edit claim: %v", got)
	}
}

// Every agent on a workdir reports the burst the shared watcher told them
// all: a key is credited once, whoever reports it first.
func TestLedgerCreditsABurstKeyOnce(t *testing.T) {
	must := mustOK(t)
	l := New(Options{})
	b := Burst{Paths: []string{"a.go"}, At: at(1), Key: "k1"}
	if got := credits(must(l.Burst(b))); got["a.go"] != "/outside" {
		t.Fatalf("first report: %v", got)
	}
	if res := must(l.Burst(b)); len(res.Credits) != 0 {
		t.Errorf("the same burst reported again credited %v", res.Credits)
	}
	b.Key = "k2"
	if got := credits(must(l.Burst(b))); got["a.go"] != "/outside" {
		t.Errorf("another burst: %v", got)
	}
	if n := len(l.ChangesSince(at(0))); n != 2 {
		t.Errorf("%d changes kept, want 2 (one per burst)", n)
	}
}

// A shell window whose end never comes (an interrupted call) closes at
// the agent's stop or session end (EndShells), or MaxShell after its
// start, whichever is first: a person's edit after it is outside, even
// within Slack (the call had surely ended by then; Slack is for a
// PostToolUse that trails its changes), and a window closed by the bound
// is reported.
func TestShellWindowWithoutItsEnd(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	burst := func(l *Ledger, p string, s int) Result {
		t.Helper()
		res, err := l.Burst(Burst{Paths: []string{p}, At: at(s)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	by := func(l *Ledger, p string) string {
		t.Helper()
		for _, c := range l.ChangesSince(time.Time{}) {
			if c.Path == p {
				return c.By
			}
		}
		t.Fatalf("%s not recorded", p)
		return ""
	}

	// Closed at the session's end.
	l := New(Options{Slack: 5 * time.Second})
	if _, err := l.ShellStart("builder", "toolu_1", at(0)); err != nil {
		t.Fatal(err)
	}
	burst(l, "during.txt", 10)
	if ended := l.EndShells("builder", at(20)); len(ended) != 1 || !ended[0].End.Equal(at(20)) {
		t.Fatalf("EndShells: %+v", ended)
	}
	burst(l, "after-end.txt", 22)
	if by(l, "during.txt") != "builder" || by(l, "after-end.txt") != "" {
		t.Errorf("during the call: %q, after the session's end: %q; want builder, outside", by(l, "during.txt"), by(l, "after-end.txt"))
	}
	if ended := l.EndShells("builder", at(70)); len(ended) != 0 {
		t.Errorf("a second EndShells closed %+v", ended)
	}

	// Closed by the bound.
	l = New(Options{Slack: 5 * time.Second, MaxShell: time.Minute})
	if _, err := l.ShellStart("builder", "toolu_2", at(0)); err != nil {
		t.Fatal(err)
	}
	burst(l, "within.txt", 30)
	res := burst(l, "past-bound.txt", 61)
	if by(l, "within.txt") != "builder" || by(l, "past-bound.txt") != "" {
		t.Errorf("within the bound: %q, past it: %q; want builder, outside", by(l, "within.txt"), by(l, "past-bound.txt"))
	}
	if len(res.Expired) != 1 || res.Expired[0].Agent != "builder" || !res.Expired[0].End.Equal(at(60)) {
		t.Errorf("the window closed by the bound is not reported: %+v", res.Expired)
	}
	// Its late end changes nothing: it was closed.
	if res, _ := l.ShellEnd("builder", "toolu_2", at(300)); len(res.Credits) != 0 || by(l, "past-bound.txt") != "" {
		t.Errorf("a late end re-credited %+v", res.Credits)
	}
}
