package secretrules

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
)

// The file's shape: the keys gitleaks' ViperConfig reads. Decoding is
// strict, so a key this package does not know fails Load instead of being
// ignored.
type fileConfig struct {
	Title       string          `toml:"title"`
	Description string          `toml:"description"`
	MinVersion  string          `toml:"minVersion"`
	Extend      map[string]any  `toml:"extend"`
	AllowList   *fileAllowlist  `toml:"allowlist"` // gitleaks' older single form
	Allowlists  []fileAllowlist `toml:"allowlists"`
	Rules       []fileRule      `toml:"rules"`
}

type fileAllowlist struct {
	Description string   `toml:"description"`
	Condition   string   `toml:"condition"`
	Commits     []string `toml:"commits"`
	Paths       []string `toml:"paths"`
	RegexTarget string   `toml:"regexTarget"`
	Regexes     []string `toml:"regexes"`
	StopWords   []string `toml:"stopwords"`
	TargetRules []string `toml:"targetRules"` // global [[allowlists]] only
}

type fileRule struct {
	ID          string           `toml:"id"`
	Description string           `toml:"description"`
	Path        string           `toml:"path"`
	Regex       string           `toml:"regex"`
	SecretGroup int              `toml:"secretGroup"`
	Entropy     float64          `toml:"entropy"`
	Keywords    []string         `toml:"keywords"`
	Tags        []string         `toml:"tags"`
	AllowList   *fileAllowlist   `toml:"allowlist"` // gitleaks' older single form
	Allowlists  []fileAllowlist  `toml:"allowlists"`
	Required    []map[string]any `toml:"required"`
	SkipReport  bool             `toml:"skipReport"`
}

// parse decodes and compiles a gitleaks configuration. ac selects the
// Aho-Corasick keyword prefilter (Load's) over one strings.Contains per
// keyword, which costs 4 ms less to build but is 20 times slower on 4 KB
// of text (BenchmarkPrefilter, BenchmarkLoad); it is kept for those
// benchmarks.
func parse(src string, ac bool) (*Set, error) {
	var fc fileConfig
	dec := toml.NewDecoder(strings.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		var sme *toml.StrictMissingError
		if errors.As(err, &sme) {
			return nil, fmt.Errorf("secretrules: gitleaks.toml uses keys this package does not implement (update it, see the package comment):\n%s", sme.String())
		}
		return nil, fmt.Errorf("secretrules: gitleaks.toml: %w", err)
	}
	if len(fc.Extend) > 0 {
		return nil, errors.New("secretrules: gitleaks.toml: [extend] is not supported: the embedded file must be a whole rule set")
	}
	if fc.AllowList != nil {
		if len(fc.Allowlists) > 0 {
			return nil, errors.New("secretrules: gitleaks.toml: [allowlist] and [[allowlists]] cannot both be used")
		}
		fc.Allowlists = []fileAllowlist{*fc.AllowList}
	}

	s := &Set{}
	var keywords []string
	kwIndex := map[string]int{}
	byID := map[string]int{}
	for _, fr := range fc.Rules {
		r, keep, err := compileRule(fr)
		if err != nil {
			return nil, err
		}
		if _, dup := byID[fr.ID]; dup {
			return nil, fmt.Errorf("secretrules: rule %q: the id is used twice", fr.ID)
		}
		byID[fr.ID] = -1
		if !keep {
			continue
		}
		for _, k := range fr.Keywords {
			k = strings.ToLower(k)
			i, ok := kwIndex[k]
			if !ok {
				i = len(keywords)
				kwIndex[k] = i
				keywords = append(keywords, k)
			}
			r.keywords = append(r.keywords, i)
		}
		byID[fr.ID] = len(s.rules)
		s.rules = append(s.rules, r)
		s.keywordless = s.keywordless || len(r.keywords) == 0
	}

	// Global allowlists; those with targetRules join the named rules'.
	for n, fa := range fc.Allowlists {
		where := fmt.Sprintf("[[allowlists]] #%d", n+1)
		a, keep, err := compileAllowlist(fa, where)
		if err != nil {
			return nil, err
		}
		if len(fa.TargetRules) == 0 {
			if keep {
				s.global = append(s.global, a)
			}
			continue
		}
		for _, id := range fa.TargetRules {
			i, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("secretrules: %s: target rule %q does not exist", where, id)
			}
			if keep && i >= 0 {
				s.rules[i].allowlists = append(s.rules[i].allowlists, a)
			}
		}
	}
	if ac {
		s.prefilter = NewKeywords(keywords)
	} else {
		s.prefilter = &Keywords{keywords: keywords}
	}
	return s, nil
}

