package transcript

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fixtureLines returns the lines of testdata/name, without newlines.
func fixtureLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// run is the outcome of feeding lines to a Tracker.
type run struct {
	tokens      []int64      // Usage.Tokens of every usage update, in order; -1 marks a compaction
	usages      []Usage      // every usage update
	compactions []Compaction // every compaction update
	// usageAtCompaction is the known usage just before each compaction.
	usageAtCompaction []*Usage
	state             State
}

// feed runs lines through a fresh Tracker and fails on any error: the
// fixtures are well-formed, line by line.
func feed(t testing.TB, f Format, o Options, lines [][]byte) run {
	t.Helper()
	tr := NewTrackerWith(f, o)
	var r run
	for i, l := range lines {
		before := tr.State().Usage
		u, err := tr.Line(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if u.Usage != nil {
			r.tokens = append(r.tokens, u.Usage.Tokens)
			r.usages = append(r.usages, *u.Usage)
		}
		if u.Compaction != nil {
			if u.Usage != nil {
				t.Fatalf("line %d: a usage and a compaction from one line", i+1)
			}
			r.tokens = append(r.tokens, -1)
			r.compactions = append(r.compactions, *u.Compaction)
			r.usageAtCompaction = append(r.usageAtCompaction, before)
			if tr.State().Usage != nil {
				t.Fatalf("line %d: usage still known right after a compaction", i+1)
			}
		}
	}
	r.state = tr.State()
	return r
}

func feedFile(t testing.TB, f Format, name string) run {
	t.Helper()
	return feed(t, f, Options{}, fixtureLines(t, name))
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
