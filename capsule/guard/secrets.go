package guard

import (
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/lazyregexp"
	"github.com/continuityd/continuityd/internal/secretrules"
)

// The secret guard: gitleaks' maintained default rule set (about 220
// provider-specific rules, keyword-prefiltered with Aho-Corasick so most
// prose never reaches a regex) plus a short list of continuityd's own rules
// for shapes gitleaks misses or only recognises next to a keyword. The
// rule set is gitleaks' own config/gitleaks.toml, embedded and evaluated by
// internal/secretrules with Go's regexp, without the gitleaks library, and
// with no decoding passes (gitleaks' MaxDecodeDepth 0: base64-, hex- and
// percent-decoding every string and rescanning it would cost several times
// as much per write; the public status's own base64 rule covers encoded
// blobs where they matter most). gitleaks' "gitleaks:allow" marker is
// ignored: a secret cannot switch the guard off by saying so.
//
// What it deliberately does not flag (judgement calls, pinned by tests):
//   - git SHAs, short or full (40 hex), in receipts and commit subjects:
//     they are the evidence a capsule exists to carry. gitleaks only treats
//     40 hex as a secret next to the word "sourcegraph". The public status
//     is stricter (public_status.go refuses any 32+ hex run).
//   - uuids, docker image digests (sha256:<64 hex>), semver, ISO times,
//     URLs without credentials, base64 of short words: none is a
//     credential by shape, and refusing them would make receipts useless.
//   - bare high-entropy strings with no provider prefix and no keyword
//     (an AWS secret access key on its own, say): without context they
//     cannot be told from a hash or an id without refusing those too. They
//     are caught next to a keyword (aws_secret_access_key=…, token: …).

// Cost: the rule set finds the rules' keywords in one Aho-Corasick pass
// (about 4 µs per KB) and runs only the rules whose keywords occur; our own
// rules' trigger scans add about 15 µs per KB. Text with keywords ("key",
// "token", "secret", "auth", …) wakes gitleaks' generic-api-key rule, whose
// regexp costs about 0.3 ms per KB in Go's engine. That bounds a
// worst-case 64 KiB checkpoint at a few tens of milliseconds, which is
// acceptable for writes that happen at an agent's pace. See
// BenchmarkCheckSecret.

// minSecretLen is the shortest string any rule can flag; shorter strings
// skip the rules entirely (most enum-like fields).
const minSecretLen = 8

// secretRule is one of continuityd's own rules. A rule is anchored on a
// literal trigger (found with strings.Index, on an ASCII-lowercased copy
// when fold is set) and an anchored regexp run on the text right after
// each occurrence. This keeps the rules linear and cheap: unanchored
// regexps over a 4 KB note cost milliseconds in Go's regexp engine, while
// a trigger that does not occur costs one Index.
type secretRule struct {
	id       string
	triggers []string       // literals that start a candidate
	fold     bool           // match triggers case-insensitively
	boundary bool           // a trigger must not follow a letter, digit or _
	re       *regexp.Regexp // anchored (^…), run on the text after the trigger
	window   int            // bytes after the trigger re may see; 0 means ruleWindow
	// before, when set, finds where the secret starts given that the
	// trigger is at s[i:], for shapes whose distinctive part is in the
	// middle; it returns -1 to reject the candidate.
	before func(s string, i int) int
	// keep, when set, vets a candidate: value is the secret (capture group
	// 1 of re, else trigger plus match), next the byte after it (0 at end).
	keep func(value string, next byte) bool
	// keepAt, when set, vets a candidate that needs more context than
	// keep gives: s is the whole text, s[start:end] the secret.
	keepAt func(s string, start, end int) bool
}

// secretSpan is where a secret sits in a string, for Redact.
type secretSpan struct {
	rule       string
	start, end int
}

// ruleWindow bounds the text an anchored rule looks at after its trigger;
// no credential is longer, and the bound keeps each regexp run short.
const ruleWindow = 1024

