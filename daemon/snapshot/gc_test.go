package snapshot

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/gc"
)

// Hundreds of rewrites of a large random file leave the store near
// KeepBytes: the store collects by itself when it passes the bound (and
// at rest holds at most twice the bound once a GC found the dropped
// snapshots' objects old enough to delete).
func TestKeepBytesHolds(t *testing.T) {
	const fileBytes, keepBytes, rewrites = 256 << 10, 2 << 20, 150
	wd := t.TempDir()
	s := newStore(t, wd, Options{KeepCount: 1000, KeepBytes: keepBytes})
	buf := make([]byte, fileBytes)
	for i := range rewrites {
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(wd, "big.bin"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		mustTake(t, s, "quiet", uint64(i))
	}
	lastTake := time.Now()
	waitFor(t, s.gc.Idle)
	// A GC keeps the unreachable objects written in the second or two
	// before it dropped their snapshots (compact: a Take running beside it
	// may still need them; the expiry is git's, in whole seconds), and the
	// collector's last GC came right after the last Take, so what is left
	// at rest is the next GC's. How much depends on how many Takes fell in
	// that window, which depends on the machine's speed: the bound is
	// checked after a GC once those objects are old enough to go.
	if list, _ := s.List(context.Background()); len(list) >= rewrites {
		t.Fatalf("%d snapshots of %d after the Takes: the store did not collect by itself", len(list), rewrites)
	}
	waitFor(t, func() bool { return time.Since(lastTake) > 2*time.Second })
	if _, err := s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := gc.DirBytes(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	list, _ := s.List(context.Background())
	t.Logf("store at rest: %d bytes, %d snapshots", n, len(list))
	if n > 2*keepBytes {
		t.Fatalf("after %d rewrites of %d bytes the store is %d bytes at rest, keep_bytes %d", rewrites, fileBytes, n, keepBytes)
	}
	if len(list) >= rewrites || len(list) < 1 {
		t.Fatalf("%d snapshots kept of %d", len(list), rewrites)
	}
	// Retention keeps what fits: the objects a GC leaves for the next
	// (those of the snapshots it dropped, kept for Takes beside it) are
	// not counted as the snapshots' (about 8 of these fit in keep_bytes).
	if fit := keepBytes / fileBytes; len(list) < fit/2 {
		t.Fatalf("%d snapshots kept where about %d fit in keep_bytes: retention dropped snapshots for garbage", len(list), fit)
	}
}

// A Take does not wait for a GC that is packing.
func TestTakeDoesNotWaitForGC(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "1\n")
	s := newStore(t, wd, Options{})
	mustTake(t, s, "start", 1)
	waitFor(t, s.gc.Idle)
	held, release := make(chan struct{}), make(chan struct{})
	s.gc.CompactHook = func() {
		close(held)
		<-release
	}
	gcDone := make(chan error, 1)
	go func() { _, err := s.GC(context.Background()); gcDone <- err }()
	<-held
	took := make(chan error, 1)
	go func() {
		write(t, wd, "a.txt", "2\n")
		_, _, err := s.Take(context.Background(), "quiet", 1)
		took <- err
	}()
	select {
	case err := <-took:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("a Take waited for a GC that was packing")
	}
	close(release)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	waitFor(t, s.gc.Idle)
}
