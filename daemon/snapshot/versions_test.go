package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/journal"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// lockedClock is a clock a test sets, safe beside the journal's goroutine.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// settle has the journal keep rel as it stands, as written at at.
func settle(t *testing.T, s *Store, rel string, at time.Time) {
	t.Helper()
	s.Versions.Settled(rel, at)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Versions.J.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func objectExists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	_, err := s.git.Run(context.Background(), repo.Call{Args: []string{"cat-file", "-e", id}})
	return err == nil
}

// TestVersionJournal: each settled content is a version; a content
// written back is stored once; a version restores byte-identical with a
// safety snapshot; a deletion is a version too.
func TestVersionJournal(t *testing.T) {
	work := t.TempDir()
	clock := &lockedClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	s := newStore(t, work, Options{Journal: JournalOptions{Enabled: true}, Now: clock.now})
	if s.Versions == nil {
		t.Fatalf("no journal: %s", s.VersionsProblem)
	}
	mustTake(t, s, "start", 1)
	base := clock.now()
	for i, content := range []string{"one\n", "two\nlines\n", "one\n"} {
		write(t, work, "a.txt", content)
		settle(t, s, "a.txt", base.Add(time.Duration(i)*time.Second))
	}
	settle(t, s, "a.txt", base.Add(3*time.Second)) // the same content again: no new version
	h, err := s.Versions.History(context.Background(), "a.txt")
	if err != nil || len(h.Versions) != 3 {
		t.Fatalf("history: %+v %v, want 3 versions", h, err)
	}
	if h.Versions[0].Blob != h.Versions[2].Blob || h.Versions[1].LinesDelta != 1 || h.Versions[2].LinesDelta != -1 {
		t.Fatalf("versions %+v", h.Versions)
	}
	res, err := s.Versions.J.Retain()
	if err != nil || res.Bytes != int64(len("one\n")+len("two\nlines\n")) {
		t.Fatalf("retain: %+v %v: each content is counted (and stored) once", res, err)
	}

	write(t, work, "a.txt", "three\n")
	rr, v, err := s.Versions.Restore(context.Background(), "a.txt", h.Versions[1].ID, time.Time{}, false)
	if err != nil || read(t, work, "a.txt") != "two\nlines\n" || rr.Safety == "" || v.ID != h.Versions[1].ID {
		t.Fatalf("restore %s: %+v %+v %v; a.txt is %q", h.Versions[1].ID, rr, v, err, read(t, work, "a.txt"))
	}
	// By time: the version that stood then.
	if _, _, err := s.Versions.Restore(context.Background(), "a.txt", "", base.Add(500*time.Millisecond), false); err != nil || read(t, work, "a.txt") != "one\n" {
		t.Fatalf("restore --at: %v; a.txt is %q", err, read(t, work, "a.txt"))
	}
	if err := os.Remove(filepath.Join(work, "a.txt")); err != nil {
		t.Fatal(err)
	}
	settle(t, s, "a.txt", base.Add(10*time.Second))
	h, _ = s.Versions.History(context.Background(), "a.txt")
	if last := h.Versions[len(h.Versions)-1]; !last.Gone {
		t.Fatalf("a deletion is no version: %+v", h.Versions)
	}
	if _, _, err := s.Versions.Restore(context.Background(), "a.txt", "v999", time.Time{}, false); err == nil {
		t.Fatal("a version that does not exist was restored")
	}
}

// TestVersionJournalRetention: past keep_all the versions are thinned
// to one an hour, history says how many were and when, and the store's
// GC keeps the blobs of the versions kept and drops the others.
func TestVersionJournalRetention(t *testing.T) {
	work := t.TempDir()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := &lockedClock{t: now}
	s := newStore(t, work, Options{Journal: JournalOptions{Enabled: true, KeepAll: time.Hour, KeepHourly: 24 * time.Hour}, Now: clock.now})
	mustTake(t, s, "start", 1)
	// Ten versions a minute apart, three hours ago: one survives.
	old := now.Add(-3 * time.Hour)
	var blobs []string
	for i := range 10 {
		write(t, work, "b.txt", strings.Repeat("x", i+1)+"\n")
		settle(t, s, "b.txt", old.Add(time.Duration(i)*time.Minute))
	}
	h, _ := s.Versions.History(context.Background(), "b.txt")
	for _, v := range h.Versions {
		blobs = append(blobs, v.Blob)
		// Aged past GC's grace for objects written beside it.
		p := s.repo.ObjectPath(mustOID(t, v.Blob))
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, _ = s.Versions.History(context.Background(), "b.txt")
	if len(h.Versions) != 1 || h.Thinned.Count != 9 || h.Thinned.ByAge != 9 || !h.Thinned.First.Equal(old) ||
		!strings.Contains(h.Thinned.String(), "thinned: 9 versions between") || !strings.Contains(h.Thinned.String(), "9 older than 1h (after that the newest of each hour is kept, and after 24h") {
		t.Fatalf("after retention: %d versions, thinned %+v (%s)", len(h.Versions), h.Thinned, h.Thinned)
	}
	if !objectExists(t, s, h.Versions[0].Blob) {
		t.Fatal("GC dropped the blob of a version retention kept")
	}
	for _, b := range blobs[:9] {
		if objectExists(t, s, b) {
			t.Fatalf("GC kept %s, a version retention thinned", b)
		}
	}
}

// TestVersionJournalDamageIsNamed: a journal.db that does not open is set
// aside under a name the problem gives, and a new one begun.
func TestVersionJournalDamageIsNamed(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	s := newStore(t, work, Options{Dir: dir, Journal: JournalOptions{Enabled: true}})
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, journal.File), []byte(strings.Repeat("not a bbolt file ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	s = newStore(t, work, Options{Dir: dir, Journal: JournalOptions{Enabled: true}})
	p := s.Versions.J.Problem()
	aside, _ := filepath.Glob(filepath.Join(dir, journal.File+".damaged-*"))
	if len(aside) != 1 || !strings.Contains(p, filepath.Base(aside[0])) {
		t.Fatalf("problem %q, set aside %v", p, aside)
	}
}
