package secretrules

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestKeywordMatcherAgreesWithContains: for the embedded rules' keywords
// and for small sets built to trip an Aho-Corasick automaton (keywords
// inside, overlapping and ending other keywords, repeated bytes, an empty
// keyword, bytes outside every keyword), the matcher says a keyword is
// present exactly when strings.Contains does, on texts made of pieces of
// the keywords and random bytes.
func TestKeywordMatcherAgreesWithContains(t *testing.T) {
	embedded, err := parse(rulesTOML, false)
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string][]string{
		"embedded":  embedded.prefilter.keywords,
		"classic":   {"he", "she", "his", "hers"},
		"runs":      {"a", "aa", "aaa", "aaaa", "b", "ab", "ba"},
		"suffixes":  {"key", "apikey", "api_key", "y", "ey", "secret", "cret", "re"},
		"empty":     {"", "tok", "token"},
		"highbytes": {"\xff\xfe", "\x00x", "é"},
	}
	rng := rand.New(rand.NewPCG(23, 25))
	for name, keywords := range sets {
		m := newKeywordMatcher(keywords)
		if m == nil {
			t.Fatalf("%s: no matcher", name)
		}
		for n := 0; n < 2000; n++ {
			var b strings.Builder
			for b.Len() < rng.IntN(200) {
				switch k := keywords[rng.IntN(len(keywords))]; rng.IntN(4) {
				case 0: // a whole keyword
					b.WriteString(k)
				case 1: // a piece of one
					if len(k) > 0 {
						i := rng.IntN(len(k))
						b.WriteString(k[i : i+rng.IntN(len(k)-i)+1])
					}
				case 2: // a random byte
					b.WriteByte(byte(rng.IntN(256)))
				default: // a byte of the keywords
					if len(k) > 0 {
						b.WriteByte(k[rng.IntN(len(k))])
					}
				}
			}
			text := b.String()
			got := make([]bool, len(keywords))
			found := m.present(text, got)
			anyWant := false
			for i, k := range keywords {
				want := strings.Contains(text, k)
				if got[i] != want {
					t.Fatalf("%s: %q in %q: matcher says %v, strings.Contains %v", name, k, text, got[i], want)
				}
				anyWant = anyWant || want
			}
			if found != anyWant {
				t.Fatalf("%s: %q: matcher says a keyword is present: %v, strings.Contains %v", name, text, found, anyWant)
			}
		}
	}
}

// TestKeywordMatcherIsSmall: the point of the matcher (issue 23, resting
// memory) is its size; the embedded rules' keywords take well under the
// 2.5 MB of github.com/BobuSumisu/aho-corasick's trie it replaced.
func TestKeywordMatcherIsSmall(t *testing.T) {
	s, err := parse(rulesTOML, true)
	if err != nil {
		t.Fatal(err)
	}
	m := s.prefilter.m
	bytes := 4 * (len(m.rows) + len(m.state) + len(m.ends) + len(m.first) + len(m.link))
	t.Logf("%d keywords, %d states, %d classes: %d bytes", len(s.prefilter.keywords), len(m.ends), m.classes, bytes)
	if bytes > 512<<10 {
		t.Fatalf("the matcher takes %d bytes, want under 512 KiB", bytes)
	}
}
