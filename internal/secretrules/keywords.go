package secretrules

import "strings"

// keywordMatcher finds which of a set of keywords occur in a text, in one
// pass: the Aho-Corasick automaton of the keywords, completed into a
// deterministic one (every state has a next state for every byte, so the
// walk is one table look-up per byte and never follows failure links).
//
// It is this package's own because of its size, which stays resident
// for the daemon's life: github.com/BobuSumisu/aho-corasick keeps a
// [256]int64 row per state, 2.5 MB for gitleaks' keywords and most of the
// daemon's live heap at rest. Here bytes that no keyword holds share one
// class, the others one class each, and a row is one uint32 per class:
// about 0.2 MB for the same keywords, and a walk as fast (one look-up
// per byte, BenchmarkPrefilter).
type keywordMatcher struct {
	class   [256]uint8 // a byte's class; 0: a byte no keyword holds
	classes int        // the number of classes (a row's length)
	// rows is the automaton the walk reads, one row of classes entries
	// per state: an entry is the next state's row offset (its number
	// times classes), so the walk adds the byte's class and reads the
	// next entry without a multiplication. The root is state 0; the
	// states where a keyword ends (first is not 0) are numbered last,
	// from row offset ending on, so telling them apart is one comparison
	// off the walk's chain of loads. state maps a state's number here to
	// its number in ends, first and link.
	rows   []uint32
	ending uint32
	state  []int32
	// ends[s] is the keyword that ends at state s, -1 when none does;
	// first[s] the first state on s's suffix chain (s itself included)
	// where a keyword ends, and link[s] the first one after s (0: none:
	// the root ends no keyword, empty keywords are kept apart in always).
	ends, first, link []int32
	// always are the empty keywords: an empty string occurs in every
	// text, as strings.Contains says.
	always []int
}

// newKeywordMatcher builds the matcher of keywords (de-duplicated, as
// parse makes them); present's answers index into it. It returns nil for
// keywords that hold all 256 byte values between them.
func newKeywordMatcher(keywords []string) *keywordMatcher {
	m := &keywordMatcher{classes: 1}
	for _, k := range keywords {
		for i := 0; i < len(k); i++ {
			if m.class[k[i]] == 0 {
				if m.classes > 255 {
					return nil // keywords holding every byte value: not worth a class table
				}
				m.class[k[i]] = uint8(m.classes)
				m.classes++
			}
		}
	}
	// The trie: next holds its edges (0 where none: the root is no
	// state's child), ends its keywords.
	nc := m.classes
	next := make([]int32, nc)
	m.ends = []int32{-1}
	for i, k := range keywords {
		if k == "" {
			m.always = append(m.always, i)
			continue
		}
		s := int32(0)
		for j := 0; j < len(k); j++ {
			c := int32(m.class[k[j]])
			t := next[s*int32(nc)+c]
			if t == 0 {
				t = int32(len(m.ends))
				m.ends = append(m.ends, -1)
				next = append(next, make([]int32, nc)...)
				next[s*int32(nc)+c] = t
			}
			s = t
		}
		m.ends[s] = int32(i)
	}
	// Breadth first, each state's failure (the longest proper suffix of
	// its path that is a trie state) is known before its children's:
	// the missing edges become the failure's, and the suffix chain of
	// keyword ends follows from the failure's.
	states := len(m.ends)
	fail := make([]int32, states)
	m.first, m.link = make([]int32, states), make([]int32, states)
	order := make([]int32, 1, states) // breadth first, the root first
	for c := 0; c < nc; c++ {
		if t := next[c]; t != 0 {
			order = append(order, t) // fail[t] = 0, the root
		}
	}
	for i := 1; i < len(order); i++ {
		s := order[i]
		f := fail[s]
		if f != 0 {
			m.link[s] = m.first[f]
		}
		m.first[s] = m.link[s]
		if m.ends[s] >= 0 {
			m.first[s] = s
		}
		row, frow := next[int(s)*nc:int(s+1)*nc], next[int(f)*nc:int(f+1)*nc]
		for c := range row {
			if t := row[c]; t != 0 {
				fail[t] = frow[c]
				order = append(order, t)
			} else {
				row[c] = frow[c]
			}
		}
	}
	// Renumber the states for the walk: those where no keyword ends
	// first (the root, with none, stays 0), then the others; breadth
	// first in each, so the shallow states a text mostly visits have
	// their rows together.
	if states*nc >= 1<<31 {
		return nil // not for any keyword set this package sees: a uint32 would not hold it
	}
	renumbered := make([]uint32, states)
	m.state = make([]int32, 0, states)
	for _, ends := range []bool{false, true} {
		if ends {
			m.ending = uint32(len(m.state) * nc)
		}
		for _, s := range order {
			if (m.first[s] != 0) == ends {
				renumbered[s] = uint32(len(m.state) * nc)
				m.state = append(m.state, int32(s))
			}
		}
	}
	m.rows = make([]uint32, len(next))
	for s := range states {
		row := m.rows[renumbered[s] : renumbered[s]+uint32(nc)]
		for c, t := range next[s*nc : (s+1)*nc] {
			row[c] = renumbered[t]
		}
	}
	return m
}

// present marks in present (one entry per keyword) the keywords text
// holds, and reports whether it holds any.
func (m *keywordMatcher) present(text string, present []bool) (found bool) {
	for _, i := range m.always {
		present[i] = true
		found = true
	}
	rows, class, ending := m.rows, &m.class, m.ending
	row := uint32(0) // the root's
	for i := 0; i < len(text); i++ {
		row = rows[row+uint32(class[text[i]])]
		if row >= ending {
			m.mark(m.state[row/uint32(m.classes)], present)
			found = true
		}
	}
	return found
}

// mark marks the keywords that end at state s: its suffix chain.
func (m *keywordMatcher) mark(s int32, present []bool) {
	// A keyword already marked had its whole chain marked then.
	for u := m.first[s]; u != 0 && !present[m.ends[u]]; u = m.link[u] {
		present[m.ends[u]] = true
	}
}

// Keywords finds which of a set of keywords occur in a text, in one pass
// over it: the prefilter of gitleaks' rules (Set.Find), and of other rule
// sets' literals (the capsule guard's own rules).
type Keywords struct {
	m        *keywordMatcher // nil: strings.Contains for each (see newKeywordMatcher)
	keywords []string
}

// NewKeywords returns the matcher of keywords, which must be distinct.
// Matching is byte for byte: lower-case both sides to fold case.
func NewKeywords(keywords []string) *Keywords {
	return &Keywords{m: newKeywordMatcher(keywords), keywords: keywords}
}

// Present marks the keywords text holds, one entry per keyword in the
// order they were given, and reports whether it holds any. The marks are
// made in buf when it has the room (a caller's array on its stack: the
// guard checks every field of every write).
func (k *Keywords) Present(text string, buf []bool) (marks []bool, found bool) {
	if n := len(k.keywords); cap(buf) >= n {
		marks = buf[:n]
		clear(marks)
	} else {
		marks = make([]bool, n)
	}
	if k.m != nil {
		return marks, k.m.present(text, marks)
	}
	for i, kw := range k.keywords {
		marks[i] = strings.Contains(text, kw)
		found = found || marks[i]
	}
	return marks, found
}
