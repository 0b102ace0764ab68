package secretrules

import (
	"bufio"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// The differential tests run gitleaks' own detector (the library, still in
// go.mod for this) and a Set over the same texts and require the same
// findings: the same rule ids, each with the same secret. The reference
// is gitleaks' own detect.NewDetectorDefaultConfig (default rules,
// MaxDecodeDepth 0, as continuityd used it), with IgnoreGitleaksAllow set,
// since Find ignores the "gitleaks:allow" marker on purpose (see
// TestGitleaksAllowMarkerIsIgnored). That constructor loads through
// viper's process-wide instance: harmless in this test binary, where
// nothing else uses viper and no test runs in parallel. gitleaks' logger is
// left alone (Info level; DetectString logs only at Trace).

// reference builds gitleaks' detector with its default rule set.
func reference(tb testing.TB) *detect.Detector {
	tb.Helper()
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		tb.Fatal(err)
	}
	d.IgnoreGitleaksAllow = true
	return d
}

// verdict is a sorted list of "rule id: secret".
type verdict []string

func (v verdict) rules() []string {
	var ids []string
	for _, f := range v {
		id, _, _ := strings.Cut(f, "\x00")
		if len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
	}
	return slices.Compact(ids)
}

func theirs(d *detect.Detector, text string) verdict {
	var v verdict
	for _, f := range d.DetectString(text) {
		secret := f.Secret
		if secret == "" {
			secret = f.Match
		}
		v = append(v, f.RuleID+"\x00"+secret)
	}
	slices.Sort(v)
	return v
}

func ours(s *Set, text string) verdict {
	var v verdict
	for _, f := range s.Find(text) {
		v = append(v, f.RuleID+"\x00"+text[f.Start:f.End])
	}
	slices.Sort(v)
	return v
}

// input is one text of a differential run.
type input struct {
	name, text string
	want       string // the rule that should flag it ("" none expected), for the tally
	tp         bool
}

// differential runs both detectors over inputs, reports every
// disagreement, and returns both verdicts per input for tallies.
func differential(t *testing.T, s *Set, d *detect.Detector, inputs []input) (agree, flagged int, th, ou []verdict) {
	t.Helper()
	for _, in := range inputs {
		a, b := theirs(d, in.text), ours(s, in.text)
		th, ou = append(th, a), append(ou, b)
		if slices.Equal(a.rules(), b.rules()) {
			agree++
			if !slices.Equal(a, b) {
				t.Errorf("%s: same rules %v, different secrets:\n gitleaks %q\n ours     %q\n text %q", in.name, a.rules(), a, b, in.text)
			}
		} else {
			t.Errorf("%s: gitleaks flags %v, ours %v\n text %q", in.name, a.rules(), b.rules(), in.text)
		}
		if len(a) > 0 {
			flagged++
		}
	}
	return agree, flagged, th, ou
}

// example is one line of testdata/gitleaks-examples.jsonl.gz.
type example struct {
	Rule string `json:"rule"`
	Kind string `json:"kind"`
	Path string `json:"path"`
	Text string `json:"text"`
}

func readExamples(tb testing.TB) []example {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "gitleaks-examples.jsonl.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.Contains(zr.Comment, GitleaksVersion) {
		tb.Fatalf("testdata/gitleaks-examples.jsonl.gz comes from %q, not gitleaks %s: run go run ./internal/secretrules/testdata/gen", zr.Comment, GitleaksVersion)
	}
	var out []example
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e example
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestEmbeddedFileIsTheLibrarysDefault pins the embedded rule file to the
// gitleaks release in go.mod, which the differential tests run.
func TestEmbeddedFileIsTheLibrarysDefault(t *testing.T) {
	if rulesTOML != config.DefaultConfig {
		t.Fatalf("gitleaks.toml is not config/gitleaks.toml of the gitleaks library in go.mod: copy that file (and set GitleaksVersion) or align go.mod to %s", GitleaksVersion)
	}
}

// TestDifferentialRuleExamples runs every true and false positive that
// gitleaks' generator checks its rules against.
func TestDifferentialRuleExamples(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	d := reference(t)
	exs := readExamples(t)
	if len(exs) < 5000 {
		t.Fatalf("only %d examples", len(exs))
	}
	var inputs []input
	rulesSeen := map[string]bool{}
	perRule := map[string]int{}
	for i, e := range exs {
		rulesSeen[e.Rule] = true
		if raceEnabled {
			// Under the race detector both engines run several times
			// slower (minutes for all 6,770): check the first few
			// examples of each rule and kind; a normal run checks all.
			if perRule[e.Rule+e.Kind]++; perRule[e.Rule+e.Kind] > 4 {
				continue
			}
		}
		inputs = append(inputs, input{name: fmt.Sprintf("%s %s #%d", e.Rule, e.Kind, i), text: e.Text, want: e.Rule, tp: e.Kind == "tp"})
	}
	agree, flagged, th, ou := differential(t, s, d, inputs)

	// The tally for the report: how many true positives each side flags
	// with the rule they were written for (path rules cannot: a text has
	// no path).
	var tps, ownTheirs, ownOurs int
	for i, in := range inputs {
		if !in.tp {
			continue
		}
		tps++
		if slices.Contains(th[i].rules(), in.want) {
			ownTheirs++
		}
		if slices.Contains(ou[i].rules(), in.want) {
			ownOurs++
		}
	}
	t.Logf("%d examples of %d rules: the same rule ids on %d (%d flagged by gitleaks); true positives flagged by their own rule: gitleaks %d/%d, ours %d/%d",
		len(inputs), len(rulesSeen), agree, flagged, ownTheirs, tps, ownOurs, tps)
}

