package take

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTaker is the Taker of a new store for a fresh workdir.
func newTaker(t *testing.T) *Taker {
	t.Helper()
	ctx := context.Background()
	tool, err := repo.CheckGit(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	wd, err := workdir.Open(work)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "snapshots.git")
	exclude, excludeAbs := repo.BaseExclude(work, dir, nil, nil, nil)
	log := slog.New(slog.DiscardHandler)
	r, err := repo.Open(ctx, dir, work, tool, log, exclude)
	if err != nil {
		t.Fatal(err)
	}
	tk := New(Options{Repo: r, Lock: &repo.WriteLock{}, Workdir: wd, Notes: NewNotes(), ExcludeAbs: excludeAbs,
		MaxFileBytes: 8 << 20, Log: log, Now: time.Now, Made: func(Made) {}})
	t.Cleanup(func() {
		tk.lock.Lock()
		defer tk.lock.Unlock()
		tk.Release()
	})
	return tk
}
