package secretrules

import (
	"strings"
	"sync"
	"testing"
)

// TestDefaultIsSharedAndConcurrent: Default parses once and hands every
// caller the same Set, which goroutines may use at once (run with -race).
func TestDefaultIsSharedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	sets := make([]*Set, 4)
	for i := range sets {
		wg.Go(func() {
			s, err := Default()
			if err != nil {
				t.Error(err)
				return
			}
			sets[i] = s
			text := "note: ghp_" + fake(uint64(900+i), alnum, 36) + " and password=" + fake(uint64(950+i), alnum, 16)
			for range 20 {
				if fs := s.Find(text); len(fs) == 0 || fs[0].RuleID != "github-pat" {
					t.Errorf("Find: %v", fs)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range sets[1:] {
		if s != sets[0] {
			t.Fatal("Default returned different sets")
		}
	}
	if n := sets[0].Len(); n != 217 {
		t.Fatalf("%d rules evaluated; gitleaks %s has 222, of which 5 apply to paths only", n, GitleaksVersion)
	}
}

// TestFindOffsets: Start and End delimit the secret (the capture group),
// not the whole match, so a redaction keeps the key name.
func TestFindOffsets(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tok := "ghp_" + fake(4, alnum, 36)
	text := "line one\nexport GITHUB_TOKEN=" + tok + "\n"
	fs := s.Find(text)
	if len(fs) != 1 || fs[0].RuleID != "github-pat" || text[fs[0].Start:fs[0].End] != tok {
		t.Fatalf("Find(%q) = %v", text, fs)
	}
	if got := s.Find(""); got != nil {
		t.Fatalf("Find(\"\") = %v", got)
	}
}

// TestLoadRefusesWhatItDoesNotImplement: a rule file that uses a gitleaks
// feature this package does not evaluate fails to load, naming the rule
// and the key, instead of being evaluated partly.
func TestLoadRefusesWhatItDoesNotImplement(t *testing.T) {
	const rule = "[[rules]]\nid = \"r1\"\nregex = '''abc(d+)'''\nkeywords = [\"abc\"]\n"
	for _, tc := range []struct{ name, src, want string }{
		{"unknown key", rule + "newFeature = true\n", "newFeature"},
		{"composite rule", rule + "[[rules.required]]\nid = \"r1\"\n", `rule "r1": [[rules.required]]`},
		{"skipReport", rule + "skipReport = true\n", `rule "r1": skipReport`},
		{"extend", "[extend]\nuseDefault = true\n" + rule, "[extend]"},
		{"secret group", strings.Replace(rule, "id = \"r1\"", "id = \"r1\"\nsecretGroup = 2", 1), "secretGroup 2"},
		{"bad regex", strings.Replace(rule, "abc(d+)", "abc(", 1), `rule "r1": regex`},
		{"duplicate id", rule + rule, "used twice"},
		{"bad condition", rule + "[[rules.allowlists]]\ncondition = \"XOR\"\nregexes = ['''x''']\n", `condition "XOR"`},
		{"bad target", rule + "[[rules.allowlists]]\nregexTarget = \"file\"\nregexes = ['''x''']\n", `regexTarget "file"`},
		{"empty allowlist", rule + "[[rules.allowlists]]\ndescription = \"nothing\"\n", "empty"},
		{"unknown target rule", rule + "[[allowlists]]\ntargetRules = [\"nope\"]\nregexes = ['''x''']\n", `target rule "nope"`},
	} {
		_, err := parse(tc.src, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := parse(rule, true); err != nil {
		t.Fatalf("the plain rule: %v", err)
	}
}

// TestAllowlistSemantics pins what applies to text without a path: an AND
// allowlist with a path condition never lets a finding pass, an OR one
// keeps its regexes; a path rule that cannot match the empty path is
// skipped; targetRules attach a global allowlist to one rule.
func TestAllowlistSemantics(t *testing.T) {
	src := `
[[rules]]
id = "r-and"
regex = '''andkey=(\w{6,})'''
[[rules.allowlists]]
condition = "AND"
paths = ['''\.md$''']
regexes = ['''^test''']

[[rules]]
id = "r-or"
regex = '''orkey=(\w{6,})'''
[[rules.allowlists]]
paths = ['''\.md$''']
regexes = ['''^test''']

[[rules]]
id = "r-path"
regex = '''pathkey=(\w{6,})'''
path = '''\.php$'''

[[rules]]
id = "r-target"
regex = '''tkey=(\w{6,})'''

[[allowlists]]
targetRules = ["r-target"]
stopwords = ["sample"]
`
	s, err := parse(src, true)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"andkey=test123":     "r-and",
		"orkey=test123":      "",
		"orkey=live123":      "r-or",
		"pathkey=abcdef1":    "",
		"tkey=mysample1":     "",
		"tkey=realvalue1":    "r-target",
		"andkey=prod123 x y": "r-and",
	} {
		fs := s.Find(text)
		got := ""
		if len(fs) > 0 {
			got = fs[0].RuleID
		}
		if got != want {
			t.Errorf("Find(%q) = %v, want %q", text, fs, want)
		}
	}
	if s.Len() != 3 {
		t.Fatalf("%d rules, want 3 (the path rule skipped)", s.Len())
	}
}