// continuitydSecretRules are the supplements to gitleaks. Each one exists
// because gitleaks either has no rule for the shape or gates it behind a
// keyword or an exact length that real keys do not always meet.
func continuitydSecretRules() []secretRule {
	return []secretRule{
		{
			// OpenAI-style keys: sk-…, sk-proj-…, sk-svcacct-…, and
			// Anthropic's sk-ant-api03-…. gitleaks' openai rule needs the
			// T3BlbkFJ marker and its Anthropic rule an exact length of
			// 93+"AA"; keys of other vintages and truncated pastes slip by.
			id:       "continuityd-sk-key",
			triggers: []string{"sk-"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{20,}`),
			keep:     func(v string, _ byte) bool { return hasLetterAndDigit(v[len("sk-"):]) },
		},
		{
			// An Authorization header value pasted into prose: gitleaks
			// only catches it inside a curl command line.
			id:       "continuityd-bearer-token",
			triggers: []string{"bearer"},
			fold:     true,
			boundary: true,
			re:       regexp.MustCompile(`^[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
			keep:     func(v string, _ byte) bool { return hasLetterAndDigit(v) },
		},
		{
			// A private key header alone: gitleaks' private-key rule needs
			// the whole armoured block up to its END line, so a truncated
			// paste (or a JSON fragment of a service-account key) passes.
			// The match runs on over the base64 body that follows (real
			// line breaks or JSON's \n), so that Redact takes the key
			// material too and not only the header.
			id:       "continuityd-private-key",
			triggers: []string{"-----BEGIN"},
			re:       regexp.MustCompile(`^[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:(?:\s|\\[nr])*[A-Za-z0-9+/=]{16,})*`),
			window:   8192,
		},
		{
			// password=…, DB_PASSWORD: …, api_key := "…", "token": "…":
			// a credential-named key assigned a literal of at least 8
			// characters with letters and digits. gitleaks' generic rule
			// wants an entropy above 3.5, which real passwords often miss.
			// The key must END in the credential word (the regexp starts
			// right after it) so that tokenizer:, password_file: and
			// max_tokens= are left alone; values that are calls,
			// placeholders or variables are left alone too.
			id: "continuityd-credential-assignment",
			triggers: []string{
				"password", "passwd", "pwd", "passphrase", "secret", "token",
				"api_key", "api-key", "apikey", "access_key", "access-key", "accesskey",
				"secret_key", "secret-key", "secretkey", "private_key", "private-key", "privatekey",
			},
			fold: true,
			re:   regexp.MustCompile(`^[sS]?["']?[ \t]*(?::=|=>|=|:)[ \t]*["'` + "`" + `]?([^\s"'` + "`" + `,;&()<>{}\[\]$\\]{8,})`),
			keep: func(v string, next byte) bool {
				return next != '(' && hasLetterAndDigit(v) && !isPlaceholder(v) && !isPathOrLink(v)
			},
		},
		{
			// JSON Web Tokens, including unsigned ones (empty third part),
			// which gitleaks' jwt rule does not match.
			id:       "continuityd-jwt",
			triggers: []string{"eyJ"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*`),
		},
		{
			// A Telegram bot token (123456789:AA…): gitleaks only takes
			// it after the word "telegram". Digits, ":AA" and 33 token
			// characters is distinctive on its own.
			id:       "continuityd-telegram-bot-token",
			triggers: []string{":AA"},
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{33}`),
			window:   64,
			before:   func(s string, i int) int { return runStart(s, i, 8, 10, isDigitByte, nil) },
			keep:     func(_ string, next byte) bool { return !isTokenByte(next) },
		},
		{
			// A Discord bot token: base64 of the bot's numeric id (so it
			// starts with M, N or O), a 6-character timestamp and an HMAC,
			// dot-separated. gitleaks only takes Discord secrets after the
			// word "discord". The trigger is the first dot; the anchored
			// rule rejects ordinary dots at once.
			id:       "continuityd-discord-bot-token",
			triggers: []string{"."},
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}`),
			window:   64,
			before: func(s string, i int) int {
				return runStart(s, i, 23, 28, isTokenByte, func(c byte) bool { return c == 'M' || c == 'N' || c == 'O' })
			},
			keep: func(v string, next byte) bool { return !isTokenByte(next) && hasLetterAndDigit(v) },
		},
		{
			// A New Relic user API key: gitleaks only takes NRAK- after the
			// words "new relic"; the prefix is distinctive on its own.
			id:       "continuityd-newrelic-user-key",
			triggers: []string{"NRAK-"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Z0-9]{27}`),
			window:   64,
			keep:     func(_ string, next byte) bool { return !isTokenByte(next) },
		},
		{
			// A password in a URL's userinfo (postgres://app:s3cret@db,
			// redis://:pw@cache): gitleaks has no general rule for it. Any
			// password counts, letters only and short ones too, and the
			// user may be empty; only placeholders (<pw>, ${PW}, ****) and
			// an image reference pinned by digest (docker://alpine:3.19@
			// sha256:…, a tag and not a password) are left alone.
			id:       "continuityd-url-password",
			triggers: []string{"://"},
			re:       regexp.MustCompile(`^[^\s:/@]{0,64}:([^\s/@]+)@[^\s/@]`),
			keep:     func(v string, _ byte) bool { return !isPlaceholder(v) },
			keepAt: func(s string, _, end int) bool {
				host := s[end+1:]
				return !strings.HasPrefix(host, "sha256:") && !strings.HasPrefix(host, "sha512:")
			},
		},
		{
			// A Docker Hub personal or organisation access token: gitleaks
			// has no rule for it.
			id:       "continuityd-docker-hub-token",
			triggers: []string{"dckr_pat_", "dckr_oat_"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{20,}`),
			window:   128,
		},
		{
			// An Atlassian API token: gitleaks wants exactly 186
			// characters after ATATT3 followed by white space, a quote or
			// the end, so a token of another length or one ending a
			// sentence passes.
			id:       "continuityd-atlassian-api-token",
			triggers: []string{"ATATT3"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Za-z0-9_=-]{40,}`),
			window:   512,
		},
		{
			// Doppler tokens: personal (dp.pt.), service (dp.st., with an
			// optional config name), CLI (dp.ct.), service account
			// (dp.sa.), SCIM and audit. gitleaks knows only dp.pt.
			id:       "continuityd-doppler-token",
			triggers: []string{"dp."},
			boundary: true,
			re:       regexp.MustCompile(`^(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,64}\.)?[A-Za-z0-9]{40,}`),
			window:   256,
		},
		{
			// A Square OAuth application secret (sq0csp-) or an old access
			// token (sq0atb-): gitleaks knows only EAAA and sq0atp-.
			id:       "continuityd-square-secret",
			triggers: []string{"sq0csp-", "sq0atb-"},
			boundary: true,
			re:       regexp.MustCompile(`^[A-Za-z0-9_-]{22,}`),
			window:   128,
		},
		{
			// A Mailgun private API key (key- and 32 hex digits): gitleaks
			// only takes it after the word "mailgun". The shape is narrow
			// enough on its own; a cache key named key-<md5> would be
			// refused too, which is rare in notes and cheap to reword.
			id:       "continuityd-mailgun-key",
			triggers: []string{"key-"},
			boundary: true,
			re:       regexp.MustCompile(`^[a-f0-9]{32}`),
			window:   64,
			keep:     func(_ string, next byte) bool { return !isTokenByte(next) },
		},
		{
			// A password told in words or assigned: "the staging db
			// password is X", "password: X", "pwd=X", "passphrase was X".
			// Prose uses the same words all the time ("the password is
			// stored in vault", "password is required"), so X must look
			// like a credential rather than a word: see
			// looksLikePasswordValue. The credential-assignment rule above
			// already takes letters-and-digits values after = and :; this
			// one adds is/was and the values it leaves (digits only,
			// symbols, random mixed case, long letter runs).
			id:       "continuityd-password-phrase",
			triggers: []string{"password", "passwd", "passphrase", "passcode", "pwd"},
			fold:     true,
			re:       regexp.MustCompile(`^[sS]?["']?(?:[ \t]+(?:is|was|are|were)(?:[ \t]+(?:now|still|currently|just|set[ \t]+to|changed[ \t]+to))?[ \t]*:?|[ \t]*(?::=|=>|=|:))[ \t]*["'` + "`" + `]?([^\s"'` + "`" + `]{1,200})`),
			keep:     func(v string, _ byte) bool { return looksLikePasswordValue(v) },
		},
	}
}

