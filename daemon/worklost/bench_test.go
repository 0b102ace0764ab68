package worklost

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot"
)

// BenchmarkCheckAfterSnapshot is what the daemon adds to each work snapshot
// (daemon/capture): HEAD read, then Detect from the snapshot before, here
// on a 10,000-file repository where 5 uncommitted edits were thrown away
// by `git checkout -- .` (the worst case: every path is a candidate, so the
// agent's repository is read too). Beside it, in the same run, the
// snapshot it follows: the store's Take of those 5 paths as the watcher
// names them. check/take is the share the check adds to a snapshot.
func BenchmarkCheckAfterSnapshot(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	work := filepath.Join(root, "work")
	for d := range 100 {
		for f := range 100 {
			write(b, work, fmt.Sprintf("d%02d/f%02d.go", d, f), fmt.Sprintf("package d%d // file %d\n", d, f))
		}
	}
	userGit(b, work, "init", "-q", "-b", "main")
	userGit(b, work, "add", "-A")
	userGit(b, work, "commit", "-q", "-m", "start")
	st, err := snapshot.Open(ctx, snapshot.Options{Dir: filepath.Join(root, "snapshots.git"), Workdir: work})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	seq := uint64(0)
	edited := []string{"d00/f00.go", "d10/f10.go", "d20/f20.go", "d30/f30.go", "d40/f40.go"}
	take := func() (snapshot.Snapshot, time.Duration) {
		seq++
		began := time.Now()
		snap, _, err := st.Take(ctx, "quiet", seq)
		if err != nil {
			b.Fatal(err)
		}
		return snap, time.Since(began)
	}
	take()
	st.Follow()
	repo := NewRepo(st.Tool(), work) // kept, as the daemon keeps it
	defer repo.Close()
	var took, checked time.Duration
	for round := 0; b.Loop(); round++ {
		for _, p := range edited {
			write(b, work, p, fmt.Sprintf("// an hour of work, round %d\n", round))
		}
		st.NoteChanged(edited)
		held, _ := take()
		head, err := repo.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		userGit(b, work, "checkout", "--", ".")
		st.NoteChanged(edited)
		gone, d := take()
		took += d
		began := time.Now()
		now, err := repo.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		wl, err := Detect(ctx, Input{Store: st, Repo: repo, Before: Point{Snapshot: held.ID, Head: head},
			After: Point{Snapshot: gone.ID, Head: now}, At: time.Now()})
		checked += time.Since(began)
		if err != nil || wl == nil || len(wl.Paths) != len(edited) {
			b.Fatalf("detect: %+v %v", wl, err)
		}
	}
	b.ReportMetric(float64(checked.Microseconds())/1000/float64(b.N), "check-ms/op")
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "take-ms/op")
	b.ReportMetric(float64(checked)/float64(took), "check/take")
}
