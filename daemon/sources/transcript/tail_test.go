package transcript

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readNew calls ReadNew and returns the lines as strings.
func readNew(t *testing.T, tl *Tail, max int) ([]string, bool) {
	t.Helper()
	lines, truncated, err := tl.ReadNew(max)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l))
	}
	return out, truncated
}

func expectLines(t *testing.T, tl *Tail, max int, wantTrunc bool, want ...string) {
	t.Helper()
	got, trunc := readNew(t, tl, max)
	if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) || trunc != wantTrunc {
		t.Fatalf("got %q truncated=%v, want %q truncated=%v", got, trunc, want, wantTrunc)
	}
}

func TestTailAppendAndPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	tl := &Tail{Path: path}
	if _, _, err := tl.ReadNew(0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	appendFile(t, path, "a\nb\n")
	expectLines(t, tl, 0, false, "a", "b")
	expectLines(t, tl, 0, false)

	appendFile(t, path, "c\n{\"partial\":")
	expectLines(t, tl, 0, false, "c")
	off := tl.Offset
	expectLines(t, tl, 0, false)
	if tl.Offset != off {
		t.Fatalf("offset moved over a partial line: %d -> %d", off, tl.Offset)
	}
	appendFile(t, path, "1}\r\n\n  \nd\n")
	expectLines(t, tl, 0, false, `{"partial":1}`, "d")
	if fi, _ := os.Stat(path); tl.Offset != fi.Size() {
		t.Fatalf("offset %d, size %d", tl.Offset, fi.Size())
	}

	// Returned lines do not alias each other.
	appendFile(t, path, "xy\nz\n")
	lines, _, _ := tl.ReadNew(0)
	_ = append(lines[0], '!')
	if string(lines[1]) != "z" {
		t.Fatalf("lines alias: %q", lines[1])
	}
}

func TestTailSmallReadsResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, path, "one\ntwo\nthree\n")
	tl := &Tail{Path: path}
	var got []string
	for range 10 {
		l, _ := readNew(t, tl, 9)
		got = append(got, l...)
	}
	if strings.Join(got, ",") != "one,two,three" {
		t.Fatalf("got %q", got)
	}

	// A restarted daemon resumes from the persisted offset and inode.
	appendFile(t, path, "four\n")
	again := &Tail{Path: path, Offset: tl.Offset, Inode: tl.Inode}
	expectLines(t, again, 0, false, "four")
}

func TestTailTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, path, "first line\nsecond line\n")
	tl := &Tail{Path: path}
	expectLines(t, tl, 0, false, "first line", "second line")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "new\n")
	expectLines(t, tl, 0, true, "new")
	appendFile(t, path, "more\n")
	expectLines(t, tl, 0, false, "more")
}

func TestTailRotate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no inode: rotation is seen only through the size")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	appendFile(t, path, "old 1\n")
	tl := &Tail{Path: path}
	expectLines(t, tl, 0, false, "old 1")
	// Rotate: the old file moves away (and keeps growing there), a new,
	// longer file takes its name.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path+".1", "old 2\n")
	appendFile(t, path, "new 1 is longer than the old file\n")
	expectLines(t, tl, 0, true, "new 1 is longer than the old file")
	expectLines(t, tl, 0, false)

	// A stale persisted inode is a replacement too.
	stale := &Tail{Path: path, Offset: 3, Inode: tl.Inode + 1}
	expectLines(t, stale, 0, true, "new 1 is longer than the old file")
}

func TestTailDropsOverlongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, path, "ok\n"+strings.Repeat("x", 40)+"\nafter\n")
	tl := &Tail{Path: path}
	var got []string
	for range 20 {
		l, _ := readNew(t, tl, 16)
		got = append(got, l...)
	}
	if strings.Join(got, ",") != "ok,after" || tl.Dropped != 1 {
		t.Fatalf("got %q, dropped %d", got, tl.Dropped)
	}
	// The line being dropped may still be growing.
	appendFile(t, path, strings.Repeat("y", 40))
	readNew(t, tl, 16)
	readNew(t, tl, 16)
	readNew(t, tl, 16)
	appendFile(t, path, "yyy\nlast\n")
	got = nil
	for range 5 {
		l, _ := readNew(t, tl, 16)
		got = append(got, l...)
	}
	if strings.Join(got, ",") != "last" || tl.Dropped != 2 {
		t.Fatalf("got %q, dropped %d", got, tl.Dropped)
	}
}
