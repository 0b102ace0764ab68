package lazyregexp

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A lazy expression answers exactly as the compiled one, through every
// method, and compiles once however many goroutines ask first.
func TestAnswersAsRegexp(t *testing.T) {
	const expr = `(?i)\b(bearer)\s+([^\s,;"']+)`
	lazy, eager := New(expr), regexp.MustCompile(expr)
	in := "Authorization: Bearer abc.def, then bearer  xyz and nothing"
	if lazy.MatchString(in) != eager.MatchString(in) || lazy.Match([]byte(in)) != eager.Match([]byte(in)) {
		t.Error("Match differs")
	}
	if lazy.FindString(in) != eager.FindString(in) {
		t.Error("FindString differs")
	}
	if g, w := lazy.FindStringIndex(in), eager.FindStringIndex(in); !slices.Equal(g, w) {
		t.Errorf("FindStringIndex %v, want %v", g, w)
	}
	if g, w := lazy.FindStringSubmatch(in), eager.FindStringSubmatch(in); strings.Join(g, "|") != strings.Join(w, "|") {
		t.Errorf("FindStringSubmatch %q, want %q", g, w)
	}
	if g, w := lazy.FindStringSubmatchIndex(in), eager.FindStringSubmatchIndex(in); !slices.Equal(g, w) {
		t.Errorf("FindStringSubmatchIndex %v, want %v", g, w)
	}
	if g, w := lazy.FindAllString(in, -1), eager.FindAllString(in, -1); strings.Join(g, "|") != strings.Join(w, "|") {
		t.Errorf("FindAllString %q, want %q", g, w)
	}
	if g, w := lazy.FindAllStringIndex(in, -1), eager.FindAllStringIndex(in, -1); len(g) != len(w) {
		t.Errorf("FindAllStringIndex %v, want %v", g, w)
	}
	if g, w := lazy.FindAllStringSubmatch(in, -1), eager.FindAllStringSubmatch(in, -1); len(g) != len(w) || g[1][2] != w[1][2] {
		t.Errorf("FindAllStringSubmatch %q, want %q", g, w)
	}
	if g, w := lazy.ReplaceAllString(in, "$1 [x]"), eager.ReplaceAllString(in, "$1 [x]"); g != w {
		t.Errorf("ReplaceAllString %q, want %q", g, w)
	}
	up := func(s string) string { return strings.ToUpper(s) }
	if g, w := lazy.ReplaceAllStringFunc(in, up), eager.ReplaceAllStringFunc(in, up); g != w {
		t.Errorf("ReplaceAllStringFunc %q, want %q", g, w)
	}
	if lazy.String() != expr || lazy.Regexp().String() != expr {
		t.Errorf("String %q, want %q", lazy.String(), expr)
	}
}

func TestCompilesOnce(t *testing.T) {
	r := New(`^a+$`)
	var wg sync.WaitGroup
	seen := make([]*regexp.Regexp, 8)
	for i := range seen {
		wg.Go(func() { seen[i] = r.Regexp() })
	}
	wg.Wait()
	for _, re := range seen {
		if re != seen[0] {
			t.Fatal("compiled more than once")
		}
	}
}

// Under go test an invalid expression fails at New, where it is declared,
// as regexp.MustCompile would in a package-level var.
func TestInvalidPanicsAtNewUnderTest(t *testing.T) {
	if !underTest() {
		t.Fatal("a test binary is not recognised as one")
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted an invalid expression under go test")
		}
	}()
	New(`a(`)
}
