package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// faultyFile is a real archive file on a disk that can be made full: with
// room >= 0, a write takes that many bytes more and then fails with ENOSPC
// (a short write, as a full file system gives).
type faultyFile struct {
	*os.File
	disk *faultyDisk
}

type faultyDisk struct {
	room         int // -1: unlimited
	failTruncate bool
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if f.disk.room < 0 {
		return f.File.Write(p)
	}
	n, err := f.File.Write(p[:min(len(p), f.disk.room)])
	f.disk.room -= n
	if err == nil && n < len(p) {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

func (f *faultyFile) Truncate(size int64) error {
	if f.disk.failTruncate {
		return &fs.PathError{Op: "truncate", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Truncate(size)
}

func faultyArchive(dir string, disk *faultyDisk, log *slog.Logger) *Archive {
	a := New("local", func(string) string { return dir }).WithLogger(log)
	a.open = func(path string) (file, error) {
		f, err := openFile(path)
		if err != nil {
			return nil, err
		}
		return &faultyFile{File: f.(*os.File), disk: disk}, nil
	}
	return a
}

func testWrite(seq uint64) capsule.Write {
	focus := strings.Repeat("a focus long enough to be cut in two ", 10)
	return capsule.Write{Seq: seq, Kind: capsule.WriteCheckpoint, At: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		IdempotencyKey: "cd-x-" + string(rune('0'+seq)), Checkpoint: &capsule.Checkpoint{Focus: &focus}}
}

// wholeLines decodes every line of the archive file as one JSON value, as
// jq would, and returns the seqs in file order.
func wholeLines(t *testing.T, path string) []uint64 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("%s ends in a partial line: %q", path, raw[bytes.LastIndexByte(raw, '\n')+1:])
	}
	var seqs []uint64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var w capsule.Write
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("%s: a line is not one JSON value (%v): %q", path, err, sc.Bytes())
		}
		seqs = append(seqs, w.Seq)
	}
	return seqs
}

func TestArchiveFullDiskKeepsWholeLinesAndARetryWritesOne(t *testing.T) {
	dir := t.TempDir()
	disk := &faultyDisk{room: -1}
	a := faultyArchive(dir, disk, slog.New(slog.DiscardHandler))
	defer a.Close()
	ctx := context.Background()
	path := filepath.Join(dir, ArchiveDir, FileName(testWrite(1)))
	deliver := func(seqs ...uint64) error {
		t.Helper()
		for _, seq := range seqs {
			if err := a.Deliver(ctx, "builder", testWrite(seq)); err != nil {
				t.Fatal(err)
			}
		}
		return a.Flush(ctx, "builder")
	}
	if err := deliver(1); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	// The disk fills in the middle of the next batch's first line.
	disk.room = 40
	err := deliver(2, 3)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("a flush on a full disk: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("a failed append changed the file:\nbefore %q\nafter  %q", before, after)
	}
	// Still full: the retry fails the same way and leaves nothing either.
	disk.room = 0
	if err := deliver(2, 3); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second flush on a full disk: %v", err)
	}
	// Room again: the retry writes each line once.
	disk.room = -1
	if err := deliver(2, 3); err != nil {
		t.Fatal(err)
	}
	if got := wholeLines(t, path); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("archive lines: seqs %v, want [1 2 3]", got)
	}
}

// When even the cut fails, the file is reopened before the next write, and
// the partial line is cut then, with a warning naming the file.
func TestArchiveCutThatFailsIsRepairedOnReopen(t *testing.T) {
	dir := t.TempDir()
	disk := &faultyDisk{room: -1}
	var logs bytes.Buffer
	a := faultyArchive(dir, disk, slog.New(slog.NewTextHandler(&logs, nil)))
	defer a.Close()
	ctx := context.Background()
	path := filepath.Join(dir, ArchiveDir, FileName(testWrite(1)))
	deliver := func(seq uint64) error {
		t.Helper()
		if err := a.Deliver(ctx, "builder", testWrite(seq)); err != nil {
			t.Fatal(err)
		}
		return a.Flush(ctx, "builder")
	}
	if err := deliver(1); err != nil {
		t.Fatal(err)
	}
	disk.room, disk.failTruncate = 40, true
	if err := deliver(2); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "could not be cut off") {
		t.Fatalf("a flush on a full disk whose cut fails: %v", err)
	}
	disk.room, disk.failTruncate = -1, false
	if err := deliver(2); err != nil {
		t.Fatal(err)
	}
	if got := wholeLines(t, path); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("archive lines: seqs %v, want [1 2]", got)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, path) || !strings.Contains(l, "bytes=40") {
		t.Fatalf("the repair was not logged with the file and the bytes cut: %q", l)
	}
}

