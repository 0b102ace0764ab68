package guard

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// The secret corpus (testdata/secrets, see its README.md): credential
// shapes that must be refused in every placement, and ordinary engineering
// sentences that must be accepted in every placement. Values are built at
// test time from templates, so the files hold no credential a scanner (or
// a repository's push protection) would match.

// corpusAlphabets are the template classes: {class:n} is n characters of
// the class, drawn by fake with a seed from the line and the position.
var corpusAlphabets = map[string]string{
	"alnum": alnum, "lower": lower, "upper": upper, "letters": upper + lower, "digits": digits,
	"hex": hexLower, "HEX": "0123456789ABCDEF", "loweralnum": lowerAlnum, "upperalnum": upperAlnum,
	"base32": base32, "b64": b64, "b64url": b64url, "bech32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
	"tok": alnum + "-._", "sym": alnum + "!@#%^*-_+",
}

var corpusTemplateRe = regexp.MustCompile(`\{(alnum|lower|upper|letters|digits|hex|HEX|loweralnum|upperalnum|base32|b64|b64url|bech32|tok|sym):([0-9]+)\}|\{(uuid|jwt|jwt-unsigned)\}`)

// expandTemplate fills a corpus template. It returns the value and the
// random parts it drew (a refusal must not repeat any of them).
func expandTemplate(key, tmpl string) (string, []string) {
	h := fnv.New64a()
	h.Write([]byte(key))
	seed := h.Sum64()
	var parts []string
	i := uint64(0)
	out := corpusTemplateRe.ReplaceAllStringFunc(strings.ReplaceAll(tmpl, `\n`, "\n"), func(m string) string {
		i++
		sm := corpusTemplateRe.FindStringSubmatch(m)
		var v string
		switch {
		case sm[3] == "uuid":
			v = fake(seed+i, hexLower, 8) + "-" + fake(seed+i+100, hexLower, 4) + "-4" + fake(seed+i+200, hexLower, 3) +
				"-a" + fake(seed+i+300, hexLower, 3) + "-" + fake(seed+i+400, hexLower, 12)
		case sm[3] != "":
			v = jwtFake(seed+i, sm[3] == "jwt")
		default:
			n, _ := strconv.Atoi(sm[2])
			v = fake(seed+i, corpusAlphabets[sm[1]], n)
		}
		parts = append(parts, v)
		return v
	})
	return out, parts
}

// readCorpusLines returns the lines of a corpus file without comments and
// blank lines.
func readCorpusLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "secrets", name))
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

type corpusShape struct {
	name, value string
	parts       []string
}

func corpusShapes(tb testing.TB) []corpusShape {
	var out []corpusShape
	seen := map[string]bool{}
	for _, l := range readCorpusLines(tb, "shapes.tsv") {
		name, tmpl, ok := strings.Cut(l, "\t")
		if !ok || seen[name] {
			tb.Fatalf("shapes.tsv: bad or duplicate line %q", l)
		}
		seen[name] = true
		v, parts := expandTemplate(name, tmpl)
		out = append(out, corpusShape{name, v, parts})
	}
	return out
}

func corpusSentences(tb testing.TB) []string {
	var out []string
	for i, l := range readCorpusLines(tb, "ordinary.txt") {
		v, _ := expandTemplate("sentence "+strconv.Itoa(i), l)
		out = append(out, v)
	}
	return out
}

// credentialRule returns the rule a refusal names when it refuses a value
// as credential-shaped (SECRET_DETECTED, or INVALID_PUBLIC_STATUS for the
// public status), else "".
func credentialRule(e *capsule.Error) string {
	if e.Code != capsule.CodeSecretDetected && e.Code != capsule.CodeInvalidPublicStatus {
		return ""
	}
	_, after, ok := strings.Cut(e.Message, "looks like a credential (rule ")
	if !ok {
		return ""
	}
	rule, _, _ := strings.Cut(after, ")")
	return rule
}

// TestSecretCorpus runs every credential shape, alone and inside a
// sentence, through every placement (each free-text field of a checkpoint,
// the public status, a capsule and a signal) and requires a refusal naming
// the field and the rule, never the value; and every ordinary sentence
// through every placement, requiring none refused by a credential rule.
func TestSecretCorpus(t *testing.T) {
	g := testGuard(t)
	shapes, sentences, ps := corpusShapes(t), corpusSentences(t), placements()
	if len(shapes) < 60 || len(sentences) < 200 {
		t.Fatalf("corpus too small: %d shapes, %d sentences", len(shapes), len(sentences))
	}

	// The two halves run in parallel: under -race each takes seconds.
	t.Run("shapes", func(t *testing.T) {
		t.Parallel()
		runShapeCorpus(t, g, shapes, ps)
	})
	t.Run("sentences", func(t *testing.T) {
		t.Parallel()
		runSentenceCorpus(t, g, sentences, ps)
	})
}

// sentenceFormFields are the placements that also get each shape inside a
// sentence: one or two per code path (checkpoint fields, the stop path,
// which walks the raw body, the public status, the capsule, signals). The
// shape alone goes everywhere; finding it inside text is the rule's
// business, not the field's, and running it everywhere would make this
// test slow under -race.
var sentenceFormFields = map[string]bool{
	"focus": true, "decide.because": true, "stop.reason": true,
	"public_status.next_action": true, "public_status.reason": true,
	"goal": true, "receipts[0]": true, "reason": true,
}