// ownSecretRules are continuityd's own rules, compiled on first use (not
// at package initialisation, which every hook process pays) and never
// changed: every Guard and RedactCredentialShapes share them.
var ownSecretRules = sync.OnceValue(continuitydSecretRules)

// RedactCredentialShapes replaces with marker every span the secret guard's
// rules find in s: gitleaks' rule set (the one secretrules.Default every
// Guard holds) and continuityd's own rules. They need no Guard, so code
// without one (an upstream's error text, say) redacts with the very rules
// the guard refuses with, instead of keeping a copy of its own. If the
// rule set cannot be loaded (it is embedded, so only a broken build gets
// there) the whole string is replaced: redaction fails closed.
func RedactCredentialShapes(s, marker string) string {
	if len(s) < minSecretLen {
		return s
	}
	set, err := secretrules.Default()
	if err != nil {
		return marker
	}
	spans := credentialSpans(set, ownSecretRules(), s)
	if len(spans) == 0 {
		return s
	}
	return replaceSpansWith(s, spans, marker)
}

// looksLikePasswordValue tells a password from the word that follows
// "password is" in ordinary prose. Trailing punctuation is not part of it.
// It is a credential when it is six characters or more and not a
// placeholder, a path or a link, and: all digits; or letters and digits
// (but not a hyphenated phrase such as base64-encoded or 1Password-managed);
// or letters with a symbol that does not join words (p@ss!); or letters
// only but random-looking (case flipping at least four times, gHtRkWpq) or
// a passphrase run of 24 or more.
func looksLikePasswordValue(v string) bool {
	v = strings.TrimRight(v, ".,;:!?)]}'\"")
	if len(v) < 6 || isPlaceholder(v) {
		return false
	}
	if isPathOrLink(v) {
		return false
	}
	if technicalWords[strings.ToLower(v)] || nameNumberRe.MatchString(v) {
		return false // argon2id, base64, 1Password; AES-256, ISO-8601, OPS-1234
	}
	m := classMask(v)
	switch {
	case m == classDigit:
		return true
	case m&(classDigit|classOther) == 0:
		return len(v) >= 24 || len(v) >= 8 && caseFlips(v) >= 4
	case isHyphenatedPhrase(v):
		return false
	case hasLetterAndDigit(v):
		return true
	}
	// Letters and a symbol that does not join words (p@ss!word), not at
	// the start, where it is syntax (a YAML tag: password: !vault).
	return m&(classLower|classUpper) != 0 && strings.ContainsAny(v[1:], "!@#$%^&*+=~|?<>")
}

