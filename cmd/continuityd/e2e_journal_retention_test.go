package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/journal"
	"github.com/continuityd/continuityd/internal/ops"
)

// The generated day: every step the journal's clock moves on retStep
// (journal.ClockEnv), and a few of retFiles are rewritten with contents
// of varied sizes; retSteps steps are a day and a bit.
const (
	retKeepBytes = 2 << 20
	retShare     = 0.3
	retKeepAll   = 2 * time.Hour
	retHourly    = 8 * time.Hour
	retStep      = 12 * time.Minute
	retSteps     = 125
	retFiles     = 5
)

// retentionDay is the daemon of the generated day and what the test wrote.
type retentionDay struct {
	t       *testing.T
	w       *workspace
	p       *proc
	env     []string
	work    string
	clock   string            // the journal's clock file: its skew
	skew    time.Duration     //
	content map[string]string // every content written, by its git blob id
	written map[string]int    // versions written, by file
	newest  map[string]string // each file's newest content
}

// startRetentionDay starts the daemon with the day's config: keep_bytes
// 2 MiB, journal_share 0.3, every version for 2h, the newest of each hour
// until 8h, the journal's clock a file the test moves on.
func startRetentionDay(t *testing.T) *retentionDay {
	w := newWorkspace(t)
	f, err := os.OpenFile(w.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[watch]\nquiet = \"100ms\"\nsettle = \"50ms\"\n[policy]\nquiet = \"500ms\"\nmin_interval = \"3s\"\n"+
		"[snapshots]\nkeep_bytes = %d\njournal_share = %v\njournal_keep_all = %q\njournal_keep_hourly = %q\n",
		retKeepBytes, retShare, retKeepAll.String(), retHourly.String())
	f.Close()
	d := &retentionDay{t: t, w: w, work: w.work(), clock: filepath.Join(w.dir, "journal-clock"),
		env:     []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state},
		content: map[string]string{}, written: map[string]int{}, newest: map[string]string{}}
	d.setSkew(0)
	for i := range retFiles {
		writeFile(t, d.work, d.file(i), "start\n")
	}
	d.p = startProc(t, w.socket, []string{journal.ClockEnv + "=" + d.clock}, "run", "--config", w.config)
	waitSnapshots(t, d.p, 1, time.Minute, "the start snapshot")
	return d
}

func (d *retentionDay) file(i int) string { return fmt.Sprintf("src/f%d.txt", i) }