// TestDifferentialCorpus runs continuityd's secret corpus (the guard
// package's testdata/secrets, read in place): every credential shape,
// alone and inside a sentence, and every ordinary sentence.
func TestDifferentialCorpus(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	d := reference(t)
	var inputs []input
	for _, l := range corpusLines(t, "shapes.tsv") {
		name, tmpl, ok := strings.Cut(l, "\t")
		if !ok {
			t.Fatalf("shapes.tsv: bad line %q", l)
		}
		v := expandTemplate(name, tmpl)
		inputs = append(inputs,
			input{name: "shape " + name, text: v},
			input{name: "shape " + name + " in a sentence", text: "while debugging the deploy I pasted " + v + " into the notes, sorry"})
	}
	nShapes := len(inputs)
	for i, l := range corpusLines(t, "ordinary.txt") {
		inputs = append(inputs, input{name: "sentence " + strconv.Itoa(i+1), text: expandTemplate("sentence "+strconv.Itoa(i), l)})
	}
	if nShapes < 120 || len(inputs)-nShapes < 200 {
		t.Fatalf("corpus too small: %d shape texts, %d sentences", nShapes, len(inputs)-nShapes)
	}
	agreeShapes, flaggedShapes, _, _ := differential(t, s, d, inputs[:nShapes])
	agreeSentences, flaggedSentences, _, _ := differential(t, s, d, inputs[nShapes:])
	t.Logf("shapes: %d texts, same rule ids on %d, gitleaks rules flag %d; sentences: %d, same on %d, flagged %d",
		nShapes, agreeShapes, flaggedShapes, len(inputs)-nShapes, agreeSentences, flaggedSentences)
}

// TestGitleaksAllowMarkerIsIgnored pins the one deliberate difference from
// gitleaks' detector: a "gitleaks:allow" on the line does not let a secret
// through a guard.
func TestGitleaksAllowMarkerIsIgnored(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	text := "ghp_" + fake(4, alnum, 36) + " # gitleaks:allow"
	if got := ours(s, text).rules(); !slices.Equal(got, []string{"github-pat"}) {
		t.Fatalf("Find with the marker: %v, want [github-pat]", got)
	}
	d := reference(t)
	d.IgnoreGitleaksAllow = false
	if got := theirs(d, text); len(got) != 0 {
		t.Fatalf("gitleaks' detector honours the marker no longer (it flags %v): drop this difference from the package comment", got.rules())
	}
}

// The corpus templates, filled exactly as the guard package's corpus
// test fills them (capsule/guard/corpus_test.go: the same seeds, alphabets and
// generator), so both tests see the same values.

const (
	upper      = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower      = "abcdefghijklmnopqrstuvwxyz"
	digits     = "0123456789"
	alnum      = upper + lower + digits
	lowerAlnum = lower + digits
	upperAlnum = upper + digits
	hexLower   = "0123456789abcdef"
	base32     = upper + "234567"
	b64        = alnum + "+/"
	b64url     = alnum + "-_"
)

var corpusAlphabets = map[string]string{
	"alnum": alnum, "lower": lower, "upper": upper, "letters": upper + lower, "digits": digits,
	"hex": hexLower, "HEX": "0123456789ABCDEF", "loweralnum": lowerAlnum, "upperalnum": upperAlnum,
	"base32": base32, "b64": b64, "b64url": b64url, "bech32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
	"tok": alnum + "-._", "sym": alnum + "!@#%^*-_+",
}

var corpusTemplateRe = regexp.MustCompile(`\{(alnum|lower|upper|letters|digits|hex|HEX|loweralnum|upperalnum|base32|b64|b64url|bech32|tok|sym):([0-9]+)\}|\{(uuid|jwt|jwt-unsigned)\}`)

func fake(seed uint64, alphabet string, n int) string {
	r := rand.New(rand.NewPCG(seed, 0x636f6e74696e7569))
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func jwtFake(seed uint64, signed bool) string {
	enc := base64.RawURLEncoding.EncodeToString
	head := enc([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body := enc([]byte(`{"sub":"` + fake(seed, lowerAlnum, 12) + `","iat":1754650000,"scope":"residency:write"}`))
	sig := ""
	if signed {
		sig = fake(seed+1, b64url, 43)
	}
	return head + "." + body + "." + sig
}

func expandTemplate(key, tmpl string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	seed := h.Sum64()
	i := uint64(0)
	return corpusTemplateRe.ReplaceAllStringFunc(strings.ReplaceAll(tmpl, `\n`, "\n"), func(m string) string {
		i++
		sm := corpusTemplateRe.FindStringSubmatch(m)
		switch {
		case sm[3] == "uuid":
			return fake(seed+i, hexLower, 8) + "-" + fake(seed+i+100, hexLower, 4) + "-4" + fake(seed+i+200, hexLower, 3) +
				"-a" + fake(seed+i+300, hexLower, 3) + "-" + fake(seed+i+400, hexLower, 12)
		case sm[3] != "":
			return jwtFake(seed+i, sm[3] == "jwt")
		default:
			n, _ := strconv.Atoi(sm[2])
			return fake(seed+i, corpusAlphabets[sm[1]], n)
		}
	})
}

func corpusLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("..", "..", "capsule", "guard", "testdata", "secrets", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}