// technicalWords are words with digits that prose puts after "password
// is": the way it is hashed, encoded or kept.
var technicalWords = map[string]bool{
	"argon2": true, "argon2i": true, "argon2d": true, "argon2id": true, "pbkdf2": true,
	"sha1": true, "sha224": true, "sha256": true, "sha384": true, "sha512": true,
	"base32": true, "base64": true, "base64url": true, "aes128": true, "aes256": true,
	"rot13": true, "utf8": true, "x509": true, "ed25519": true, "rsa2048": true,
	"rsa4096": true, "1password": true,
}

// nameNumberRe is a name and a number joined by a hyphen: a standard, an
// algorithm or a ticket (AES-256, ISO-8601, OPS-1234), not a password.
var nameNumberRe = lazyregexp.New(`^[A-Za-z]{1,8}-[0-9]{1,5}$`)

// isPathOrLink reports a value that is a file path (PWD=/home/agent/work2,
// pwd: ./build-2) or a link to where a secret is kept, not a secret.
func isPathOrLink(v string) bool {
	for _, p := range []string{"/", "~/", "./", "../"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return strings.Contains(v, "://")
}

// caseFlips counts the places where a letter's case differs from the
// letter before it: random letters flip often, words and CamelCase
// (PostgreSQL: 2, JavaScript: 3) seldom.
func caseFlips(v string) int {
	n := 0
	for i := 1; i < len(v); i++ {
		if isUpperByte(v[i]) != isUpperByte(v[i-1]) {
			n++
		}
	}
	return n
}

func isUpperByte(c byte) bool { return c >= 'A' && c <= 'Z' }

// phraseEndings are the last words of hyphenated adjectives that prose
// puts after "password is": base64-encoded, 12-characters-long, ….
var phraseEndings = map[string]bool{
	"based": true, "only": true, "safe": true, "free": true, "less": true, "like": true,
	"long": true, "wide": true, "level": true, "side": true, "byte": true, "bytes": true,
	"bit": true, "bits": true, "char": true, "chars": true, "character": true,
	"characters": true, "digit": true, "digits": true, "length": true, "aware": true,
	"specific": true, "bound": true, "style": true, "time": true, "first": true,
}

// isHyphenatedPhrase reports a hyphenated adjective (base64-encoded,
// 1Password-managed, 32-byte): its last part is a lower-case word that
// ends in -ed or -ing or is a common adjective ending.
func isHyphenatedPhrase(v string) bool {
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return false
	}
	last := v[i+1:]
	if len(last) < 2 || classMask(last) != classLower {
		return false
	}
	return strings.HasSuffix(last, "ed") || strings.HasSuffix(last, "ing") || phraseEndings[last]
}