func (d *retentionDay) setSkew(s time.Duration) {
	d.skew = s
	if err := os.WriteFile(d.clock, []byte(s.String()), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// apiHistory is GET /v1/history?path=REL.
func (d *retentionDay) apiHistory(c *http.Client, rel string) ops.HistoryAnswer {
	d.t.Helper()
	resp, err := c.Get("http://d/v1/history?path=" + url.QueryEscape(rel))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h ops.HistoryAnswer
	if resp.StatusCode != 200 {
		d.t.Fatalf("GET /v1/history?path=%s: %s", rel, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		d.t.Fatal(err)
	}
	return h
}

// edit writes a new content of a random size (1 to 48 KiB of random
// lines) to rel.
func (d *retentionDay) edit(r *rand.Rand, rel string) string {
	var b strings.Builder
	size := 1<<10 + r.IntN(47<<10)
	fmt.Fprintf(&b, "%s at %s\n", rel, d.skew)
	for b.Len() < size {
		fmt.Fprintf(&b, "%016x %016x %016x\n", r.Uint64(), r.Uint64(), r.Uint64())
	}
	s := b.String()
	writeFile(d.t, d.work, rel, s)
	d.content[gitBlobID(s)] = s
	d.written[rel]++
	d.newest[rel] = s
	return s
}

// storeDir is the agent's snapshot store (where journal.db is).
func (d *retentionDay) storeDir() string {
	d.t.Helper()
	var found string
	filepath.WalkDir(d.w.state, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == journal.File {
			found = filepath.Dir(p)
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		d.t.Fatalf("no %s under %s", journal.File, d.w.state)
	}
	return found
}

// objectBytes is the disk space of the store's objects, loose and packed.
func objectBytes(t *testing.T, store string) int64 {
	var n int64
	filepath.WalkDir(filepath.Join(store, "objects"), func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// keptBytes is the bytes of the distinct contents the files' histories
// list: what the journal's share of keep_bytes bounds.
func keptBytes(hs map[string]ops.HistoryAnswer) int64 {
	seen := map[string]bool{}
	var n int64
	for _, h := range hs {
		for _, v := range h.Versions {
			if v.Blob != "" && !seen[v.Blob] {
				seen[v.Blob] = true
				n += v.Size
			}
		}
	}
	return n
}

// TestJournalRetentionDay: a generated day of edits (hundreds of versions
// of five files, 1 to 48 KiB each, the journal's clock moved on 12
// minutes a step by its test hook) under keep_bytes 2 MiB and
// journal_share 0.3. Throughout, the versions the journal keeps stay
// within 0.3 of keep_bytes, and fill it (journal_share is what bounds
// them), each file's newest version is kept; at the end the store
// (snapshots and journal) is within keep_bytes, the versions left older
// than journal_keep_all are at most one an hour (one a day past
// journal_keep_hourly), history (the API and the CLI) names how many
// versions were thinned, when and why, and counts every version written,
// and restore --at brings kept versions back byte-identical.
func TestJournalRetentionDay(t *testing.T) {
	t.Parallel()
	d := startRetentionDay(t)
	c := d.p.client()
	defer c.CloseIdleConnections()
	r := rand.New(rand.NewPCG(42, 42))
	share := retShare
	bound := int64(float64(retKeepBytes) * share) // as the daemon reckons it
	var hs map[string]ops.HistoryAnswer
	histories := func() map[string]ops.HistoryAnswer {
		out := map[string]ops.HistoryAnswer{}
		for i := range retFiles {
			out[d.file(i)] = d.apiHistory(c, d.file(i))
		}
		return out
	}
	newestKept := func(rel string) bool {
		vs := hs[rel].Versions
		if d.written[rel] == 0 {
			return true // its start content: the daemon saw none settle
		}
		return len(vs) > 0 && vs[len(vs)-1].Blob == gitBlobID(d.newest[rel])
	}
	filled := false
	for step := range retSteps {
		d.setSkew(time.Duration(step) * retStep)
		n := 1 + r.IntN(retFiles)
		for _, i := range r.Perm(retFiles)[:n] {
			d.edit(r, d.file(i))
		}
		// Each file's newest version journaled, and retention (run after
		// the group that saw the clock pass ten minutes) within its bound.
		waitUntil(t, func() string {
			return fmt.Sprintf("step %d (the journal's clock +%s): each file's newest version listed and the versions within %d bytes; they hold %d bytes; log:\n%s",
				step, d.skew, bound, keptBytes(hs), d.p.stderr)
		}, func() bool {
			hs = histories()
			for i := range retFiles {
				if !newestKept(d.file(i)) {
					return false
				}
			}
			return keptBytes(hs) <= bound
		})
		if keptBytes(hs) > bound-48<<10 {
			filled = true // within one file of the bound: the share bit
		}
	}
	total := 0
	for _, n := range d.written {
		total += n
	}
	if total < 300 {
		t.Fatalf("the day wrote %d versions, want hundreds", total)
	}
	if !filled {
		t.Fatalf("the versions never came near journal_share's bound (%d bytes): the test did not test it", bound)
	}

	// What history says was thinned, and why.
	end := time.Now().Add(d.skew)
	var byAge, byBytes int
	for rel, h := range hs {
		if h.ThinnedCount+len(h.Versions) != d.written[rel] {
			t.Errorf("%s: %d versions written, history lists %d and says %d thinned", rel, d.written[rel], len(h.Versions), h.ThinnedCount)
		}
		if h.ThinnedCount != h.ThinnedByAge+h.ThinnedByBytes || h.ThinnedCount == 0 || h.ThinnedFrom == nil || h.ThinnedTo == nil ||
			!strings.Contains(h.Thinned, fmt.Sprintf("thinned: %d versions between %s and %s", h.ThinnedCount,
				h.ThinnedFrom.UTC().Format(time.RFC3339), h.ThinnedTo.UTC().Format(time.RFC3339))) {
			t.Errorf("%s: history says thinned %d (%d by age, %d by bytes) from %v to %v: %q", rel, h.ThinnedCount, h.ThinnedByAge, h.ThinnedByBytes, h.ThinnedFrom, h.ThinnedTo, h.Thinned)
		}
		byAge += h.ThinnedByAge
		byBytes += h.ThinnedByBytes
		if h.ThinnedByAge > 0 && !strings.Contains(h.Thinned, fmt.Sprintf("%d older than 2h (after that the newest of each hour is kept, and after 8h the newest of each day)", h.ThinnedByAge)) {
			t.Errorf("%s: history does not say why %d versions went for their age: %q", rel, h.ThinnedByAge, h.Thinned)
		}
		if h.ThinnedByBytes > 0 && !strings.Contains(h.Thinned, fmt.Sprintf("%d to keep the journal within its share of keep_bytes (%d bytes", h.ThinnedByBytes, bound)) {
			t.Errorf("%s: history does not say why %d versions went for the byte bound: %q", rel, h.ThinnedByBytes, h.Thinned)
		}
		// Past keep_all at most one version an hour, past keep_hourly one a
		// day (the newest of each is the file's newest, kept whatever its
		// age); versions near a boundary are left out (the last retention
		// ran a step ago at most).
		slots := map[string]int{}
		for _, v := range h.Versions[:len(h.Versions)-1] {
			age := end.Sub(v.At)
			switch {
			case age > retHourly+2*retStep:
				slots[v.At.UTC().Format("day 2006-01-02")]++
			case age > retKeepAll+2*retStep && age < retHourly-2*retStep:
				slots[v.At.UTC().Format("hour 2006-01-02T15")]++
			}
		}
		for slot, n := range slots {
			if n > 1 {
				t.Errorf("%s: %d versions kept in the %s, past journal_keep_all: %+v", rel, n, slot, h.Versions)
			}
		}
	}
	if byAge == 0 || byBytes == 0 {
		t.Fatalf("the day thinned %d versions for their age and %d for the byte bound: want both", byAge, byBytes)
	}
	code, out, errOut := cli(t, d.env, "", "history", filepath.Join(d.work, d.file(0)))
	if h := hs[d.file(0)]; code != 0 || !strings.Contains(out, h.Thinned) {
		t.Fatalf("history %s: exit %d, does not say %q:\n%s%s", d.file(0), code, h.Thinned, out, errOut)
	}

	// The store, snapshots and journal, within keep_bytes: one more
	// snapshot has the store collect what retention let go.
	store := d.storeDir()
	writeFile(t, d.work, "last.txt", "the end of the day\n")
	if code, out, errOut := cli(t, d.env, "", "snapshot", "take", "--message", "the end of the day"); code != 0 {
		t.Fatalf("snapshot take: exit %d %s %s", code, out, errOut)
	}
	waitUntil(t, func() string {
		return fmt.Sprintf("the store's objects within keep_bytes (%d); they take %d bytes; log:\n%s", retKeepBytes, objectBytes(t, store), d.p.stderr)
	}, func() bool { return objectBytes(t, store) <= retKeepBytes })

	// Kept versions, the oldest and one from the middle of each file,
	// restored by time byte-identical.
	for i := range retFiles {
		rel := d.file(i)
		vs := hs[rel].Versions
		for _, v := range []ops.HistoryVersion{vs[0], vs[len(vs)/2]} {
			want, ok := d.content[v.Blob]
			if !ok {
				t.Fatalf("%s: history lists version %s holding %s, a content the test never wrote", rel, v.ID, v.Blob)
			}
			at := v.At.UTC().Format(time.RFC3339Nano)
			code, out, errOut := cli(t, d.env, "", "snapshot", "restore", "--path", filepath.Join(d.work, rel), "--at", at)
			if code != 0 {
				t.Fatalf("restore %s --at %s: exit %d %s %s", rel, at, code, out, errOut)
			}
			if got := readFile(t, d.work, rel); got != want {
				t.Fatalf("restore %s --at %s (version %s): %d bytes, not the %d bytes of that version", rel, at, v.ID, len(got), len(want))
			}
		}
	}
}
