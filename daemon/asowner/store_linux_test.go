package asowner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/safefile"
)

// TestStoreInTheWorker drives a snapshot store through a real worker
// process (the test binary as `worker`): every operation the daemon uses
// answers as the store does in process, the worker runs with the owner's
// uid and gid and no supplementary groups (when the test is root), and
// what a restore writes is the owner's.
func TestStoreInTheWorker(t *testing.T) {
	ctx := context.Background()
	dir, owner := ownerTree(t)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(filepath.Join(work, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "src", "a.txt"), "one\n")
	give(t, owner, work)
	log, lines := newLog()
	pool := NewPool(Options{Logger: log})
	defer pool.Close()
	w := pool.For(owner)
	if w.pid() != 0 {
		t.Fatal("a worker runs before the first call")
	}
	st, err := w.OpenStore(ctx, snapshot.Options{Dir: filepath.Join(dir, "state", "snapshots.git"), Workdir: work})
	if err != nil {
		t.Fatalf("open: %v\n%s", err, lines)
	}
	st.SetConversation(func() snapshot.Conversation { return snapshot.Conversation{Session: "s1", Message: "m1"} })
	first, isNew, err := st.Take(ctx, "start", 1)
	if err != nil || !isNew || first.Added != 1 || first.Took.Total <= 0 {
		t.Fatalf("take: %+v new=%v err=%v\n%s", first, isNew, err, lines)
	}
	if c := first.Conversation; c == nil || c.Session != "s1" || c.Message != "m1" {
		t.Errorf("the conversation point did not reach the snapshot: %+v", c)
	}

	if os.Geteuid() == 0 {
		status := procStatus(t, w.pid())
		want := strconv.Itoa(testOwnerID)
		for _, k := range []string{"Uid", "Gid"} {
			if f := strings.Fields(status[k]); len(f) != 4 || f[0] != want || f[1] != want || f[2] != want || f[3] != want {
				t.Errorf("the worker's %s: %q, want %s four times", k, status[k], want)
			}
		}
		if status["Groups"] != "" {
			t.Errorf("the worker's supplementary groups: %q, want none", status["Groups"])
		}
	}

	writeFile(t, filepath.Join(work, "src", "a.txt"), "two\n")
	give(t, owner, work)
	st.Follow()
	st.NoteUnknown()
	second, _, err := st.Take(ctx, "quiet", 2)
	if err != nil || second.Modified != 1 || second.Parent != first.ID {
		t.Fatalf("second take: %+v %v", second, err)
	}
	st.NoteChanged([]string{"src/a.txt"})
	if n, ok := st.Newest(); !ok || n.ID != second.ID {
		t.Errorf("newest: %+v %v", n, ok)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != second.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	d, err := st.Show(ctx, second.ID)
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "src/a.txt" || d.Files[0].Status != snapshot.StatusModified {
		t.Fatalf("show: %+v %v", d, err)
	}
	diff, cut, err := st.Diff(ctx, second.ID, "", 0)
	if err != nil || cut || !strings.Contains(diff, "-one") || !strings.Contains(diff, "+two") {
		t.Fatalf("diff: %q %v %v", diff, cut, err)
	}
	// The view crosses: --stat of the paths asked for.
	if stat, _, err := st.DiffView(ctx, second.ID, "", 0, snapshot.View{Stat: true, Paths: []string{"src"}}); err != nil || !strings.Contains(stat, "src/a.txt | 2 +-") {
		t.Fatalf("diff --stat -- src: %q %v", stat, err)
	}
	if none, _, err := st.DiffView(ctx, second.ID, "", 0, snapshot.View{Paths: []string{"elsewhere"}}); err != nil || none != "" {
		t.Fatalf("diff -- elsewhere: %q %v", none, err)
	}
	if l, err := st.Lookup(ctx, first.ID[:8]); err != nil || l.ID != first.ID {
		t.Errorf("lookup: %+v %v", l, err)
	}
	if ch, err := st.Between(ctx, first.ID, second.ID); err != nil || len(ch) != 1 || ch[0].Path != "src/a.txt" || ch[0].OldID == "" {
		t.Errorf("between: %+v %v", ch, err)
	}
	if p := st.Progress(); p.Step != "" {
		t.Errorf("progress with no take under way: %+v", p)
	}
	if p := st.GCProblem(); p != "" {
		t.Errorf("gc problem: %q", p)
	}
	// A refusal crosses as the refusal it is.
	var ce interface{ Error() string }
	if _, err := st.Show(ctx, "0000000"); err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("show of no snapshot: %v", err)
	}

	res, err := st.Restore(ctx, first.ID, nil, false)
	if err != nil || res.Safety != second.ID || len(res.Changes) != 1 {
		t.Fatalf("restore: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "src", "a.txt")); string(b) != "one\n" {
		t.Errorf("restored content: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(work, "src", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != owner.UID || st.Gid != owner.GID {
		t.Errorf("the restored file is %d:%d, want the owner's %d:%d", st.Uid, st.Gid, owner.UID, owner.GID)
	}

	// The fleet's calls: a snapshot's objects read, then received by a
	// second store in the same worker and imported there.
	snap, objs, err := st.Objects(ctx, first.ID)
	if err != nil || snap.ID != first.ID || len(objs) < 4 {
		t.Fatalf("objects: %+v %v", objs, err)
	}
	ids := make([]string, len(objs))
	for i, o := range objs {
		ids[i] = o.ID
	}
	content := map[string][]byte{}
	err = st.ReadObjects(ctx, ids, func(o snapshot.Object, data []byte) error {
		content[o.ID] = bytes.Clone(data)
		return nil
	})
	if err != nil || len(content) != len(ids) {
		t.Fatalf("read objects: %d of %d, %v", len(content), len(ids), err)
	}
	other, err := w.OpenStore(ctx, snapshot.Options{Dir: filepath.Join(dir, "state", "other.git"), Workdir: work})
	if err != nil {
		t.Fatal(err)
	}
	missing, err := other.Missing(ctx, ids)
	if err != nil || len(missing) != len(ids) {
		t.Fatalf("missing: %v %v", missing, err)
	}
	release := other.HoldObjects()
	for _, o := range objs {
		if err := other.ReceiveObject(ctx, o, int64(len(content[o.ID])), bytes.NewReader(content[o.ID])); err != nil {
			t.Fatalf("receive %s: %v", o.ID, err)
		}
	}
	if err := other.ReceiveObject(ctx, snapshot.Object{ID: ids[len(ids)-1], Type: "blob"}, 3, strings.NewReader("bad")); !errors.Is(err, snapshot.ErrDamaged) {
		t.Errorf("a forged object received: %v, want ErrDamaged", err)
	}
	if imp, err := other.Import(ctx, first.ID, first.ID); err != nil || imp.ID != first.ID {
		t.Fatalf("import: %+v %v", imp, err)
	}
	release()
	if d, err := other.Show(ctx, first.ID); err != nil || d.ID != first.ID {
		t.Errorf("show of the imported snapshot: %v", err)
	}
	if err := other.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := other.List(ctx); !errors.Is(err, snapshot.ErrClosed) {
		t.Errorf("list after close: %v, want ErrClosed", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	pool.Close()
	if w.pid() != 0 {
		select {
		case <-w.cur.exited:
		default:
			t.Error("the worker still runs after Close")
		}
	}
}

// TestOpenerAsTheOwner opens files through the worker: what the owner may
// read comes back as a descriptor, what the owner may not (a root-owned
// 0600 file) is refused with the system's error, and FIFOs, links and
// escapes are refused as safefile refuses them in process.
func TestOpenerAsTheOwner(t *testing.T) {
	dir, owner := ownerTree(t)
	writeFile(t, filepath.Join(dir, "notes.md"), "the owner's notes\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.md", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	give(t, owner, dir)
	secret := filepath.Join(dir, "root-only")
	writeFile(t, secret, "root's secret\n")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Options{})
	defer pool.Close()
	op := pool.For(owner).Opener()

	b, err := safefile.ReadFileWith(op, filepath.Join(dir, "notes.md"), false, 1<<20)
	if err != nil || string(b) != "the owner's notes\n" {
		t.Fatalf("the owner's file: %q %v", b, err)
	}
	b, fi, err := safefile.ReadFileInWith(op, dir, "link", 1<<20)
	if err != nil || string(b) != "the owner's notes\n" || fi == nil {
		t.Fatalf("a link inside: %q %v", b, err)
	}
	if os.Geteuid() == 0 {
		if _, _, err := op.Open(secret, safefile.OpenOptions{}); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("root's 0600 file opened for the owner: %v", err)
		}
	}
	if _, _, err := op.Open(filepath.Join(dir, "fifo"), safefile.OpenOptions{}); !errors.Is(err, safefile.ErrNotRegular) {
		t.Errorf("a FIFO: %v, want ErrNotRegular", err)
	}
	if _, _, err := op.Open(filepath.Join(dir, "link"), safefile.OpenOptions{}); !errors.Is(err, safefile.ErrSymlink) {
		t.Errorf("a link not to follow: %v, want ErrSymlink", err)
	}
	if f, _, err := op.Open(filepath.Join(dir, "link"), safefile.OpenOptions{Follow: true}); err != nil {
		t.Errorf("a link to follow: %v", err)
	} else {
		f.Close()
	}
	if _, _, err := op.OpenIn(dir, "out"); !errors.Is(err, safefile.ErrOutside) {
		t.Errorf("a link out of the directory: %v, want ErrOutside", err)
	}
	if _, _, err := op.Open(filepath.Join(dir, "nothing"), safefile.OpenOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
	if _, _, err := op.Open(dir, safefile.OpenOptions{}); !errors.Is(err, safefile.ErrNotRegular) {
		t.Errorf("a directory not asked for: %v, want ErrNotRegular", err)
	}
	f, fi, err := op.Open(dir, safefile.OpenOptions{Dir: true})
	if err != nil || !fi.IsDir() {
		t.Fatalf("a directory asked for: %v", err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) != 5 {
		t.Errorf("listing it: %v %v", names, err)
	}
	if _, _, err := op.Open("relative/path", safefile.OpenOptions{}); err == nil {
		t.Error("a relative path opened")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

var _ = io.EOF