// CheckSecret refuses a credential-shaped value: it returns a 400
// SECRET_DETECTED naming field and the rule that matched, or nil. The
// message never contains the value.
func (g *Guard) CheckSecret(field, value string) error {
	if rule := g.secretRule(value); rule != "" {
		return secretRefusal(field, rule)
	}
	return nil
}

// SecretRule returns the id of the first rule that finds a credential in
// text, or "": for callers that check more than a field (the files of a
// work snapshot before it leaves the machine).
func (g *Guard) SecretRule(text string) string { return g.secretRule(text) }

// checkSecret is CheckSecret with a typed result, for internal callers.
func (g *Guard) checkSecret(field, value string) *capsule.Error {
	if rule := g.secretRule(value); rule != "" {
		return secretRefusal(field, rule)
	}
	return nil
}

func secretRefusal(field, rule string) *capsule.Error {
	return capsule.Refuse(capsule.CodeSecretDetected, field,
		"looks like a credential (rule %s); the write was refused and nothing was stored", rule)
}

// secretRule returns the id of the first rule that flags s, or "".
func (g *Guard) secretRule(s string) string {
	if len(s) < minSecretLen {
		return ""
	}
	if fs := g.rules.Find(s); len(fs) > 0 {
		ids := make([]string, 0, len(fs))
		for _, f := range fs {
			ids = append(ids, f.RuleID)
		}
		// Deterministic when several rules match, and a provider's own
		// rule names the problem better than generic-api-key does.
		sort.Slice(ids, func(i, j int) bool {
			gi, gj := strings.HasPrefix(ids[i], "generic"), strings.HasPrefix(ids[j], "generic")
			if gi != gj {
				return gj
			}
			return ids[i] < ids[j]
		})
		return ids[0]
	}
	return g.extraRule(s)
}

