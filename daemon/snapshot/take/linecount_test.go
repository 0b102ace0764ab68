package take

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The line counts of a Take from what changed are git's: random edits of
// random texts, counted in process and by git diff --numstat.
func TestLineDiffCountsAreGits(t *testing.T) {
	dir := t.TempDir()
	if out, err := gitIn(t, dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(5, 9))
	text := func(n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = "l" + strconv.Itoa(rng.IntN(12)) + "\n"
		}
		return lines
	}
	for round := range 60 {
		a := text(rng.IntN(40))
		b := append([]string(nil), a...)
		for range rng.IntN(8) {
			switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0:
				b = append(b[:i], append(text(1+rng.IntN(3)), b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				if i < len(b) {
					b[i] = "changed " + strconv.Itoa(round) + "\n"
				}
			}
		}
		if rng.IntN(4) == 0 && len(b) > 0 {
			b[len(b)-1] = strings.TrimSuffix(b[len(b)-1], "\n") // no newline at the end
		}
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(pa, []byte(strings.Join(a, "")), 0o644)
		os.WriteFile(pb, []byte(strings.Join(b, "")), 0o644)
		want := gitNumstat(t, dir)
		added, deleted, err := lineDiff(splitLines([]byte(strings.Join(a, ""))), splitLines([]byte(strings.Join(b, ""))))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%d\t%d", added, deleted); got != want {
			t.Fatalf("round %d: counted %q, git says %q\na=%q\nb=%q", round, got, want, a, b)
		}
	}
	if _, _, err := lineDiff(text(3000), text(3000)); err != errTooManyEdits {
		t.Fatalf("two unrelated texts of 3,000 lines were counted in process (%v)", err)
	}
}

// gitNumstat is `git diff --no-index --numstat a b` in dir: "added\tdeleted".
func gitNumstat(t *testing.T, dir string) string {
	t.Helper()
	out, _ := gitIn(t, dir, "diff", "--no-index", "--numstat", "a", "b").Output() // exit 1: they differ
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return "0\t0"
	}
	return f[0] + "\t" + f[1]
}

// gitIn is git run in dir as a user would, with no configuration of the
// machine's.
func gitIn(t *testing.T, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}
	return cmd
}
