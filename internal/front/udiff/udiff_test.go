package udiff

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestUnifiedShape(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	b := "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11"
	want := "--- a\n+++ b\n@@ -2,9 +2,10 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n 10\n+11\n\\ No newline at end of file\n"
	if got := Unified("a", "b", []byte(a), []byte(b)); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := Unified("/dev/null", "b", nil, []byte("x\n")); got != "--- /dev/null\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Fatalf("new file: %q", got)
	}
	if Unified("a", "b", []byte(a), []byte(a)) != "" {
		t.Fatal("no change, yet a diff")
	}
}

// patch(1) applies what Unified writes and gets the new text, for edits
// scattered at random through texts of many lines.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("no patch(1)")
	}
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for n := 0; n < 40; n++ {
		var a []string
		for i := 0; i < 5+r.IntN(60); i++ {
			a = append(a, fmt.Sprintf("line %d\n", r.IntN(12)))
		}
		b := append([]string(nil), a...)
		for k := 0; k < 1+r.IntN(5); k++ {
			i := r.IntN(len(b) + 1)
			switch r.IntN(3) {
			case 0:
				b = append(b[:i], append([]string{"new\n"}, b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				if i < len(b) {
					b[i] = "changed\n"
				}
			}
		}
		at, bt := strings.Join(a, ""), strings.Join(b, "")
		if r.IntN(4) == 0 {
			bt = strings.TrimSuffix(bt, "\n")
		}
		d := Unified("a/f", "b/f", []byte(at), []byte(bt))
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(at), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("patch", "-s", "-p1", "-d", dir)
		cmd.Stdin = strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch refused:\n%s\n%s", d, out)
		}
		got, _ := os.ReadFile(f)
		if string(got) != bt {
			t.Fatalf("patched to\n%q\nwant\n%q\ndiff:\n%s", got, bt, d)
		}
	}
}