// extraRule returns the id of the first of continuityd's own rules that
// flags s, or "".
func (g *Guard) extraRule(s string) string {
	lower := asciiLower(s)
	var buf [64]bool
	marks, found := g.extraIndex.triggers.Present(lower, buf[:0])
	if !found {
		return "" // most texts: no rule's trigger is in them
	}
	for i := range g.extraRules {
		if !g.extraIndex.mayMatch(i, marks) {
			continue
		}
		if sp := g.extraRules[i].find(s, lower, 1); len(sp) > 0 {
			return sp[0].rule
		}
	}
	return ""
}

// triggerIndex tells, in one pass over a text, which rules of a list may
// match it: those with a trigger in it (lower-cased, which a trigger
// matched case-sensitively is too). A rule's candidates all start at a
// trigger, so the others need not run.
type triggerIndex struct {
	triggers *secretrules.Keywords
	of       [][]int // a rule's triggers, as indexes into triggers
}

func newTriggerIndex(rules []secretRule) *triggerIndex {
	x := &triggerIndex{of: make([][]int, len(rules))}
	var lowered []string
	index := map[string]int{}
	for i, r := range rules {
		for _, t := range r.triggers {
			t = asciiLower(t)
			j, ok := index[t]
			if !ok {
				j = len(lowered)
				index[t] = j
				lowered = append(lowered, t)
			}
			x.of[i] = append(x.of[i], j)
		}
	}
	x.triggers = secretrules.NewKeywords(lowered)
	return x
}

// mayMatch reports whether rule i has a trigger among marks.
func (x *triggerIndex) mayMatch(i int, marks []bool) bool {
	for _, j := range x.of[i] {
		if marks[j] {
			return true
		}
	}
	return false
}

// find returns up to max spans of rule r in s (max <= 0: all). lower is s
// lower-cased byte for byte (asciiLower), for folding rules.
func (r *secretRule) find(s, lower string, max int) []secretSpan {
	hay := s
	if r.fold {
		hay = lower
	}
	var out []secretSpan
	for _, trig := range r.triggers {
		for off := 0; off < len(hay); {
			i := strings.Index(hay[off:], trig)
			if i < 0 {
				break
			}
			i += off
			off = i + len(trig)
			if r.boundary && i > 0 && isWordByte(s[i-1]) {
				continue
			}
			base, width := i+len(trig), r.window
			if width == 0 {
				width = ruleWindow
			}
			m := r.re.FindStringSubmatchIndex(s[base:min(len(s), base+width)])
			if m == nil {
				continue
			}
			start, end := i, base+m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = base+m[2], base+m[3]
			}
			if r.before != nil {
				if start = r.before(s, i); start < 0 {
					continue
				}
			}
			if r.keep != nil {
				var next byte
				if end < len(s) {
					next = s[end]
				}
				if !r.keep(s[start:end], next) {
					continue
				}
			}
			if r.keepAt != nil && !r.keepAt(s, start, end) {
				continue
			}
			out = append(out, secretSpan{rule: r.id, start: start, end: end})
			if max > 0 && len(out) >= max {
				return out
			}
		}
	}
	return out
}

