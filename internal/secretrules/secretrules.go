// Package secretrules finds credentials in text with gitleaks' maintained
// default rule set, evaluated with Go's regexp and nothing else of
// gitleaks.
//
// # Where the rules come from
//
// gitleaks.toml, embedded below, is config/gitleaks.toml of
// github.com/zricethezav/gitleaks/v8 at GitleaksVersion, copied verbatim
// (MIT licensed: LICENSE.gitleaks beside it). gitleaks generates it from
// cmd/generate/config/rules/*.go, where every rule is checked against its
// own true and false positives. To update:
//
//  1. copy config/gitleaks.toml of the new release over gitleaks.toml and
//     set GitleaksVersion;
//  2. bump github.com/zricethezav/gitleaks/v8 in go.mod to the same release
//     (the tests run gitleaks' own detector as the reference; the library
//     is needed by tests only);
//  3. go run ./internal/secretrules/testdata/gen (regenerates the rules'
//     examples from that release's generator, and checks that it generates
//     exactly the gitleaks.toml copied in step 1);
//  4. go test ./internal/secretrules/: TestDifferential* compare every
//     verdict with gitleaks' detector. Load refuses a file that uses a
//     feature this package does not implement (unknown keys, [extend],
//     [[rules.required]], skipReport), naming the rule and the key, so a
//     release that starts using one fails here and not silently.
//
// # What is evaluated
//
// Find does for one string what gitleaks' Detector.DetectString does with
// MaxDecodeDepth 0 (no base64, hex or percent decoding passes), read from
// detect/detect.go, config/*.go and detect/location.go of v8.30.1:
//
//   - the keyword prefilter: a rule runs only when one of its keywords
//     occurs in the lower-cased text (strings.ToLower); a rule without
//     keywords always runs;
//   - every match of the rule's regexp, with '\n' trimmed from both ends;
//     the secret is capture group secretGroup, else the first non-empty
//     group, else the whole match, all found by re-running the regexp on
//     the trimmed match as gitleaks does;
//   - entropy: a finding whose secret's Shannon entropy is not above the
//     rule's entropy is dropped (gitleaks' formula, runes over bytes);
//   - the global allowlists, then the rule's own (including global
//     [[allowlists]] with targetRules): regexes against the secret, the
//     match or the line (regexTarget), matched as gitleaks does (a match
//     of the empty string does not count), stopwords against the
//     lower-cased secret, condition OR or AND;
//   - the generic rules give way: a finding of a rule whose id contains
//     "generic" is dropped when a non-generic rule found a secret
//     containing it on the same line.
//
// What is not, because it cannot apply to a string that has no path and
// no commit: path-only rules (pkcs12-file), rules whose path regexp does
// not match the empty path (freemius-secret-key: .php,
// hashicorp-tf-password: .tf, kubernetes-secret-yaml: .yaml,
// nuget-config-password: nuget.config), and the path and commit conditions
// of allowlists (an OR allowlist keeps its regexes and stopwords; an AND
// allowlist with a path or commit condition can never hold, so it is
// dropped). One thing is left out on purpose: gitleaks skips a finding
// whose line contains "gitleaks:allow"; a guard must not be switched off
// by the very text it guards, so Find ignores that marker.
package secretrules

