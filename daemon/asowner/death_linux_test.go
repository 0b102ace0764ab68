package asowner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/testkit/holdgit"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// TestWorkerDeath kills the worker in the middle of a Take (held inside
// its git add): the Take fails saying the worker ended, the next call
// starts a new worker, opens the store again in it and works, and the log
// says the worker was restarted. A worker that keeps dying young is
// started again only after a backoff, which the error names.
func TestWorkerDeath(t *testing.T) {
	ctx := context.Background()
	dir, owner := ownerTree(t)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "a.txt"), "one\n")
	give(t, owner, work)
	g := holdgit.New(t)
	// The held git runs as the owner: the wrapper and its control
	// directory (in the test's temporary directory) are the owner's.
	top := filepath.Dir(filepath.Dir(g.Dir()))
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(top), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	give(t, owner, top)
	log, lines := newLog()
	pool := NewPool(Options{Logger: log})
	defer pool.Close()
	w := pool.For(owner)
	st, err := w.OpenStore(ctx, snapshot.Options{Dir: filepath.Join(dir, "snapshots.git"), Workdir: work, Git: g.Path})
	if err != nil {
		t.Fatalf("open: %v\n%s", err, lines)
	}
	defer st.Close()
	st.Follow()
	first := w.pid()

	g.Arm(t, "ls-files") // a first snapshot lists the files with git, then stores them in process
	give(t, owner, top)
	took := make(chan error, 1)
	go func() {
		_, _, err := st.Take(ctx, "start", 1)
		took <- err
	}()
	g.WaitHeld(t, time.Minute, lines.String)
	if err := w.cur.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-took
	if err == nil || !strings.Contains(err.Error(), "the owner's worker (uid ") || !strings.Contains(err.Error(), "ended (signal: killed)") {
		t.Fatalf("the Take in flight: %v, want an error saying the owner's worker ended", err)
	}
	g.Disarm(t)
	g.Release(t)

	snap, _, err := st.Take(ctx, "quiet", 2)
	if err != nil || snap.Added != 1 {
		t.Fatalf("the Take after the worker died: %+v %v\n%s", snap, err, lines)
	}
	if second := w.pid(); second == first || second == 0 {
		t.Errorf("the worker was not replaced: pid %d, then %d", first, second)
	}
	for _, want := range []string{"the owner's worker ended; the next call starts a new one", "restarted the owner's worker", "opened the snapshot store again"} {
		if !strings.Contains(lines.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, lines)
		}
	}

	// Dying young again: the next start waits a backoff, and says so.
	second := w.pid()
	killWorker(t, w)
	if _, err := st.List(ctx); err == nil || !strings.Contains(err.Error(), "the next start is in") {
		t.Errorf("a call during the backoff: %v, want the backoff named", err)
	}
	testwait.Until(t, func() string { return "no third worker: " + lines.String() }, func() bool {
		_, err := st.List(ctx)
		return err == nil
	})
	if third := w.pid(); third == second {
		t.Errorf("the worker was not replaced a second time")
	}
}