// asciiLower lower-cases ASCII letters only, so byte offsets into the
// result are offsets into s (strings.ToLower may change lengths).
func asciiLower(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' }) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// runStart returns where the run of bytes satisfying in that ends at s[i]
// starts, if the run is min..max long, starts with a byte satisfying first
// (when set) and does not follow a word byte; else -1.
func runStart(s string, i, min, max int, in, first func(byte) bool) int {
	j := i
	for j > 0 && i-j < max+1 && in(s[j-1]) {
		j--
	}
	n := i - j
	if n < min || n > max || j > 0 && (isWordByte(s[j-1]) || in(s[j-1])) {
		return -1
	}
	if first != nil && !first(s[j]) {
		return -1
	}
	return j
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// isTokenByte reports a base64url character, the alphabet of most tokens.
func isTokenByte(c byte) bool { return isWordByte(c) || c == '-' }

// isWordByte reports an ASCII letter, digit or underscore.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// redacted replaces a credential-shaped span.
const redacted = "[REDACTED]"

// Redact replaces every credential-shaped span of s with "[REDACTED]". It is
// for automatic content (commit subjects, file names, transcript lines)
// that is kept rather than refused. Invisible formatting characters
// (isInvisible), which an explicit write is refused for, are removed
// first, so none is kept and none hides a credential by splitting it. If a
// replacement leaves anything the guard still flags, the whole string is
// replaced.
func (g *Guard) Redact(s string) string {
	s = stripInvisible(s)
	for range 3 {
		spans := g.secretSpans(s)
		if len(spans) == 0 {
			return s
		}
		s = replaceSpans(s, spans)
	}
	if g.secretRule(s) != "" {
		return redacted
	}
	return s
}

// secretSpans finds every secret in s, from both rule sets.
func (g *Guard) secretSpans(s string) []secretSpan {
	return credentialSpans(g.rules, g.extraRules, s)
}

// credentialSpans finds every secret in s that gitleaks' rule set (set)
// and continuityd's own rules (own) find, at the offsets the rules report.
func credentialSpans(set *secretrules.Set, own []secretRule, s string) []secretSpan {
	if len(s) < minSecretLen {
		return nil
	}
	var spans []secretSpan
	lower := asciiLower(s)
	for i := range own {
		spans = append(spans, own[i].find(s, lower, 0)...)
	}
	for _, f := range set.Find(s) {
		spans = append(spans, secretSpan{rule: f.RuleID, start: f.Start, end: f.End})
	}
	return spans
}

// replaceSpans replaces the union of spans with the redaction marker.
func replaceSpans(s string, spans []secretSpan) string { return replaceSpansWith(s, spans, redacted) }

// replaceSpansWith replaces the union of spans with marker.
func replaceSpansWith(s string, spans []secretSpan, marker string) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	pos := 0
	for _, sp := range spans {
		if sp.end <= pos {
			continue
		}
		if sp.start >= pos {
			b.WriteString(s[pos:sp.start])
			b.WriteString(marker)
		} // else it overlaps the span just redacted, which grows to cover it
		pos = sp.end
	}
	b.WriteString(s[pos:])
	return b.String()
}

// Character classes, for "mixed classes" tests.
const (
	classLower = 1 << iota
	classUpper
	classDigit
	classOther
)

// classMask returns which character classes s uses.
func classMask(s string) int {
	m := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			m |= classLower
		case c >= 'A' && c <= 'Z':
			m |= classUpper
		case c >= '0' && c <= '9':
			m |= classDigit
		default:
			m |= classOther
		}
	}
	return m
}

// classes counts the character classes s uses (lower, upper, digit, other).
func classes(s string) int {
	m := classMask(s)
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// hasLetterAndDigit reports whether s mixes letters and digits, the mark of
// a generated token as opposed to a word or a number.
func hasLetterAndDigit(s string) bool {
	m := classMask(s)
	return m&classDigit != 0 && m&(classLower|classUpper) != 0
}

// isPlaceholder reports values that stand for a secret rather than being
// one: template variables, masks and the usual documentation stand-ins.
func isPlaceholder(v string) bool {
	switch v[0] {
	case '%', '<', '{', '$', '#':
		return true
	case '*':
		// A mask (****, ***1234), not a password that starts with a star.
		return strings.HasPrefix(v, "**") || strings.Count(v, "*")*2 >= len(v)
	}
	if strings.Trim(v, string(v[0])) == "" { // one character repeated
		return true
	}
	lv := strings.ToLower(v)
	for _, p := range []string{"xxxx", "changeme", "example", "placeholder", "redacted", "your_", "your-"} {
		if strings.Contains(lv, p) {
			return true
		}
	}
	return false
}
