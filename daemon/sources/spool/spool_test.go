package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/statefiles"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestMain checks that no test leaves a goroutine behind (Loop returns once
// its context ends).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Store that keeps what it was given and answers each event
// with answer(agent) (nil: stored).
type recorder struct {
	mu     sync.Mutex
	got    []Entry
	answer func(agent string) error
}

func (r *recorder) store(_ context.Context, e Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.answer != nil {
		err = r.answer(e.Event.Agent)
	}
	if err == nil {
		r.got = append(r.got, e)
	}
	return err
}

func (r *recorder) stored() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// run runs in.Loop until the test ends, and returns when its first ingest
// is over.
func run(t *testing.T, in *Ingester) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	first, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		in.Loop(ctx, func() { close(first) })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-first:
	case <-time.After(60 * time.Second):
		t.Fatal("the first ingest did not end")
	}
}

// spooled lists the names of the entries left in dir (a directory of the
// spool), "" when there is none.
func spooled(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestIngestInPassesInOrder: a spool of more events than one pass takes is
// stored whole, in the order the events happened, each entry removed once
// stored, each with its file's owner and time.
func TestIngestInPassesInOrder(t *testing.T) {
	state := t.TempDir()
	const events = PassFiles + PassFiles/5
	at := time.Now().UTC().Add(-time.Hour)
	for i := range events {
		ev := statefiles.SpooledEvent{Agent: "builder", At: at.Add(time.Duration(i) * time.Millisecond), Signal: capsule.Signal{Kind: "compaction", Phase: "pre"}}
		if err := statefiles.Spool(state, ev); err != nil {
			t.Fatal(err)
		}
	}
	var r recorder
	began := time.Now()
	run(t, New(state, r.store, slog.New(slog.DiscardHandler)))

	got := r.stored()
	if len(got) != events {
		t.Fatalf("stored %d events of %d", len(got), events)
	}
	for i, e := range got {
		if want := at.Add(time.Duration(i) * time.Millisecond); !e.Event.At.Equal(want) {
			t.Fatalf("event %d is the one of %v, want %v: not in the order they happened", i, e.Event.At, want)
		}
		if !e.Owned || e.Owner != uint32(os.Getuid()) {
			t.Fatalf("event %d: owner %d (known %v), want this process's uid %d", i, e.Owner, e.Owned, os.Getuid())
		}
		if e.Made.IsZero() || e.Made.After(began) {
			t.Fatalf("event %d: made at %v, want its file's time, before %v", i, e.Made, began)
		}
	}
	if left := spooled(t, statefiles.SpoolDir(state)); len(left) != 0 {
		t.Fatalf("%d stored entries left in the spool, first %s", len(left), left[0])
	}
}

// TestIngestKeepsSetsAsideAndRefuses: an event for a damaged agent stays
// in the spool and is stored when a Kick comes after the agent is back; an
// event the Store refuses (another user's, or any other error), one that
// does not decode and a symbolic link are moved to spool/failed, which is
// made private, and the link is not read.
func TestIngestKeepsSetsAsideAndRefuses(t *testing.T) {
	state := t.TempDir()
	dir := statefiles.SpoolDir(state)
	at := time.Now().UTC().Add(-time.Hour)
	for i, agent := range []string{"damaged", "foreign", "broken", "builder"} {
		if err := statefiles.Spool(state, statefiles.SpooledEvent{Agent: agent, At: at.Add(time.Duration(i) * time.Second), Signal: capsule.Signal{Kind: "compaction"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000001-garbled.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "00000000000000000002-link.json")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	back := false
	r := recorder{answer: func(agent string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case agent == "damaged" && !back:
			return capsule.Refuse(capsule.CodeAgentDamaged, "agent", "agent %q is not served", agent)
		case agent == "foreign":
			return &ForeignError{UID: 4242, Agent: agent}
		case agent == "broken":
			return errors.New("no such agent")
		}
		return nil
	}}
	in := New(state, r.store, slog.New(slog.DiscardHandler))
	run(t, in)

	agents := func() string {
		var names []string
		for _, e := range r.stored() {
			names = append(names, e.Event.Agent)
		}
		return strings.Join(names, ",")
	}
	if got := agents(); got != "builder" {
		t.Fatalf("stored %q, want builder alone", got)
	}
	left := spooled(t, dir)
	if len(left) != 1 || !strings.HasSuffix(left[0], ".json") {
		t.Fatalf("left in the spool %v, want the damaged agent's event alone", left)
	}
	failed := spooled(t, filepath.Join(dir, failedDir))
	if len(failed) != 4 || !slices.Contains(failed, "00000000000000000001-garbled.json") || !slices.Contains(failed, "00000000000000000002-link.json") {
		t.Fatalf("spool/failed holds %v, want the foreign, the broken, the garbled and the link", failed)
	}
	if fi, err := os.Lstat(filepath.Join(dir, failedDir, "00000000000000000002-link.json")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was not moved aside as it was: %v %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, failedDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spool/failed: %v %v, want a private directory", fi, err)
	}

	mu.Lock()
	back = true
	mu.Unlock()
	in.Kick()
	testwait.Until(t, func() string {
		return fmt.Sprintf("after the kick: stored %q, left in the spool %v", agents(), spooled(t, dir))
	}, func() bool { return agents() == "builder,damaged" && len(spooled(t, dir)) == 0 })
}