// compileRule compiles one rule. keep is false for a rule that cannot
// apply to text without a path (see the package comment).
func compileRule(fr fileRule) (r rule, keep bool, err error) {
	if strings.TrimSpace(fr.ID) == "" {
		return rule{}, false, fmt.Errorf("secretrules: a rule has no id (description %q)", fr.Description)
	}
	fail := func(format string, args ...any) (rule, bool, error) {
		return rule{}, false, fmt.Errorf("secretrules: rule %q: "+format, append([]any{fr.ID}, args...)...)
	}
	if len(fr.Required) > 0 {
		return fail("[[rules.required]] (composite rules) is not implemented")
	}
	if fr.SkipReport {
		return fail("skipReport is not implemented")
	}
	if fr.Regex == "" && fr.Path == "" {
		return fail("neither regex nor path is set")
	}
	if fr.AllowList != nil {
		if len(fr.Allowlists) > 0 {
			return fail("[rules.allowlist] and [[rules.allowlists]] cannot both be used")
		}
		fr.Allowlists = []fileAllowlist{*fr.AllowList}
	}
	r = rule{id: fr.ID, secretGroup: fr.SecretGroup, entropy: fr.Entropy, generic: strings.Contains(strings.ToLower(fr.ID), "generic")}
	keep = true
	if fr.Path != "" {
		p, err := regexp.Compile(fr.Path)
		if err != nil {
			return fail("path: %v", err)
		}
		// A text has the empty path: a path-only rule never reports on it,
		// and a rule with both applies only if its path matches "".
		keep = fr.Regex != "" && p.MatchString("")
	}
	if fr.Regex != "" {
		re, err := regexp.Compile(fr.Regex)
		if err != nil {
			return fail("regex: %v", err)
		}
		if fr.SecretGroup < 0 || fr.SecretGroup > re.NumSubexp() {
			return fail("secretGroup %d, but the regex has %d groups", fr.SecretGroup, re.NumSubexp())
		}
		// Checked here, kept compiled only once a text holds one of the
		// rule's keywords: most rules never run in a daemon's life, and
		// their compiled programs were most of its resting heap.
		pattern := fr.Regex
		r.re = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
	}
	for n, fa := range fr.Allowlists {
		if len(fa.TargetRules) > 0 {
			return fail("allowlist #%d: targetRules belongs in a global [[allowlists]]", n+1)
		}
		a, use, err := compileAllowlist(fa, fmt.Sprintf("rule %q: allowlist #%d", fr.ID, n+1))
		if err != nil {
			return rule{}, false, err
		}
		if use {
			r.allowlists = append(r.allowlists, a)
		}
	}
	return r, keep, nil
}

// compileAllowlist compiles one allowlist. keep is false for one that can
// never let a text's finding pass: an AND list with a path or commit
// condition, or an OR list of only paths and commits.
func compileAllowlist(fa fileAllowlist, where string) (a allowlist, keep bool, err error) {
	switch strings.ToUpper(fa.Condition) {
	case "AND", "&&":
		a.and = true
	case "", "OR", "||":
	default:
		return a, false, fmt.Errorf("secretrules: %s: condition %q (want AND or OR)", where, fa.Condition)
	}
	switch fa.RegexTarget {
	case "", "secret":
		a.target = targetSecret
	case "match":
		a.target = targetMatch
	case "line":
		a.target = targetLine
	default:
		return a, false, fmt.Errorf("secretrules: %s: regexTarget %q (want secret, match or line)", where, fa.RegexTarget)
	}
	if len(fa.Commits) == 0 && len(fa.Paths) == 0 && len(fa.Regexes) == 0 && len(fa.StopWords) == 0 {
		return a, false, fmt.Errorf("secretrules: %s: empty (no commits, paths, regexes or stopwords)", where)
	}
	for _, p := range fa.Paths {
		if _, err := regexp.Compile(p); err != nil {
			return a, false, fmt.Errorf("secretrules: %s: path: %v", where, err)
		}
	}
	if len(fa.Regexes) > 0 {
		for _, x := range fa.Regexes {
			if _, err := regexp.Compile(x); err != nil {
				return a, false, fmt.Errorf("secretrules: %s: regex: %v", where, err)
			}
		}
		// gitleaks joins them into one (?:a|b|…), whose leftmost-first
		// match then decides; joined the same way, the verdicts agree.
		if a.re, err = regexp.Compile("(?:" + strings.Join(fa.Regexes, "|") + ")"); err != nil {
			return a, false, fmt.Errorf("secretrules: %s: regexes joined: %v", where, err)
		}
	}
	seen := map[string]bool{}
	for _, w := range fa.StopWords {
		if w = strings.ToLower(w); !seen[w] {
			seen[w] = true
			a.stopwords = append(a.stopwords, w)
		}
	}
	if a.and {
		keep = len(fa.Commits) == 0 && len(fa.Paths) == 0
	} else {
		keep = a.re != nil || len(a.stopwords) > 0
	}
	return a, keep, nil
}
