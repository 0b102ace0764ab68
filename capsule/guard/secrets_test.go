package guard

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// credentialCase is one credential shape. value is the smallest string
// that carries the credential: for shapes gitleaks (or we) only recognise
// next to a keyword, the keyword is part of it (MAILGUN_API_KEY=key-…).
type credentialCase struct {
	name  string
	value string
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

func credentialCases() []credentialCase {
	return []credentialCase{
		{"aws access key id", "AKIA" + fake(1, base32, 16)},
		{"aws temporary access key id", "ASIA" + fake(2, base32, 16)},
		{"aws secret access key", "aws_secret_access_key = " + fake(3, b64, 40)},
		{"github classic pat", "ghp_" + fake(4, alnum, 36)},
		{"github oauth token", "gho_" + fake(5, alnum, 36)},
		{"github app server token", "ghs_" + fake(6, alnum, 36)},
		{"github app user token", "ghu_" + fake(7, alnum, 36)},
		{"github refresh token", "ghr_" + fake(8, alnum, 36)},
		{"github fine-grained pat", "github_pat_" + fake(9, alnum, 22) + "_" + fake(10, alnum, 59)},
		{"gitlab pat", "glpat-" + fake(11, alnum+"-_", 20)},
		{"gitlab pipeline trigger token", "glptt-" + fake(12, hexLower, 40)},
		{"gitlab deploy token", "gldt-" + fake(13, alnum, 20)},
		{"slack bot token", "xoxb-" + fake(14, digits, 12) + "-" + fake(15, digits, 12) + "-" + fake(16, alnum, 24)},
		{"slack user token", "xoxp-" + fake(17, digits, 12) + "-" + fake(18, digits, 12) + "-" + fake(19, digits, 13) + "-" + fake(20, hexLower, 32)},
		{"slack app token", "xapp-1-A" + fake(21, upperAlnum, 10) + "-" + fake(22, digits, 13) + "-" + fake(23, hexLower, 64)},
		{"slack webhook url", "https://hooks.slack.com/services/T" + fake(24, upperAlnum, 8) + "/B" + fake(25, upperAlnum, 8) + "/" + fake(26, alnum, 24)},
		{"stripe live secret key", "sk_live_" + fake(27, alnum, 24)},
		{"stripe restricted key", "rk_live_" + fake(28, alnum, 24)},
		{"google api key", "AIza" + fake(29, alnum+"-_", 35)},
		{"gcp service account key json", `"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC` + fake(30, b64, 40)},
		{"openai project key", "sk-proj-" + fake(31, b64url, 74) + "T3BlbkFJ" + fake(32, b64url, 74)},
		{"openai legacy key", "sk-" + fake(33, alnum, 48)},
		{"anthropic api key", "sk-ant-api03-" + fake(34, b64url, 93) + "AA"},
		{"npm token", "npm_" + fake(35, lowerAlnum, 36)},
		{"pypi upload token", "pypi-AgEIcHlwaS5vcmc" + fake(36, b64url, 70)},
		{"twilio api key", "SK" + fake(37, hexLower, 32)},
		{"sendgrid api key", "SG." + fake(38, b64url, 22) + "." + fake(39, b64url, 43)},
		{"mailgun private key", "MAILGUN_API_KEY=key-" + fake(40, hexLower, 32)},
		{"heroku api key", "HEROKU_API_KEY=" + fake(41, hexLower, 8) + "-" + fake(42, hexLower, 4) + "-" + fake(43, hexLower, 4) + "-" + fake(44, hexLower, 4) + "-" + fake(45, hexLower, 12)},
		{"heroku api key v2", "HRKU-AA" + fake(46, alnum, 58)},
		{"digitalocean pat", "dop_v1_" + fake(47, hexLower, 64)},
		{"shopify access token", "shpat_" + fake(48, hexLower, 32)},
		{"shopify shared secret", "shpss_" + fake(49, hexLower, 32)},
		{"square access token", "EAAA" + fake(50, alnum, 60)},
		{"square oauth token", "sq0atp-" + fake(51, alnum, 22)},
		{"discord bot token", "MT" + fake(52, alnum, 24) + "." + fake(53, b64url, 6) + "." + fake(54, b64url, 38)},
		{"discord bot token assigned", "DISCORD_BOT_TOKEN=" + fake(150, b64url, 24) + "." + fake(151, b64url, 6) + "." + fake(152, b64url, 38)},
		{"telegram bot token", fake(55, digits, 10) + ":AA" + fake(56, b64url, 33)},
		{"telegram bot token assigned", "TELEGRAM_BOT_TOKEN=" + fake(153, digits, 9) + ":AA" + fake(154, b64url, 33)},
		{"atlassian api token", "ATATT3" + fake(57, alnum, 186)},
		{"azure storage account key", "DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey=" + fake(58, b64, 86) + "==;EndpointSuffix=core.windows.net"},
		{"hashicorp vault token", "hvs." + fake(59, alnum, 91)},
		{"doppler token", "dp.pt." + fake(60, alnum, 43)},
		{"databricks token", "dapi" + fake(61, hexLower, 32)},
		{"linear api key", "lin_api_" + fake(62, alnum, 40)},
		{"postman api key", "PMAK-" + fake(63, hexLower, 24) + "-" + fake(64, hexLower, 34)},
		{"grafana cloud token", "glc_" + fake(65, b64, 48)},
		{"grafana service account token", "glsa_" + fake(66, alnum, 32) + "_" + fake(67, hexLower, 8)},
		{"new relic user key", "NRAK-" + fake(68, upperAlnum, 27)},
		{"new relic user key assigned", "NEW_RELIC_API_KEY=NRAK-" + fake(155, upperAlnum, 27)},
		{"sentry user token", "sntryu_" + fake(69, hexLower, 64)},
		{"hugging face token", "hf_" + fake(70, upper+lower, 34)},
		{"alibaba access key id", "LTAI" + fake(71, alnum, 20)},
		{"age secret key", "AGE-SECRET-KEY-1" + fake(72, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)},
		{"pulumi token", "pul-" + fake(73, hexLower, 40)},
		{"dynatrace token", "dt0c01." + fake(74, upperAlnum, 24) + "." + fake(75, upperAlnum, 64)},
		{"perplexity key", "pplx-" + fake(76, alnum, 48)},
		{"rubygems key", "rubygems_" + fake(77, hexLower, 48)},
		{"notion token", "ntn_" + fake(78, digits, 11) + fake(79, alnum, 35)},
		{"jwt signed", jwtFake(80, true)},
		{"jwt unsigned", jwtFake(81, false)},
		{"pem rsa private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + fake(82, b64, 60)},
		{"pem ec private key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI" + fake(83, b64, 40)},
		{"pem openssh private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + fake(84, b64, 40)},
		{"pgp private key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----"},
		{"bearer header", "Authorization: Bearer " + fake(85, alnum+"-._", 40)},
		{"password assignment", "DB_PASSWORD=" + fake(86, alnum+"!@#%^*-_+", 16)},
		{"json api key field", `"api_key": "` + fake(87, alnum, 32) + `"`},
		{"go token literal", `token := "` + fake(88, lowerAlnum, 20) + `"`},
		{"database url password", "postgres://app:" + fake(89, alnum, 14) + "@db.internal:5432/app"},
		{"curl auth header", `curl -H "Authorization: Token ` + fake(90, alnum, 32) + `" https://api.example.org/v1`},
	}
}

// innocentCases must never be flagged by the general guard (CheckSecret,
// used for every field but the public status).
func innocentCases() []string {
	sha40 := fake(100, hexLower, 40)
	return []string{
		"fix parser: handle empty receipts",
		"repo@a1b2c3d fix parser",
		"repo@" + sha40 + " fix the parser",
		sha40,
		"merge " + fake(101, hexLower, 40) + " into main",
		"commit " + fake(102, hexLower, 40) + " (HEAD -> main, origin/main)",
		"post:6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7b",
		"6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7b",
		"func (g *Guard) CheckSecret(field, value string) error {",
		`token := os.Getenv("QDAY_TOKEN")`,
		"cfg.Token = tokenFromFile(path)",
		"if err := json.Unmarshal(body, &cp); err != nil { return err }",
		"/home/agent/work/continuityd/capsule/secrets_test.go",
		"capsule/testdata/fuzz/FuzzDecodeCheckpoint/seed-01",
		"/home/user/.claude/projects/-home-user-proj/6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7b.jsonl",
		"2026-08-08T11:04:00Z",
		"staging deploy 2026-08-08T11:04Z",
		"https://qdaybunker.fun/office/agents/builder",
		"https://github.com/continuityd/continuityd/actions/runs/16234567890",
		"[office](https://office.qdaybunker.fun/) shows the public status",
		"## Next\n- swap the callsites in checkout\n- delete the shim",
		"panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/x.go:8 +0x1d\nexit status 2",
		"base64 of hello is aGVsbG8=",
		"bump golang.org/x/sys from v0.44.0 to v0.45.0",
		"gitleaks v8.30.1, jsonschema v6.0.3",
		"ghcr.io/continuityd/continuityd@sha256:" + fake(103, hexLower, 64),
		"sha256sum: " + fake(104, hexLower, 64) + "  continuityd-linux-amd64",
		"max_tokens=4096",
		"tokenizer: cl100k_base",
		"the API key rotation is tracked in OPS-1234",
		"Use the Bearer token from the keychain, never paste it",
		"Authorization: Bearer ${QDAY_TOKEN}",
		"password_file: /etc/continuityd/qday.token",
		`token_env = "QDAY_TOKEN"`,
		"secret: ${{ secrets.QDAY_TOKEN }}",
		"the secret is to batch writes and retry with backoff",
		"retry with backoff; the upstream drops bursts over sixty a minute",
		"Statusline: ctx 41% (82k/200k tokens)",
		"SELECT id, title FROM commitments WHERE status = 'open' ORDER BY opened_at",
		`{"kind":"context","used_fraction":0.83}`,
		"go test -race -count=1 ./capsule/",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: continuityd",
		"c_01J9ZK3M4N5P6Q7R8S9T0V1W2X opened: ship the parser fix",
		"Closes #42; see PR 128 and task-runner-for-nightly-builds-2026",
		"sk-learn style pipelines were slower",
		"auth: loopback listener requires the token file (mode 0600)",
		`private_key_path = "/etc/ssh/id_ed25519"`,
		"Blocked on STRIPE_KEY_V2 missing in staging",
		"日本語のメモ: パーサーを直した",
		"ops: 12345678:AAb is not a token; neither is version 1.2.3.4 or api.github.com/repos",
		"Mmmmmmmmmmmmmmmmmmmmmmmmm.abcdef.this-is-just-a-long-hyphenated-phrase",
		"Migrate the billing module to the new client; adapters written, unit tests green",
	}
}

func TestCheckSecretFlagsCredentials(t *testing.T) {
	g := testGuard(t)
	cases := credentialCases()
	if len(cases) < 45 {
		t.Fatalf("only %d credential cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, form := range []struct{ name, text string }{
				{"alone", tc.value},
				{"in a sentence", "While debugging the deploy I pasted " + tc.value + " into the notes, sorry."},
				{"on its own line", "notes:\n" + tc.value + "\nend of notes"},
			} {
				err := g.CheckSecret("working_state.last_result", form.text)
				if err == nil {
					t.Errorf("%s: not flagged: %q", form.name, form.text)
					continue
				}
				e := wantRefusal(t, err, capsule.CodeSecretDetected, "working_state.last_result")
				if strings.Contains(e.Message, tc.value) || strings.Contains(e.Error(), tc.value) {
					t.Errorf("%s: message echoes the value: %q", form.name, e.Message)
				}
				if !strings.Contains(e.Message, "rule ") {
					t.Errorf("%s: message does not name the rule: %q", form.name, e.Message)
				}
				if red := g.Redact(form.text); strings.Contains(red, tc.value) || g.CheckSecret("x", red) != nil {
					t.Errorf("%s: Redact left the credential: %q", form.name, red)
				}
			}
		})
	}
}

func TestCheckSecretLeavesInnocentText(t *testing.T) {
	g := testGuard(t)
	cases := innocentCases()
	if len(cases) < 40 {
		t.Fatalf("only %d innocent cases", len(cases))
	}
	for _, s := range cases {
		if err := g.CheckSecret("focus", s); err != nil {
			t.Errorf("flagged %q: %v", s, err)
		}
		if red := g.Redact(s); red != s {
			t.Errorf("Redact changed %q to %q", s, red)
		}
	}
}

func TestRedactKeepsContext(t *testing.T) {
	g := testGuard(t)
	tok := "ghp_" + fake(200, alnum, 36)
	got := g.Redact("fix: rotate " + tok + " after the leak")
	if got != "fix: rotate [REDACTED] after the leak" {
		t.Fatalf("Redact = %q", got)
	}
	pw := fake(201, alnum, 14)
	got = g.Redact("config.env: DB_PASSWORD=" + pw)
	if strings.Contains(got, pw) || !strings.HasPrefix(got, "config.env: DB_PASSWORD=") {
		t.Fatalf("Redact = %q", got)
	}
	two := g.Redact("a " + tok + " b sk_live_" + fake(202, alnum, 24) + " c")
	if two != "a [REDACTED] b [REDACTED] c" {
		t.Fatalf("Redact = %q", two)
	}
	if g.Redact("") != "" || g.Redact("short") != "short" {
		t.Fatal("Redact changed a short string")
	}
}

func TestCheckSecretShortStringsSkipped(t *testing.T) {
	g := testGuard(t)
	for _, s := range []string{"", "acting", "sk-1234", "ghp_abc"} {
		if err := g.CheckSecret("f", s); err != nil {
			t.Errorf("%q flagged: %v", s, err)
		}
	}
}

func BenchmarkCheckSecret(b *testing.B) {
	g := testGuard(b)
	prose := "Swapped the callsites in checkout to the new billing client and ran the unit tests; " +
		"two failures remain in the refund path because the old client retried on 409 and the new one " +
		"does not. Next: add an explicit retry with backoff, then delete the shim. See repo@a1b2c3d."
	for len(prose) < 300 {
		prose += " More notes."
	}
	prose = prose[:300]
	fill := func(line string) string {
		var b strings.Builder
		for b.Len() < 4096 {
			b.WriteString(line)
		}
		return b.String()[:4096]
	}
	// gitleaks runs a rule's regexp only when one of its keywords occurs;
	// "key" wakes generic-api-key, by far the costliest, on every line.
	keywords := fill("commit a1b2c3d: fix the parser for empty receipts; tests green; the upstream key rotation is tracked in OPS-1234.\n")
	plain := fill("commit a1b2c3d: fix the parser for empty receipts; tests green; the refund path still fails on 409.\n")
	for _, bc := range []struct {
		name string
		s    string
	}{{"prose300", prose}, {"text4KB_keywords", keywords}, {"text4KB_plain", plain}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.s)))
			b.ReportAllocs()
			for b.Loop() {
				if err := g.CheckSecret("f", bc.s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGuardsShareOneRuleSet: every Guard evaluates the one parsed copy of
// gitleaks' rule set (secretrules.Default), so there is one rule set per
// process, whatever the number of guards. Its verdicts are compared with
// gitleaks' own detector in internal/secretrules.
func TestGuardsShareOneRuleSet(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{AllowedLinkDomains: []string{"example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.rules != b.rules || a.rules.Len() < 200 {
		t.Fatalf("guards hold different rule sets (%p, %p) or too few rules (%d)", a.rules, b.rules, a.rules.Len())
	}
}

// TestRedactCredentialShapesUsesTheGuardsRules: code without a Guard (an
// upstream's error text) redacts with the guard's whole rule list,
// gitleaks' set included, so every corpus shape, alone and in a sentence,
// comes out exactly as the guard's own Redact leaves it.
func TestRedactCredentialShapesUsesTheGuardsRules(t *testing.T) {
	g := testGuard(t)
	byGitleaks := 0
	for _, sh := range corpusShapes(t) {
		for _, s := range []string{sh.value, "while debugging the deploy I pasted " + sh.value + " into the notes, sorry"} {
			if got, want := RedactCredentialShapes(s, redacted), g.Redact(s); got != want {
				t.Errorf("%s: RedactCredentialShapes gives %q, the guard's Redact %q", sh.name, got, want)
			}
		}
		if g.extraRule(sh.value) == "" {
			byGitleaks++
		}
	}
	if byGitleaks < 20 {
		t.Fatalf("only %d shapes are left to gitleaks' rules: the comparison proves little", byGitleaks)
	}
}

// TestGitleaksAllowMarkerIsIgnored: gitleaks skips a finding whose line
// says "gitleaks:allow"; the guard does not, so a pasted secret cannot
// switch the guard off by carrying the marker (the library-based guard
// accepted both of these).
func TestGitleaksAllowMarkerIsIgnored(t *testing.T) {
	g := testGuard(t)
	for _, v := range []string{
		"ghp_" + fake(901, alnum, 36) + " gitleaks:allow",
		"AKIA" + fake(902, upper, 16) + " # gitleaks:allow",
	} {
		if g.CheckSecret("focus", v) == nil {
			t.Errorf("%.8s… with gitleaks:allow: accepted", v)
		}
		body := `{"focus":` + js(v) + `}`
		if _, err := g.DecodeCheckpoint([]byte(body)); err == nil {
			t.Errorf("a checkpoint with %.8s… and gitleaks:allow in its focus: accepted", v)
		}
	}
}

// TestTriggerIndexSkipsOnlyRulesThatCannotMatch: continuityd's own rules
// give the same answer with the trigger index as each run on every text,
// on the credential and innocent cases and on their upper- and
// lower-cased forms (a case-sensitive trigger is found in the lower-cased
// text too).
func TestTriggerIndexSkipsOnlyRulesThatCannotMatch(t *testing.T) {
	g := testGuard(t)
	every := func(s string) string { // extraRule without the index
		lower := asciiLower(s)
		for i := range g.extraRules {
			if sp := g.extraRules[i].find(s, lower, 1); len(sp) > 0 {
				return sp[0].rule
			}
		}
		return ""
	}
	var texts []string
	for _, tc := range credentialCases() {
		texts = append(texts, tc.value, "notes: "+tc.value+" end")
	}
	texts = append(texts, innocentCases()...)
	flagged := 0
	for _, s := range texts {
		for _, form := range []string{s, strings.ToUpper(s), strings.ToLower(s)} {
			want := every(form)
			if got := g.extraRule(form); got != want {
				t.Errorf("%q: with the index %q, every rule run %q", form, got, want)
			}
			if want != "" {
				flagged++
			}
		}
	}
	if flagged < 20 {
		t.Fatalf("only %d texts flagged by continuityd's own rules: the comparison proves little", flagged)
	}
}
