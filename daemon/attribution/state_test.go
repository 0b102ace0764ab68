package attribution

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A ledger restored from its State (through JSON, as it is kept on disk)
// answers as the one that made it: who changed what, open work
// (conflicts), visits, and since when it knows.
func TestStateRoundTrip(t *testing.T) {
	must := mustOK(t)
	l := New(Options{Since: at(0)})
	g0 := l.Generation()
	must(l.Tool(ToolEvent{Agent: "builder", Kind: KindEdit, Paths: []string{"src/a.go"}, At: at(1)}))
	must(l.Burst(Burst{Paths: []string{"src/a.go", "notes.md"}, At: at(2)}))
	must(l.Tool(ToolEvent{Agent: "reviewer", Kind: KindEdit, Paths: []string{"src/a.go"}, At: at(30)}))
	must(l.Burst(Burst{Paths: []string{"src/a.go"}, At: at(30.5)}))
	must(l.ShellStart("reviewer", "t1", at(40)))
	must(l.Burst(Burst{Paths: []string{"gen/out.txt"}, At: at(41)}))
	l.Visit("builder", at(1.8))
	if l.Generation() == g0 {
		t.Fatal("Generation did not move with the changes")
	}
	raw, err := json.Marshal(l.State())
	if err != nil {
		t.Fatal(err)
	}
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(Options{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Knows(at(0)) || r.Knows(at(-1)) {
		t.Errorf("restored Since = %v, want %v", r.Since(), at(0))
	}
	for _, agent := range []string{"builder", "reviewer"} {
		if got, want := r.ByOthers(agent), l.ByOthers(agent); !reflect.DeepEqual(got, want) {
			t.Errorf("ByOthers(%s) = %v, want %v", agent, got, want)
		}
		if got, want := r.Conflicts(agent), l.Conflicts(agent); !reflect.DeepEqual(got, want) || len(want) == 0 {
			t.Errorf("Conflicts(%s) = %v, want %v (not empty)", agent, got, want)
		}
		if got, want := r.ChangedBy(agent, at(0)), l.ChangedBy(agent, at(0)); !reflect.DeepEqual(got, want) {
			t.Errorf("ChangedBy(%s) = %v, want %v", agent, got, want)
		}
	}
	if got, want := r.ChangesSince(at(0)), l.ChangesSince(at(0)); !reflect.DeepEqual(got, want) {
		t.Errorf("ChangesSince = %v, want %v", got, want)
	}
	// The restored ledger goes on: a checkpoint ends the conflict.
	r.Checkpoint("builder", at(50))
	if c := r.Conflicts("reviewer"); len(c) != 0 {
		t.Errorf("conflicts after builder's checkpoint: %v", c)
	}
}

// A state read from disk is untrusted: a bad name, path or kind is refused
// with what is wrong, and the bounds hold.
func TestRestoreChecksTheState(t *testing.T) {
	good := Change{Path: "a.go", By: "builder", Kind: KindEdit, At: at(1)}
	for name, tc := range map[string]struct {
		s    State
		want string
	}{
		"no since":       {State{Changes: []Change{good}}, "without since"},
		"path escapes":   {State{Since: at(0), Changes: []Change{{Path: "../etc/passwd", Kind: KindOutside, At: at(1)}}}, "changes[0]"},
		"absolute path":  {State{Since: at(0), Changes: []Change{{Path: "/etc/passwd", Kind: KindOutside, At: at(1)}}}, "changes[0]"},
		"unknown kind":   {State{Since: at(0), Changes: []Change{{Path: "a.go", By: "x", Kind: "magic", At: at(1)}}}, `kind "magic"`},
		"outside by":     {State{Since: at(0), Changes: []Change{{Path: "a.go", By: "x", Kind: KindOutside, At: at(1)}}}, "kind"},
		"edit nobody":    {State{Since: at(0), Changes: []Change{{Path: "a.go", Kind: KindEdit, At: at(1)}}}, "changes[0].by"},
		"no time":        {State{Since: at(0), Changes: []Change{{Path: "a.go", Kind: KindOutside}}}, "no time"},
		"bad pending":    {State{Since: at(0), Changes: []Change{good}, Pending: map[string]map[string]time.Time{"builder": {"../x": at(1)}}}, "pending[builder]"},
		"bad visit name": {State{Since: at(0), Visits: map[string]time.Time{"": at(1)}}, "visits"},
	} {
		if _, err := Restore(Options{}, tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Restore error = %v, want one with %q", name, err, tc.want)
		}
	}

	var s State
	s.Since = at(0)
	for i := range 5 {
		s.Changes = append(s.Changes, Change{Path: "p" + string(rune('a'+i)), Kind: KindOutside, At: at(float64(i))})
		s.Changes = append(s.Changes, Change{Path: "pa", Kind: KindOutside, At: at(float64(10 + i))})
	}
	r, err := Restore(Options{MaxPaths: 3, MaxHistory: 2}, s)
	if err != nil {
		t.Fatal(err)
	}
	st := r.State()
	paths := map[string]int{}
	for _, c := range st.Changes {
		paths[c.Path]++
	}
	if len(paths) != 3 || paths["pa"] != 2 {
		t.Errorf("restored %v: want 3 paths (the most recently changed), pa's 2 latest changes", paths)
	}
}

// TestDeltasRebuildTheState: whatever events come, the State taken at
// some point with every Delta taken after it (each through JSON, as a
// keeper writes them) gives the ledger's State now, as Restore reads it:
// random edits, shells, bursts (past MaxPaths: forgotten paths),
// checkpoints and visits, with States and Deltas taken at random.
func TestDeltasRebuildTheState(t *testing.T) {
	o := Options{MaxPaths: 6, MaxHistory: 3, Since: at(0)}
	agents := []string{"builder", "reviewer", "tester"}
	paths := []string{"a.go", "b.go", "src/c.go", "src/d.go", "e.md", "f/g/h.txt", "i.go", "j.go", "k.go", "l.go"}
	through := func(v, into any) {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
	}
	restored := func(s State) string {
		l, err := Restore(o, s)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		raw, _ := json.Marshal(l.State())
		return string(raw)
	}
	for seed := range 100 {
		r := rand.New(rand.NewPCG(uint64(seed), 23))
		l := New(o)
		var got, base State // what a keeper's file and journal hold, and the file alone
		var journal []Delta
		s0, _ := l.TakeState() // a keeper's first write is whole
		through(s0, &got)
		through(s0, &base)
		now := at(0)
		for i := range 300 {
			now = now.Add(time.Duration(r.IntN(4000)) * time.Millisecond)
			randomEvent(t, r, l, agents, paths, now)
			switch r.IntN(10) {
			case 0:
				s, _ := l.TakeState()
				got, base, journal = State{}, State{}, nil
				through(s, &got)
				through(s, &base)
			case 1, 2, 3, 4, 5:
				d, _ := l.TakeDelta()
				var kept Delta
				through(d, &kept)
				got.Apply(kept)
				journal = append(journal, kept)
				if g, w := restored(got), restored(l.State()); g != w {
					t.Fatalf("seed %d, event %d: the State and its Deltas give\n%s\nthe ledger holds\n%s", seed, i, g, w)
				}
				var all State // the file and the whole journal, applied at once as a load does
				through(base, &all)
				all.Apply(journal...)
				if g, w := restored(all), restored(l.State()); g != w {
					t.Fatalf("seed %d, event %d: the State and its %d Deltas at once give\n%s\nthe ledger holds\n%s", seed, i, len(journal), g, w)
				}
			}
		}
		d, _ := l.TakeDelta()
		got.Apply(d)
		if g, w := restored(got), restored(l.State()); g != w {
			t.Fatalf("seed %d, at the end: the State and its Deltas give\n%s\nthe ledger holds\n%s", seed, g, w)
		}
		if d, _ := l.TakeDelta(); !d.Empty() {
			t.Fatalf("seed %d: a Delta right after another holds %+v", seed, d)
		}
	}
}