// Deliver writes nothing: the lines of a batch reach the file together, at
// Flush, and a batch never flushed (the daemon stopped first) leaves the
// file as it was.
func TestArchiveWritesABatchAtFlush(t *testing.T) {
	dir := t.TempDir()
	a := New("local", func(string) string { return dir })
	ctx := context.Background()
	path := filepath.Join(dir, ArchiveDir, FileName(testWrite(1)))
	for seq := uint64(1); seq <= 3; seq++ {
		if err := a.Deliver(ctx, "builder", testWrite(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if got := wholeLines(t, path); len(got) != 0 {
		t.Fatalf("lines before Flush: %v", got)
	}
	if err := a.Flush(ctx, "builder"); err != nil {
		t.Fatal(err)
	}
	if got := wholeLines(t, path); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("archive lines: seqs %v, want [1 2 3]", got)
	}
	if err := a.Deliver(ctx, "builder", testWrite(4)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := wholeLines(t, path); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("archive lines after a close with a batch unflushed: seqs %v, want [1 2 3]", got)
	}
}

// A partial last line a killed process left is cut when the file is
// opened, with a warning; the whole lines before it stay.
func TestArchiveCutsAPartialLastLineOnOpen(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"after whole lines", `{"seq":1,"kind":"checkpoint"}` + "\n" + `{"seq":2,"ki`},
		{"alone", `{"seq":2,"ki`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ArchiveDir, FileName(testWrite(2)))
			os.MkdirAll(filepath.Dir(path), 0o700)
			os.WriteFile(path, []byte(tc.content), 0o600)
			var logs bytes.Buffer
			a := New("local", func(string) string { return dir }).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
			defer a.Close()
			if err := a.Deliver(context.Background(), "builder", testWrite(2)); err != nil {
				t.Fatal(err)
			}
			if err := a.Flush(context.Background(), "builder"); err != nil {
				t.Fatal(err)
			}
			got := wholeLines(t, path)
			if n := len(got); n == 0 || got[n-1] != 2 || n != strings.Count(tc.content, "\n")+1 {
				t.Fatalf("archive lines: seqs %v", got)
			}
			if l := logs.String(); !strings.Contains(l, "partial last line") || !strings.Contains(l, path) || !strings.Contains(l, "bytes=12") {
				t.Fatalf("the cut was not logged with the file and the bytes: %q", l)
			}
		})
	}
}

// Recover cuts a partial last line in every archive file of the agent at
// once (a day's file may never be appended to again), leaves whole files
// as they are, and does not touch another agent's archive.
func TestArchiveRecoverCutsEveryTornFile(t *testing.T) {
	root := t.TempDir()
	dirOf := func(agent string) string { return filepath.Join(root, agent) }
	files := map[string]string{
		"builder/2026-11-28.jsonl": `{"seq":1}` + "\n" + `{"seq":2,"ki`,
		"builder/2026-11-29.jsonl": `{"seq":3}` + "\n",
		"builder/2026-11-30.jsonl": `{"seq":4,"kind":"checkp`,
		"other/2026-11-30.jsonl":   `{"seq":1,"kind":"checkp`,
	}
	for name, content := range files {
		agent, day, _ := strings.Cut(name, "/")
		path := filepath.Join(dirOf(agent), ArchiveDir, day)
		os.MkdirAll(filepath.Dir(path), 0o700)
		os.WriteFile(path, []byte(content), 0o600)
	}
	var logs bytes.Buffer
	a := New("local", dirOf).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	defer a.Close()
	if err := a.Recover("builder"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"builder/2026-11-28.jsonl": `{"seq":1}` + "\n",
		"builder/2026-11-29.jsonl": `{"seq":3}` + "\n",
		"builder/2026-11-30.jsonl": "",
		"other/2026-11-30.jsonl":   files["other/2026-11-30.jsonl"],
	}
	for name, content := range want {
		agent, day, _ := strings.Cut(name, "/")
		got, err := os.ReadFile(filepath.Join(dirOf(agent), ArchiveDir, day))
		if err != nil || string(got) != content {
			t.Errorf("%s after Recover: %q (%v), want %q", name, got, err, content)
		}
	}
	if n := strings.Count(logs.String(), "partial last line"); n != 2 {
		t.Errorf("%d cuts logged, want 2: %s", n, logs.String())
	}
}

// Recover with no archive yet (a new agent) is not an error.
func TestArchiveRecoverWithNoArchive(t *testing.T) {
	dir := t.TempDir()
	a := New("local", func(string) string { return dir })
	defer a.Close()
	if err := a.Recover("builder"); err != nil {
		t.Fatal(err)
	}
}