// runShapeCorpus requires every shape refused in every placement.
func runShapeCorpus(t *testing.T, g *Guard, shapes []corpusShape, ps []placement) {
	var runs, bySecret, byLength, byOwnRule int
	missed := map[string][]string{}
	for _, sh := range shapes {
		for _, form := range []struct{ name, text string }{
			{"alone", sh.value},
			{"in a sentence", "while debugging the deploy I pasted " + sh.value + " into the notes, sorry"},
		} {
			// Automatic content is redacted rather than refused: the
			// same shapes must go, and what is left must pass.
			red := g.Redact(form.text)
			for _, part := range sh.parts {
				if len(part) >= 6 && strings.Contains(red, part) {
					t.Errorf("%s (%s): Redact left %q", sh.name, form.name, red)
				}
			}
			if g.secretRule(red) != "" {
				t.Errorf("%s (%s): Redact left something the guard refuses: %q", sh.name, form.name, red)
			}
			for _, p := range ps {
				if p.noSpace && strings.ContainsAny(form.text, " \t\n\r") {
					continue
				}
				if form.name != "alone" && !sentenceFormFields[p.field] {
					continue
				}
				runs++
				err := p.decode(g, p.body(form.text))
				if err == nil {
					missed[sh.name] = append(missed[sh.name], form.name+" in "+p.field)
					continue
				}
				e := asError(t, err)
				for _, part := range sh.parts {
					if len(part) >= 6 && strings.Contains(e.Error(), part) {
						t.Errorf("%s in %s: the refusal repeats the value: %v", sh.name, p.field, e)
					}
				}
				if e.Field != p.field {
					t.Errorf("%s (%s) in %s: refusal names %q: %v", sh.name, form.name, p.field, e.Field, e)
				}
				switch rule := credentialRule(e); {
				case rule != "":
					bySecret++
				case !p.fits(form.text) && e.Code == p.code:
					byLength++ // over the field's limit: refused before the secret guard looks
				case p.noSpace && e.Code == p.code:
					byOwnRule++ // a route template refuses the shape's characters first
				default:
					t.Errorf("%s (%s) in %s: refused, but not as a credential: %v", sh.name, form.name, p.field, e)
				}
			}
		}
	}
	names := make([]string, 0, len(missed))
	for n := range missed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("shape %q accepted in %d placements, e.g. %s", n, len(missed[n]), missed[n][0])
	}
	t.Logf("shapes: %d shapes x %d placements alone, and inside a sentence in %d of them: %d runs; %d refused (%d as a credential, %d by the field's length limit, %d by the route template), %d shapes accepted somewhere",
		len(shapes), len(ps), len(sentenceFormFields), runs, runs-countMissed(missed), bySecret, byLength, byOwnRule, len(missed))

}

// runSentenceCorpus requires no sentence refused by a credential rule;
// private fields refuse none at all.
func runSentenceCorpus(t *testing.T, g *Guard, sentences []string, ps []placement) {
	// Private fields refuse none at all. The public status has stricter rules of its own (links
	// outside the allowed domains, email addresses, 32+ hex and 40+ base64
	// runs); those refusals are listed, not counted as false positives.
	falsePos := map[string]string{}
	publicOnly := map[string]string{}
	for _, s := range sentences {
		for _, p := range ps {
			if !p.fits(s) || p.noSpace && strings.ContainsAny(s, " \t\n\r") {
				continue
			}
			err := p.decode(g, p.body(s))
			if err == nil {
				continue
			}
			e := asError(t, err)
			rule := credentialRule(e)
			if p.public && (rule == "" || strings.HasPrefix(rule, "public-")) {
				if _, ok := publicOnly[s]; !ok {
					publicOnly[s] = fmt.Sprintf("%s: %s", p.field, e.Message)
				}
				continue
			}
			if _, ok := falsePos[s]; !ok {
				falsePos[s] = fmt.Sprintf("%s: %v", p.field, e)
			}
		}
	}
	for s, why := range falsePos {
		t.Errorf("ordinary sentence refused: %q (%s)", s, why)
	}
	t.Logf("sentences: %d of %d refused by a credential rule in some placement", len(falsePos), len(sentences))
	pub := make([]string, 0, len(publicOnly))
	for s, why := range publicOnly {
		pub = append(pub, fmt.Sprintf("%q (%s)", s, why))
	}
	sort.Strings(pub)
	t.Logf("sentences: %d of %d refused only in the public status, by its own stricter rules:\n\t%s",
		len(pub), len(sentences), strings.Join(pub, "\n\t"))
}

func countMissed(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// TestCorpusTemplatesHoldNoCredential: the corpus files themselves, as
// stored, pass the guard: every credential in them is made at test time.
func TestCorpusTemplatesHoldNoCredential(t *testing.T) {
	g := testGuard(t)
	for _, name := range []string{"shapes.tsv", "ordinary.txt"} {
		for _, l := range readCorpusLines(t, name) {
			if _, tmpl, ok := strings.Cut(l, "\t"); ok && name == "shapes.tsv" {
				l = tmpl
			}
			if rule := g.secretRule(strings.ReplaceAll(l, `\n`, "\n")); rule != "" && !strings.Contains(l, "BEGIN") {
				t.Errorf("%s: %q is flagged as stored (rule %s)", name, l, rule)
			}
		}
	}
}
