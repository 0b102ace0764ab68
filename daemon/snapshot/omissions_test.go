package snapshot

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// logSink collects one test's log.
type logSink struct{ bytes.Buffer }

func (l *logSink) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// mkdirDeep makes a chain of directories (and a file at its end) whose
// path is longer than the system's limit, one openat at a time.
func mkdirDeep(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 200)
	for range depth {
		if err := syscall.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := syscall.Openat(fd, name, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := syscall.Openat(fd, "deep.txt", syscall.O_CREAT|syscall.O_WRONLY, 0o644)
	syscall.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Write(f, []byte("deep\n"))
	syscall.Close(f)
}

// Every file a snapshot leaves out is in its skipped list with the reason:
// names git takes for .git, paths too long for the system, directories
// git cannot read (with git's warning logged).
func TestOmissionsAreListed(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "a\n")
	write(t, wd, ".GIT", "upper\n")
	write(t, wd, "sub/.Git", "mixed\n")
	write(t, wd, ".gitignore", "ignored/\n")
	write(t, wd, "ignored/.GIT", "ignored anyway\n")
	mkdirDeep(t, filepath.Join(wd), 25)
	closed := os.Geteuid() != 0 // root reads a mode-000 directory
	if closed {
		write(t, wd, "closed/c.txt", "c\n")
		chmod(t, wd, "closed", 0)
		t.Cleanup(func() { os.Chmod(filepath.Join(wd, "closed"), 0o755) })
	}
	var log logSink
	s := newStore(t, wd, Options{Logger: log.logger()})
	snap, _ := mustTake(t, s, "start", 1)
	d, err := s.Show(context.Background(), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range d.SkippedFiles {
		got[k.Path] = k.Reason
	}
	deep := strings.Repeat(strings.Repeat("d", 200)+"/", 20)
	want := map[string]string{".GIT": ReasonGitName, "sub/.Git": ReasonGitName}
	if closed {
		want["closed/"] = ReasonUnreadable
	}
	for p, r := range want {
		if got[p] != r {
			t.Errorf("%s skipped as %q, want %q (skipped: %v)", p, got[p], r, got)
		}
	}
	long := false
	for p, r := range got {
		long = long || strings.HasPrefix(p, deep) && r == ReasonPathTooLong
	}
	if !long {
		t.Errorf("the path over 4,096 bytes is not listed: %v", keys(got))
	}
	if _, ok := got["ignored/.GIT"]; ok {
		t.Error("an ignored file is listed as skipped")
	}
	if len(d.SkippedFiles) != d.Skipped || d.Skipped != len(want)+1 {
		t.Errorf("skipped = %d, listed %v", d.Skipped, got)
	}
	if closed && !strings.Contains(log.String(), "could not open directory") {
		t.Errorf("git's warning is not logged:\n%s", log.String())
	}
}

// A git add that crashes (a file rewritten while git reads it: SIGBUS) and
// leaves its index.lock is run again, and the snapshot is made.
func TestCrashedAddIsRetried(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "a\n")
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	marker := filepath.Join(bin, "crashed")
	script := `#!/bin/sh
for a in "$@"; do
	case "$a" in
	--git-dir=*) dir="${a#--git-dir=}" ;;
	add) if [ ! -e ` + marker + ` ]; then : > ` + marker + `; : > "$dir/index.lock"; kill -BUS $$; fi ;;
	esac
done
exec ` + real + ` "$@"
`
	// Every script is written before any store runs git: a git started
	// (forked) while a script is open for writing would make its exec
	// fail with "text file busy".
	git := filepath.Join(bin, "git")
	always := filepath.Join(bin, "git-always")
	shrank := filepath.Join(bin, "git-shrank")
	marker2 := filepath.Join(bin, "shrank")
	// Streaming a file into its pack (core.bigFileThreshold=1), git dies
	// when the file shrank under it.
	text := strings.ReplaceAll(script, marker, marker2)
	text = strings.ReplaceAll(text, `kill -BUS $$`, `echo "fatal: failed to read 2 bytes from 'a.txt'" >&2; exit 128`)
	for name, body := range map[string]string{git: script, always: strings.ReplaceAll(script, "[ ! -e "+marker+" ]", "true"), shrank: text} {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Each store's first snapshot is staged by git add, as a full add
	// after it would be (package take writes it in process otherwise).
	var log logSink
	s := newStore(t, wd, Options{Git: git, Logger: log.logger()})
	s.take.Hooks.FirstByGit = true
	snap, isNew, err := s.Take(context.Background(), "start", 1)
	if err != nil || !isNew {
		t.Fatalf("Take after a crashed git add: %v, %v\n%s", isNew, err, log.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("git add never crashed: the test tests nothing")
	}
	if files := treeOf(t, s, snap.ID); files["a.txt"].content != "a\n" {
		t.Fatalf("snapshot holds %v", keys(files))
	}

	// A git add that crashes every time fails the Take with what
	// happened, and leaves no lock behind.
	s2 := newStore(t, wd, Options{Git: always, Logger: log.logger()})
	s2.take.Hooks.FirstByGit = true
	if _, _, err := s2.Take(context.Background(), "start", 1); err == nil || !strings.Contains(err.Error(), "stopped 3 times") {
		t.Fatalf("Take with a git add that always crashes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s2.Dir(), "index.lock")); !os.IsNotExist(err) {
		t.Fatalf("index.lock left: %v", err)
	}

	// A git add that found a file shrunk under it is run again too.
	s3 := newStore(t, wd, Options{Git: shrank, Logger: log.logger()})
	s3.take.Hooks.FirstByGit = true
	if _, isNew, err := s3.Take(context.Background(), "start", 1); err != nil || !isNew {
		t.Fatalf("Take after git add found a file shrunk: %v, %v", isNew, err)
	}
	if _, err := os.Stat(marker2); err != nil {
		t.Fatal("git add never failed: the test tests nothing")
	}
}
