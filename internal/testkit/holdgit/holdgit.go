// Package holdgit is for tests only: a git that stops one run at a point
// the test chose, announces it, and goes on only when the test releases
// it. A test that kills a process in the middle of a snapshot holds the
// snapshot there instead of sleeping and hoping that the kill lands in
// time, whatever the machine's speed.
//
// The wrapper is a shell script named git: put its directory first on
// PATH (a daemon started as a subprocess) or pass Path as the git binary.
// Every run it does not hold execs the real git with the same arguments;
// a held run is the process its caller started (the wrapper execs git in
// place), so what happens to it at a kill happens to git.
package holdgit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The points a run can be held at.
const (
	// MidAdd holds `git add` in the middle of its work: the real git runs,
	// holds the index lock, and waits in its file system monitor query (a
	// hook, a child of git, given with -c core.fsmonitor after the
	// caller's settings), before it hashes any file. A clean filter would
	// hold it later, but the snapshot store's info/attributes turns
	// filters off, and rightly.
	MidAdd = "add"
	// The others hold a run of the named subcommand before git starts.
	BeforeWriteTree = "write-tree"
	// BeforeCheckIgnore holds the snapshot store's long-lived git
	// check-ignore as it starts: a snapshot from what changed asks it
	// about a new file before it writes anything.
	BeforeCheckIgnore = "check-ignore"
)

// Git is one wrapper and its control directory.
type Git struct {
	Path string // the wrapper, named git
	ctl  string // point (armed), taken (claimed by a run), held (announced), release; runs lists every subcommand run
}

// script is the wrapper. One run claims an armed point by renaming the
// point file (so exactly one run is held per Arm), announces itself in
// held and polls for release; polling is the wrapper waiting for the
// test's word, not a guess at timing.
const script = `#!/bin/sh
ctl=%s
real=%s
hold() {
	echo "$1" >"$ctl/held.tmp" && mv "$ctl/held.tmp" "$ctl/held"
	while [ ! -e "$ctl/release" ]; do sleep 0.01; done
}
if [ "$1" = --holdgit-fsmonitor ]; then
	# git add's file system monitor query, asked with the index locked and
	# before any file is hashed: the first run to get here holds git;
	# each then answers "unknown" (exit 1), so git looks at every file.
	if mv "$ctl/point" "$ctl/taken" 2>/dev/null; then hold add; fi
	exit 1
fi
sub= skip=
for a do
	if [ -n "$skip" ]; then skip=; continue; fi
	case $a in -c | -C) skip=1 ;; -*) ;; *) sub=$a; break ;; esac
done
echo "$sub" >>"$ctl/runs"
point=
[ -f "$ctl/point" ] && read -r point <"$ctl/point"
if [ -z "$sub" ] || [ "$sub" != "$point" ]; then
	:
elif [ "$sub" = add ]; then
	# Every git add while armed asks the hook; the first holds. The
	# setting goes last before the subcommand: a later -c wins.
	done=
	for a do
		shift
		if [ -z "$done" ] && [ "$a" = add ]; then
			set -- "$@" -c "core.fsmonitor=$0 --holdgit-fsmonitor"
			done=1
		fi
		set -- "$@" "$a"
	done
elif mv "$ctl/point" "$ctl/taken" 2>/dev/null; then
	hold "$sub"
fi
exec "$real" "$@"
`

// New writes a wrapper around the git found on PATH into a directory of
// the test's. When the test ends, a run still held (a hook orphaned by a
// kill) is released.
func New(t testing.TB) *Git {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found: %v", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g := &Git{Path: filepath.Join(dir, "bin", "git"), ctl: filepath.Join(dir, "ctl")}
	for _, d := range []string{filepath.Dir(g.Path), g.ctl} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	text := fmt.Sprintf(script, shellQuote(g.ctl), shellQuote(real))
	if err := os.WriteFile(g.Path, []byte(text), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(filepath.Join(g.ctl, "release"), nil, 0o600) })
	return g
}

// Dir is the wrapper's directory, to put first on PATH.
func (g *Git) Dir() string { return filepath.Dir(g.Path) }

// Arm makes the next run at point hold.
func (g *Git) Arm(t testing.TB, point string) {
	t.Helper()
	for _, f := range []string{"held", "taken", "release"} {
		if err := os.Remove(filepath.Join(g.ctl, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(g.ctl, "point"), []byte(point+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Disarm takes back an armed point no run has claimed; a run that holds
// stays held until Release.
func (g *Git) Disarm(t testing.TB) {
	t.Helper()
	if err := os.Remove(filepath.Join(g.ctl, "point")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// WaitHeld waits until a run holds at the armed point, up to within;
// describe says what the test saw meanwhile (a daemon's log) when it
// fails.
func (g *Git) WaitHeld(t testing.TB, within time.Duration, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(filepath.Join(g.ctl, "held")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			point, _ := os.ReadFile(filepath.Join(g.ctl, "point"))
			_, err := os.Stat(filepath.Join(g.ctl, "taken"))
			runs, _ := os.ReadFile(filepath.Join(g.ctl, "runs"))
			last := strings.Split(strings.TrimSpace(string(runs)), "\n")
			last = last[max(0, len(last)-20):]
			t.Fatalf("holdgit: no git run held within %s (armed %q, claimed: %v; the last git runs: %s); %s",
				within, strings.TrimSpace(string(point)), err == nil, strings.Join(last, " "), describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Release lets the held run go on (or end, when its caller was killed).
func (g *Git) Release(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.ctl, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
