package snapshot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/gc"
	"github.com/continuityd/continuityd/internal/testkit/baseline"
	"github.com/continuityd/continuityd/internal/testkit/sourcetree"
)

// edit appends a line to file i of the tree.
func edit(b *testing.B, dir string, i, round int) {
	b.Helper()
	p := filepath.Join(dir, filepath.FromSlash(sourcetree.File(i)))
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(f, "// edit %d\n", round)
	f.Close()
}

// plainGit runs git in a plain repository the way a user would, with no
// user or system configuration.
func plainGit(b *testing.B, dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = userGitEnv(dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// BenchmarkSnapshot10kFiles5Changed: a snapshot of a 10,000-file tree with
// 5 changed files, against `git add -A && git commit` of the same change in
// a plain repository of the same tree, interleaved on the same disk.
// Reports the medians and their ratio.
//
//	go test -run '^$' -bench Snapshot10kFiles5Changed -benchtime 30x ./daemon/snapshot/
func BenchmarkSnapshot10kFiles5Changed(b *testing.B) {
	const files = 10000
	ours, plain := b.TempDir(), b.TempDir()
	sourcetree.Write(b, ours, files, 600)
	sourcetree.Write(b, plain, files, 600)
	s := newStore(b, ours, Options{Dir: filepath.Join(b.TempDir(), "snapshots.git")})
	mustTake(b, s, "start", 1)
	plainGit(b, plain, "init", "-q")
	// No automatic gc: git's detached one would still be writing into the
	// repository when the benchmark's temporary directory is removed.
	plainGit(b, plain, "config", "gc.auto", "0")
	plainGit(b, plain, "add", "-A")
	plainGit(b, plain, "commit", "-q", "-m", "start")
	// One round of each first: caches warm for both.
	var oursT, plainT, walkT, addT, treeT, commitT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N+1; i++ {
		for k := range 5 {
			f := (i*5 + k) * 1999 % files
			edit(b, ours, f, i)
			edit(b, plain, f, i)
		}
		t := time.Now()
		snap, isNew, err := s.Take(context.Background(), "quiet", uint64(i+2))
		d := time.Since(t)
		if err != nil || !isNew || snap.Modified != 5 {
			b.Fatalf("Take: %+v %v %v", snap, isNew, err)
		}
		t = time.Now()
		plainGit(b, plain, "add", "-A")
		plainGit(b, plain, "commit", "-q", "-m", fmt.Sprint("edit ", i))
		p := time.Since(t)
		if i > 0 {
			oursT, plainT = append(oursT, d), append(plainT, p)
			walkT, addT = append(walkT, snap.Took.Walk), append(addT, snap.Took.Add)
			treeT, commitT = append(treeT, snap.Took.Tree), append(commitT, snap.Took.Commit)
		}
	}
	b.StopTimer()
	o, p := baseline.Median(oursT), baseline.Median(plainT)
	b.ReportMetric(float64(o.Microseconds())/1000, "snapshot-ms")
	b.ReportMetric(float64(p.Microseconds())/1000, "git-add-commit-ms")
	b.ReportMetric(float64(o)/float64(p), "ratio")
	b.ReportMetric(float64(baseline.Median(walkT).Microseconds())/1000, "walk-ms")
	b.ReportMetric(float64(baseline.Median(addT).Microseconds())/1000, "add-ms")
	b.ReportMetric(float64(baseline.Median(treeT).Microseconds())/1000, "tree-ms")
	b.ReportMetric(float64(baseline.Median(commitT).Microseconds())/1000, "commit-ms")
}

// BenchmarkStoreGrowth100Edits: the store's size after 100 snapshots of
// small edits (one line appended to one file each), against the size of
// the tree, before and after GC.
//
//	go test -run '^$' -bench StoreGrowth100Edits -benchtime 1x ./daemon/snapshot/
func BenchmarkStoreGrowth100Edits(b *testing.B) {
	const files = 1000
	for range b.N {
		b.StopTimer()
		wd := b.TempDir()
		treeBytes := sourcetree.Write(b, wd, files, 2000)
		s := newStore(b, wd, Options{Dir: filepath.Join(b.TempDir(), "snapshots.git")})
		b.StartTimer()
		mustTake(b, s, "start", 1)
		if _, err := s.GC(context.Background()); err != nil {
			b.Fatal(err)
		}
		first, _ := gc.DirBytes(s.Dir())
		for i := range 100 {
			edit(b, wd, i*37%files, i)
			mustTake(b, s, "quiet", uint64(i+2))
		}
		before, _ := gc.DirBytes(s.Dir())
		res, err := s.GC(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(treeBytes)/1e6, "tree-MB")
		b.ReportMetric(float64(first)/float64(treeBytes), "store/tree-first")
		b.ReportMetric(float64(before)/float64(treeBytes), "store/tree-101-before-gc")
		b.ReportMetric(float64(res.Bytes)/float64(treeBytes), "store/tree-101-after-gc")
		b.ReportMetric(float64(res.Bytes-first)/float64(treeBytes), "growth/tree-100-edits")
		b.ReportMetric(float64(res.Took.Milliseconds()), "gc-ms")
	}
}
