package guard

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

func TestEmbeddedSchemaIsThePublishedOne(t *testing.T) {
	local, err := os.ReadFile("testdata/continuity-capsule-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local, capsule.SchemaJSON) {
		t.Fatal("capsule/continuity-capsule-v1.schema.json differs from testdata's copy of the published schema")
	}
}

// TestEmbeddedSchemaMatchesSharedFixture compares with the project's shared
// fixture when this tree has it (it lives outside the module).
func TestEmbeddedSchemaMatchesSharedFixture(t *testing.T) {
	// shared/ sits beside the checkout (developers and CI alike).
	shared, err := os.ReadFile("../../shared/testdata/capsule/continuity-capsule-v1.schema.json")
	if err != nil {
		t.Skip("shared fixture not present:", err)
	}
	if !bytes.Equal(shared, capsule.SchemaJSON) {
		t.Fatal("embedded schema differs from the shared fixture")
	}
}

// TestSchemaLimitsMatchConstants ties the exported limits to the schema.
func TestSchemaLimitsMatchConstants(t *testing.T) {
	var s struct {
		Properties map[string]struct {
			MaxLength *int            `json:"maxLength"`
			MaxItems  *int            `json:"maxItems"`
			Items     json.RawMessage `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(capsule.SchemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"goal", "done", "next", "blockers", "do_not", "refuted"} {
		if p := s.Properties[f]; p.MaxLength == nil || *p.MaxLength != capsule.CapsuleFieldMax {
			t.Errorf("%s maxLength != %d", f, capsule.CapsuleFieldMax)
		}
	}
	for _, f := range []string{"written_by", "handoff_to"} {
		if p := s.Properties[f]; p.MaxLength == nil || *p.MaxLength != capsule.CapsuleNameMax {
			t.Errorf("%s maxLength != %d", f, capsule.CapsuleNameMax)
		}
	}
	r := s.Properties["receipts"]
	if r.MaxItems == nil || *r.MaxItems != capsule.CapsuleReceipts || !strings.Contains(string(r.Items), `"maxLength": 500`) || capsule.CapsuleReceiptMax != 500 {
		t.Errorf("receipts limits differ from the constants")
	}
}

func TestDecodeCapsuleSeedExample(t *testing.T) {
	g := testGuard(t)
	body, err := os.ReadFile("testdata/capsule-seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.DecodeCapsule(body)
	if err != nil {
		t.Fatal(err)
	}
	want := &capsule.Capsule{
		Version:   "1",
		Goal:      "Migrate the billing module to the new client",
		Done:      "Adapters written, unit tests green, staging deploy verified",
		Next:      "Swap the callsites in checkout, then delete the shim",
		Blockers:  "Staging secret STRIPE_KEY_V2 is missing",
		DoNot:     "Do not delete the shim before the callsites move",
		Refuted:   "Batching the migration fails — the old client is not idempotent",
		Receipts:  []string{"repo@a1b2c3d", "staging deploy 2026-08-08T11:04Z"},
		WrittenBy: "acme-refactor-bot",
		TTLDays:   json.RawMessage("14"),
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %s\nwant %s", js(c), js(want))
	}
	if err := g.CheckCapsule(c); err != nil {
		t.Fatalf("CheckCapsule on a decoded capsule: %v", err)
	}
}

// capsuleWith returns the body of a valid capsule with one member set to a
// JSON value (or removed, for value "").
func capsuleWith(member, value string) string {
	m := map[string]json.RawMessage{
		"version":  json.RawMessage(`"1"`),
		"goal":     json.RawMessage(`"ship the parser fix"`),
		"receipts": json.RawMessage(`["repo@a1b2c3d fix parser"]`),
	}
	if value == "" {
		delete(m, member)
	} else {
		m[member] = json.RawMessage(value)
	}
	return js(m)
}

func strArray(n int, s string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = js(s)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestDecodeCapsuleLimits(t *testing.T) {
	const code = capsule.CodeInvalidCapsule
	var cases []bodyCase
	for i, f := range []string{"goal", "done", "next", "blockers", "do_not", "refuted"} {
		ch := []string{"a", "é", "日"}[i%3]
		cases = append(cases,
			bodyCase{f + " 3999", capsuleWith(f, js(rep(ch, capsule.CapsuleFieldMax-1))), "", ""},
			bodyCase{f + " 4000", capsuleWith(f, js(rep(ch, capsule.CapsuleFieldMax))), "", ""},
			bodyCase{f + " 4001", capsuleWith(f, js(rep(ch, capsule.CapsuleFieldMax+1))), code, f},
			bodyCase{f + " number", capsuleWith(f, `4000`), code, f},
			bodyCase{f + " null", capsuleWith(f, `null`), code, f},
		)
	}
	for _, f := range []string{"written_by", "handoff_to"} {
		cases = append(cases,
			bodyCase{f + " 199", capsuleWith(f, js(rep("é", capsule.CapsuleNameMax-1))), "", ""},
			bodyCase{f + " 200", capsuleWith(f, js(rep("é", capsule.CapsuleNameMax))), "", ""},
			bodyCase{f + " 201", capsuleWith(f, js(rep("é", capsule.CapsuleNameMax+1))), code, f},
		)
	}
	cases = append(cases,
		bodyCase{"19 receipts", capsuleWith("receipts", strArray(capsule.CapsuleReceipts-1, "repo@a1b2c3d")), "", ""},
		bodyCase{"20 receipts", capsuleWith("receipts", strArray(capsule.CapsuleReceipts, "repo@a1b2c3d")), "", ""},
		bodyCase{"21 receipts", capsuleWith("receipts", strArray(capsule.CapsuleReceipts+1, "repo@a1b2c3d")), code, "receipts"},
		bodyCase{"no receipts", capsuleWith("receipts", `[]`), "", ""},
		bodyCase{"receipt 499", capsuleWith("receipts", `["a",`+js(rep("日", capsule.CapsuleReceiptMax-1))+`]`), "", ""},
		bodyCase{"receipt 500", capsuleWith("receipts", `["a",`+js(rep("日", capsule.CapsuleReceiptMax))+`]`), "", ""},
		bodyCase{"receipt 501", capsuleWith("receipts", `["a","b","c",`+js(rep("日", capsule.CapsuleReceiptMax+1))+`]`), code, "receipts[3]"},
		bodyCase{"receipt not a string", capsuleWith("receipts", `["a",7]`), code, "receipts[1]"},
		bodyCase{"receipts not an array", capsuleWith("receipts", `"repo@a1b2c3d"`), code, "receipts"},
		bodyCase{"version 1", capsuleWith("version", `"1"`), "", ""},
		bodyCase{"version 1.0", capsuleWith("version", `"1.0"`), "", ""},
		bodyCase{"version v1", capsuleWith("version", `"v1"`), "", ""},
		bodyCase{"version 2", capsuleWith("version", `"2"`), code, "version"},
		bodyCase{"version V1", capsuleWith("version", `"V1"`), code, "version"},
		bodyCase{"version number", capsuleWith("version", `1`), code, "version"},
		bodyCase{"version missing", capsuleWith("version", ""), code, "version"},
		bodyCase{"ttl_days int", capsuleWith("ttl_days", `14`), "", ""},
		bodyCase{"ttl_days string", capsuleWith("ttl_days", `"14"`), "", ""},
		bodyCase{"ttl_days free string", capsuleWith("ttl_days", `"two weeks"`), "", ""},
		bodyCase{"ttl_days integral float", capsuleWith("ttl_days", `14.0`), "", ""},
		bodyCase{"ttl_days float", capsuleWith("ttl_days", `14.5`), code, "ttl_days"},
		bodyCase{"ttl_days bool", capsuleWith("ttl_days", `true`), code, "ttl_days"},
		bodyCase{"ttl_days null", capsuleWith("ttl_days", `null`), code, "ttl_days"},
		bodyCase{"ttl_days huge integer", capsuleWith("ttl_days", `123456789012345678901234567890`), "", ""},
		bodyCase{"ttl_days exponent integer", capsuleWith("ttl_days", `1e2`), "", ""},
		bodyCase{"ttl_days exponent 100", capsuleWith("ttl_days", `1e100`), "", ""},
		bodyCase{"ttl_days exponent 101", capsuleWith("ttl_days", `1e101`), code, "ttl_days"},
		bodyCase{"ttl_days exponent million", capsuleWith("ttl_days", `1E+1000000`), code, "ttl_days"},
		bodyCase{"ttl_days tiny", capsuleWith("ttl_days", `1.5e-200`), code, "ttl_days"},
		bodyCase{"written_at any string", capsuleWith("written_at", `"2026-08-08T11:04:00Z"`), "", ""},
		bodyCase{"written_at number", capsuleWith("written_at", `1754650000`), code, "written_at"},
		bodyCase{"unknown property", capsuleWith("summary", `"x"`), code, "summary"},
		bodyCase{"property names are case-sensitive", capsuleWith("Goal", `"x"`), code, "Goal"},
		bodyCase{"only version", `{"version":"1"}`, "", ""},
		bodyCase{"empty object", `{}`, code, "version"},
		bodyCase{"duplicate key", `{"version":"1","goal":"a","goal":"b"}`, capsule.CodeInvalidJSON, "goal"},
		bodyCase{"not an object", `["version"]`, capsule.CodeInvalidJSON, ""},
		bodyCase{"trailing data", `{"version":"1"}{}`, capsule.CodeInvalidJSON, ""},
		bodyCase{"invalid utf8", "{\"version\":\"1\",\"goal\":\"\xfe\"}", capsule.CodeInvalidUTF8, ""},
		bodyCase{"secret in a receipt", capsuleWith("receipts", `["a","b","c",`+js("deploy token ghp_"+fake(500, alnum, 36))+`]`), capsule.CodeSecretDetected, "receipts[3]"},
		bodyCase{"secret in goal", capsuleWith("goal", js("-----BEGIN OPENSSH PRIVATE KEY-----\n"+fake(501, b64, 70))), capsule.CodeSecretDetected, "goal"},
		bodyCase{"secret in ttl_days", capsuleWith("ttl_days", js("sk-proj-"+fake(502, b64url, 60))), capsule.CodeSecretDetected, "ttl_days"},
		bodyCase{"full sha receipt", capsuleWith("receipts", js([]string{"repo@" + fake(503, hexLower, 40) + " fix parser", "ghcr.io/x/y@sha256:" + fake(504, hexLower, 64)})), "", ""},
	)
	g := testGuard(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := g.DecodeCapsule([]byte(tc.body))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := g.CheckCapsule(c); err != nil {
					t.Fatalf("CheckCapsule refuses what DecodeCapsule accepted: %v", err)
				}
				return
			}
			e := wantRefusal(t, err, tc.code, tc.field)
			checkGuardError(t, err)
			if tc.code == capsule.CodeInvalidCapsule && !strings.Contains(e.Message, "(") {
				t.Errorf("message %q does not name the rule", e.Message)
			}
		})
	}
}

func TestDecodeCapsuleMessages(t *testing.T) {
	g := testGuard(t)
	for _, tc := range []struct{ body, want string }{
		{capsuleWith("goal", js(rep("z", 4001))), "maxLength 4000"},
		{capsuleWith("receipts", strArray(21, "r")), "maxItems 20"},
		{capsuleWith("version", `"9"`), `"1", "1.0", "v1"`},
		{capsuleWith("ttl_days", `true`), "got boolean (type)"},
		{capsuleWith("summary", `"x"`), "additionalProperties"},
		{capsuleWith("version", ""), "required"},
	} {
		_, err := g.DecodeCapsule([]byte(tc.body))
		e := checkGuardError(t, err)
		if !strings.Contains(e.Message, tc.want) {
			t.Errorf("message %q lacks %q", e.Message, tc.want)
		}
		if strings.Contains(e.Message, "zzzz") || strings.Contains(e.Message, `"9"`) {
			t.Errorf("message %q echoes the value", e.Message)
		}
	}
}

func TestDecodeCapsuleSchemaErrorIsDeterministic(t *testing.T) {
	g := testGuard(t)
	body := `{"version":"2","goal":` + js(rep("a", 4001)) + `,"done":` + js(rep("b", 4001)) + `,"zeta":1,"alpha":2,"receipts":[1,2]}`
	first := checkGuardError(t, func() error { _, err := g.DecodeCapsule([]byte(body)); return err }())
	for range 20 {
		_, err := g.DecodeCapsule([]byte(body))
		if e := checkGuardError(t, err); *e != *first {
			t.Fatalf("refusal changed: %v then %v", first, e)
		}
	}
	if first.Field != "alpha" {
		t.Fatalf("first refusal %v, want the additional property alpha", first)
	}
}

func TestDecodeCapsuleTooLarge(t *testing.T) {
	g := testGuard(t)
	body := `{"version":"1","written_at":"` + rep("a", MaxCapsuleBytes) + `"}`
	_, err := g.DecodeCapsule([]byte(body))
	if e := wantRefusal(t, err, capsule.CodeBodyTooLarge, ""); e.Status != 413 {
		t.Fatalf("status %d", e.Status)
	}
	// A capsule with every capped field at its maximum in 3-byte
	// characters fits.
	m := map[string]any{"version": "1"}
	for _, f := range []string{"goal", "done", "next", "blockers", "do_not", "refuted"} {
		m[f] = rep("日", capsule.CapsuleFieldMax)
	}
	rs := make([]string, capsule.CapsuleReceipts)
	for i := range rs {
		rs[i] = rep("日", capsule.CapsuleReceiptMax)
	}
	m["receipts"], m["written_by"], m["handoff_to"] = rs, rep("日", capsule.CapsuleNameMax), rep("日", capsule.CapsuleNameMax)
	if _, err := g.DecodeCapsule([]byte(js(m))); err != nil {
		t.Fatal(err)
	}
}

func TestCheckCapsule(t *testing.T) {
	g := testGuard(t)
	ok := &capsule.Capsule{Version: "1", Goal: "ship", Receipts: []string{"repo@a1b2c3d"}, TTLDays: json.RawMessage(`"7"`)}
	if err := g.CheckCapsule(ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		c     *capsule.Capsule
		code  string
		field string
	}{
		{"nil", nil, capsule.CodeInvalidCapsule, ""},
		{"no version", &capsule.Capsule{Goal: "x"}, capsule.CodeInvalidCapsule, "version"},
		{"bad version", &capsule.Capsule{Version: "2"}, capsule.CodeInvalidCapsule, "version"},
		{"goal 4001", &capsule.Capsule{Version: "1", Goal: rep("é", 4001)}, capsule.CodeInvalidCapsule, "goal"},
		{"goal 4000", &capsule.Capsule{Version: "1", Goal: rep("é", 4000)}, "", ""},
		{"21 receipts", &capsule.Capsule{Version: "1", Receipts: make([]string, 21)}, capsule.CodeInvalidCapsule, "receipts"},
		{"receipt 501", &capsule.Capsule{Version: "1", Receipts: []string{"a", rep("r", 501)}}, capsule.CodeInvalidCapsule, "receipts[1]"},
		{"ttl_days float", &capsule.Capsule{Version: "1", TTLDays: json.RawMessage(`1.5`)}, capsule.CodeInvalidCapsule, "ttl_days"},
		{"ttl_days not json", &capsule.Capsule{Version: "1", TTLDays: json.RawMessage(`fourteen`)}, capsule.CodeInvalidCapsule, "ttl_days"},
		{"invalid utf8", &capsule.Capsule{Version: "1", Next: "a\xffb"}, capsule.CodeInvalidUTF8, "next"},
		{"secret", &capsule.Capsule{Version: "1", Done: "deployed with AIza" + fake(510, alnum, 35)}, capsule.CodeSecretDetected, "done"},
		{"secret in handoff_to", &capsule.Capsule{Version: "1", HandoffTo: "npm_" + fake(511, lowerAlnum, 36)}, capsule.CodeSecretDetected, "handoff_to"},
		{"html characters survive", &capsule.Capsule{Version: "1", Goal: "a < b && c > d"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.CheckCapsule(tc.c)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantRefusal(t, err, tc.code, tc.field)
		})
	}
}

// TestGuardWithoutSchemaRefusesEveryCapsule: a Guard built without
// Options.CapsuleSchema fails closed on capsules, naming why, and checks
// the rest as usual.
func TestGuardWithoutSchemaRefusesEveryCapsule(t *testing.T) {
	g, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile("testdata/capsule-seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.DecodeCapsule(body)
	for _, err := range []error{err, g.CheckCapsule(&capsule.Capsule{Version: "1", Goal: "ship"})} {
		if err == nil {
			t.Fatal("a Guard without the schema accepted a capsule")
		}
		if e := asError(t, err); e.Code != capsule.CodeInternal || e.Status != 500 || !strings.Contains(e.Message, "without the capsule schema") {
			t.Errorf("got %s (%d): %s; want %s (500) saying the schema is missing", e.Code, e.Status, e.Message, capsule.CodeInternal)
		}
	}
	if g.CheckSecret("f", "ghp_"+fake(720, alnum, 36)) == nil {
		t.Error("a Guard without the schema missed a GitHub token")
	}
}

// TestExplainReadsEveryKeywordTheSchemaUses: explain names failures from
// its own reading of the schema (schemaNode); a keyword it does not read
// would still be enforced by the validator, but its failures would not
// name their rule. Every keyword of the embedded schema must be one
// schemaNode reads, or an annotation.
func TestExplainReadsEveryKeywordTheSchemaUses(t *testing.T) {
	known := map[string]bool{
		"type": true, "enum": true, "maxLength": true, "maxItems": true, "items": true,
		"properties": true, "additionalProperties": true, "required": true,
		"$schema": true, "$id": true, "title": true, "description": true, // annotations
	}
	var walk func(path string, s any)
	walk = func(path string, s any) {
		m, ok := s.(map[string]any)
		if !ok {
			if _, isBool := s.(bool); !isBool {
				t.Errorf("%s: a schema is an object or a boolean, got %T", path, s)
			}
			return
		}
		for k, v := range m {
			if !known[k] {
				t.Errorf("%s: keyword %q is not read by explain (schemaNode)", path, k)
			}
			switch k {
			case "items", "additionalProperties":
				walk(path+"/"+k, v)
			case "properties":
				for name, sub := range v.(map[string]any) {
					walk(path+"/properties/"+name, sub)
				}
			}
		}
	}
	var root any
	if err := json.Unmarshal(capsule.SchemaJSON, &root); err != nil {
		t.Fatal(err)
	}
	walk("#", root)
	if _, err := newCapsuleSchema(nil); err != nil {
		t.Fatalf("schemaNode does not read the embedded schema: %v", err)
	}
}