import (
	_ "embed"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// GitleaksVersion is the gitleaks release whose config/gitleaks.toml is
// embedded.
const GitleaksVersion = "v8.30.1"

// rulesTOML is gitleaks' default configuration; see the package comment.
//
//go:embed gitleaks.toml
var rulesTOML string

// Finding is one secret found in a text.
type Finding struct {
	// RuleID is the gitleaks rule that found it (e.g. "github-pat").
	RuleID string
	// Start and End are the byte offsets of the secret in the text, for
	// redaction: text[Start:End] is what gitleaks reports as the secret
	// (its capture group when the rule has one, else the whole match; the
	// whole match too in the rare case that the group is empty).
	Start, End int
}

// Set is a compiled rule set. It is immutable once built and safe for
// concurrent use: Find only reads it, and Go's regexps may be used by
// several goroutines at once.
type Set struct {
	rules  []rule
	global []allowlist
	// prefilter finds the rules' keywords (lower-cased, de-duplicated;
	// rule.keywords index into them) in one pass over the text (or, built
	// without its matcher, one strings.Contains per keyword, 20 times
	// slower on 4 KB; see BenchmarkPrefilter).
	prefilter *Keywords
	// keywordless is set when a rule has no keywords: it runs on every
	// text (gitleaks' default set has none).
	keywordless bool
}

// rule is one content rule of the set.
type rule struct {
	id          string
	re          func() *regexp.Regexp // compiled on first use (parse checked it)
	secretGroup int
	entropy     float64
	generic     bool  // its id contains "generic": it gives way (see filter)
	keywords    []int // indexes into Set.keywords; empty: the rule always runs
	allowlists  []allowlist
}

// Where an allowlist's regexes look.
const (
	targetSecret = iota
	targetMatch
	targetLine
)

// allowlist is one allowlist reduced to what applies to text.
type allowlist struct {
	and       bool
	target    int
	re        *regexp.Regexp // the regexes joined with |, as gitleaks does; nil: none
	stopwords []string       // lower-cased
}

// shared is the default set, parsed once for the process.
var shared = sync.OnceValues(Load)

// Default returns the embedded rule set, parsed and compiled on the first
// call and shared by every caller after it (the Set is immutable, so
// sharing it is safe; besides the embedded file, this is the package's
// only package-level variable, and what it holds never changes once set). Use it so that every guard in a process
// evaluates one and the same rule set without paying for it twice.
func Default() (*Set, error) { return shared() }

// Load parses and compiles the embedded rule set. Every call builds a new
// Set; most callers want Default.
func Load() (*Set, error) { return parse(rulesTOML, true) }

// Len returns the number of rules the set evaluates.
func (s *Set) Len() int { return len(s.rules) }

// RuleIDs returns the ids of the rules the set evaluates, in file order.
func (s *Set) RuleIDs() []string {
	ids := make([]string, len(s.rules))
	for i := range s.rules {
		ids[i] = s.rules[i].id
	}
	return ids
}

// Find returns every secret the rules find in text, ordered by Start then
// RuleID. A rule that matches several times yields several findings.
func (s *Set) Find(text string) []Finding {
	if text == "" {
		return nil
	}
	// The marks of gitleaks' 241 keywords fit on the stack: a guard
	// checks every field of every write.
	var marks [256]bool
	present, found := s.prefilter.Present(strings.ToLower(text), marks[:0])
	if !found && !s.keywordless {
		return nil // no rule can match: most texts
	}
	var all []candidate
	var nl []int
	for i := range s.rules {
		r := &s.rules[i]
		if len(r.keywords) > 0 && !anyPresent(r.keywords, present) {
			continue
		}
		all = r.find(text, s.global, &nl, all)
	}
	return filter(all)
}

func anyPresent(idx []int, present []bool) bool {
	for _, i := range idx {
		if present[i] {
			return true
		}
	}
	return false
}

// candidate is a finding before the generic rules give way.
type candidate struct {
	Finding
	line    int    // gitleaks' StartLine of the match
	secret  string // what gitleaks calls the secret (may be empty)
	generic bool
}

// find appends r's findings in text to out. nl holds the text's newline
// offsets once computed (only the "line" allowlist target and the line
// number need them).
func (r *rule) find(text string, global []allowlist, nl *[]int, out []candidate) []candidate {
	re := r.re()
	for _, m := range re.FindAllStringIndex(text, -1) {
		// gitleaks trims '\n' from both ends of the match, and goes on
		// with [start, start+len(trimmed)) as the match's extent for line
		// numbers (its own quirk, kept: it only moves the line end).
		raw := text[m[0]:m[1]]
		match := strings.Trim(raw, "\n")
		ms := m[0] + len(raw) - len(strings.TrimLeft(raw, "\n")) // where match starts in text
		extent := [2]int{m[0], m[0] + len(match)}

		// The secret: re-run the regexp on the trimmed match, as gitleaks
		// does, and take secretGroup or the first non-empty group.
		secret, ss, se := match, ms, ms+len(match)
		if sub := re.FindStringSubmatchIndex(match); len(sub) >= 4 {
			if g := r.secretGroup; g > 0 {
				if sub[2*g] >= 0 {
					ss, se = ms+sub[2*g], ms+sub[2*g+1]
				} else {
					ss, se = ms, ms // the group did not take part: gitleaks' secret is ""
				}
				secret = text[ss:se]
			} else {
				for g := 1; 2*g+1 < len(sub); g++ {
					if sub[2*g] >= 0 && sub[2*g+1] > sub[2*g] {
						ss, se = ms+sub[2*g], ms+sub[2*g+1]
						secret = text[ss:se]
						break
					}
				}
			}
		}
		if r.entropy != 0 && shannonEntropy(secret) <= r.entropy {
			continue
		}
		f := finding{text: text, nl: nl, extent: extent, match: match, secret: secret}
		if f.allowedBy(global) || f.allowedBy(r.allowlists) {
			continue
		}
		c := candidate{Finding: Finding{RuleID: r.id, Start: ss, End: se}, secret: secret, generic: r.generic}
		if se == ss { // nothing to point at: redact the whole match
			c.Start, c.End = ms, ms+len(match)
		}
		c.line = f.location().line
		out = append(out, c)
	}
	return out
}

// finding is what the allowlists look at.
type finding struct {
	text          string
	nl            *[]int
	extent        [2]int
	match, secret string
}

// allowedBy reports whether one of the allowlists lets the finding pass.
func (f *finding) allowedBy(lists []allowlist) bool {
	for i := range lists {
		a := &lists[i]
		regexOK := false
		if a.re != nil {
			var target string
			switch a.target {
			case targetSecret:
				target = f.secret
			case targetMatch:
				target = f.match
			case targetLine:
				loc := f.location()
				target = f.text[loc.lineStart:loc.lineEnd]
			}
			// gitleaks' regexMatched: a match of the empty string does
			// not count, even if a later, longer one exists.
			regexOK = target != "" && a.re.FindString(target) != ""
		}
		stopOK := containsStopword(f.secret, a.stopwords)
		if a.and {
			if (a.re == nil || regexOK) && (len(a.stopwords) == 0 || stopOK) {
				return true
			}
		} else if regexOK || stopOK {
			return true
		}
	}
	return false
}

func containsStopword(secret string, stopwords []string) bool {
	if secret == "" || len(stopwords) == 0 {
		return false
	}
	lower := strings.ToLower(secret)
	for _, w := range stopwords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// loc is where gitleaks places a match: its line number and the line
// (lineStart:lineEnd), which gitleaks' location computes with quirks
// that the "line" allowlist target depends on and that are kept: the line
// starts AT the previous '\n' (not after it), and a match on the last line
// of a text with newlines and no final newline gets a line that starts at
// the beginning of the text.
type loc struct {
	line, lineStart, lineEnd int
}

// location ports detect/location.go of gitleaks v8.30.1 for a fragment
// that starts at line 0.
func (f *finding) location() loc {
	if *f.nl == nil {
		nl := []int{}
		for i := 0; i < len(f.text); i++ {
			if f.text[i] == '\n' {
				nl = append(nl, i)
			}
		}
		*f.nl = nl
	}
	newlines := *f.nl
	if len(newlines) == 0 {
		newlines = []int{len(f.text)}
	}
	start, end := f.extent[0], f.extent[1]
	var l loc
	prev, set, last := 0, false, 0
	for n, i := range newlines {
		last = n
		if prev <= start && start < i {
			set = true
			l.line, l.lineStart, l.lineEnd = n, prev, i
		}
		if prev < end && end <= i {
			l.lineEnd = i
		}
		prev = i
	}
	if !set {
		l.line = last + 1
		i := end
		for i < len(f.text) && f.text[i] != '\n' && f.text[i] != '\r' {
			i++
		}
		l.lineEnd = i
	}
	if end > l.lineEnd {
		l.lineEnd = end
	}
	return l
}

// shannonEntropy is gitleaks' entropy of a secret: over its runes, with
// frequencies taken against its length in bytes. The terms are summed in
// a fixed order (gitleaks sums in map order) so a verdict never depends on
// rounding order.
func shannonEntropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, c := range s {
		counts[c]++
	}
	ns := make([]int, 0, len(counts))
	for _, n := range counts {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	inv := 1.0 / float64(len(s))
	var e float64
	for _, n := range ns {
		freq := float64(n) * inv
		e -= freq * math.Log2(freq)
	}
	return e
}

// filter lets the generic rules give way, as gitleaks' detect.filter does:
// a generic finding is dropped when a finding of a non-generic rule on the
// same line has a secret that contains it. The rest is ordered by Start,
// then RuleID.
func filter(all []candidate) []Finding {
	var out []Finding
	for _, c := range all {
		keep := true
		if c.generic {
			for _, o := range all {
				if !o.generic && o.line == c.line && o.RuleID != c.RuleID && strings.Contains(o.secret, c.secret) {
					keep = false
					break
				}
			}
		}
		if keep {
			out = append(out, c.Finding)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		if out[i].RuleID != out[j].RuleID {
			return out[i].RuleID < out[j].RuleID
		}
		return out[i].End < out[j].End
	})
	return out
}
