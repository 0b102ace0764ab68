package guard

import (
	"bytes"
	"encoding/json"
	"math/big"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// Native fuzz targets. Each builds (or reuses) one Guard outside the fuzz
// function, so an iteration costs one decode, not a detector build. Seeds
// come from f.Add below and from testdata/fuzz/<FuzzName>/.
//
// The properties: a decoder never panics; a refusal is always a *Error
// with a known code and status; an accepted value re-encodes to JSON that
// decodes (through every guard again) to an equal value.

// reencode marshals v without HTML escaping, which would otherwise inflate
// "<" to six bytes and could push a body that fit over the size limit.
func reencode(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("re-encoding an accepted value: %v", err)
	}
	return buf.Bytes()
}

func FuzzDecodeCheckpoint(f *testing.F) {
	g := testGuard(f)
	for _, s := range []string{
		`{"focus":"parser fix"}`,
		`{"working_state":{"next_action":"a","result_ref":null,"waiting_for":"ci"}}`,
		`{"decide":{"chosen":"retry","because":"the upstream drops bursts over sixty a minute"}}`,
		`{"public_status":{"phase":"acting","next_action":"x","until":1754650000000,"route":"/a/{b}"}}`,
		`{"commitments":{"open":[{"title":"abc"}],"close":[{"id":"c_1","evidence":"post:` + goodUUID + `"}],"drop":[{"id":"c_2","reason":"superseded"}]}}`,
		`{"stop":{"reason":"done"},"focus":3,"resume_residency":true}`,
		`{"focus":"\ud83d\ude00"}`,
		`{"focus":"a","focus":"b"}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cp, err := g.DecodeCheckpoint(body)
		if err != nil {
			checkGuardError(t, err)
			if cp != nil {
				t.Fatal("a checkpoint and an error")
			}
			return
		}
		if cp.IsEmpty() {
			t.Fatal("accepted an empty checkpoint")
		}
		if cp.Stop != nil && (cp.Focus != nil || cp.WorkingState != nil || cp.Decide != nil || cp.PublicStatus != nil || cp.Commitments != nil) {
			t.Fatal("a stop carried other fields")
		}
		again := reencode(t, cp)
		if len(again) > MaxBodyBytes {
			return // only escaping (U+2028 becomes six bytes) can do this
		}
		cp2, err := g.DecodeCheckpoint(again)
		if err != nil {
			t.Fatalf("re-encoded checkpoint refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(cp, cp2) {
			t.Fatalf("round trip changed the checkpoint:\n%s\n%s", again, reencode(t, cp2))
		}
	})
}

func FuzzDecodeCapsule(f *testing.F) {
	g := testGuard(f)
	for _, s := range []string{
		`{"version":"1","goal":"g","receipts":["repo@a1b2c3d"],"ttl_days":14}`,
		`{"version":"v1","ttl_days":"14","handoff_to":"next-bot"}`,
		`{"version":"1.0","ttl_days":14.0}`,
		`{"version":"1","ttl_days":14.5}`,
		`{"version":"2"}`,
		`{"version":"1","extra":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := g.DecodeCapsule(body)
		if err != nil {
			checkGuardError(t, err)
			return
		}
		checkCapsuleLimitsByHand(t, c)
		if err := g.CheckCapsule(c); err != nil {
			t.Fatalf("CheckCapsule refuses what DecodeCapsule accepted: %v", err)
		}
		again := reencode(t, c)
		if len(again) > MaxCapsuleBytes {
			return
		}
		c2, err := g.DecodeCapsule(again)
		if err != nil {
			t.Fatalf("re-encoded capsule refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the capsule:\n%s\n%s", again, reencode(t, c2))
		}
	})
}

// checkCapsuleLimitsByHand restates the published schema without the
// schema library, so a bug in the mapping (or the library) shows up.
func checkCapsuleLimitsByHand(t *testing.T, c *capsule.Capsule) {
	t.Helper()
	switch c.Version {
	case "1", "1.0", "v1":
	default:
		t.Fatalf("accepted version %q", c.Version)
	}
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{
		{"goal", c.Goal, capsule.CapsuleFieldMax}, {"done", c.Done, capsule.CapsuleFieldMax}, {"next", c.Next, capsule.CapsuleFieldMax},
		{"blockers", c.Blockers, capsule.CapsuleFieldMax}, {"do_not", c.DoNot, capsule.CapsuleFieldMax}, {"refuted", c.Refuted, capsule.CapsuleFieldMax},
		{"written_by", c.WrittenBy, capsule.CapsuleNameMax}, {"handoff_to", c.HandoffTo, capsule.CapsuleNameMax},
	} {
		if n := utf8.RuneCountInString(f.value); n > f.max {
			t.Fatalf("accepted %s of %d characters", f.name, n)
		}
	}
	if len(c.Receipts) > capsule.CapsuleReceipts {
		t.Fatalf("accepted %d receipts", len(c.Receipts))
	}
	for i, r := range c.Receipts {
		if n := utf8.RuneCountInString(r); n > capsule.CapsuleReceiptMax {
			t.Fatalf("accepted receipt %d of %d characters", i, n)
		}
	}
	if len(c.TTLDays) > 0 {
		switch jsonKind(c.TTLDays) {
		case "string":
		case "number":
			var n json.Number
			if err := json.Unmarshal(c.TTLDays, &n); err != nil {
				t.Fatalf("ttl_days %s: %v", c.TTLDays, err)
			}
			if !isIntegral(n.String()) {
				t.Fatalf("accepted a non-integer ttl_days %s", c.TTLDays)
			}
		default:
			t.Fatalf("accepted ttl_days of kind %s", jsonKind(c.TTLDays))
		}
	}
}

// isIntegral reports whether a JSON number has no fractional part, the
// JSON Schema meaning of "integer" (14.0 and 1.4e1 are integers).
func isIntegral(num string) bool {
	r, ok := new(big.Rat).SetString(num)
	return ok && r.IsInt()
}

func FuzzDecodeSignal(f *testing.F) {
	g := testGuard(f)
	for _, s := range []string{
		`{"kind":"context","used_fraction":0.83,"tokens":1000,"window":200000}`,
		`{"kind":"compaction","phase":"pre","trigger":"auto"}`,
		`{"kind":"session","event":"end","reason":"other","at":"2026-01-01T00:00:00Z"}`,
		`{"kind":"activity","event":"tool","via":"hook"}`,
		`{"kind":"context","used_fraction":-0}`,
		`{"kind":"context","used_fraction":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := g.DecodeSignal(body)
		if err != nil {
			checkGuardError(t, err)
			return
		}
		if !s.At.IsZero() {
			t.Fatal("at was taken from the input")
		}
		if s.UsedFraction != nil && (*s.UsedFraction < 0 || *s.UsedFraction > 1) {
			t.Fatalf("accepted used_fraction %v", *s.UsedFraction)
		}
		again := reencode(t, s)
		if len(again) > MaxBodyBytes {
			return
		}
		s2, err := g.DecodeSignal(again)
		if err != nil {
			t.Fatalf("re-encoded signal refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the signal:\n%s\n%s", again, reencode(t, s2))
		}
	})
}

// FuzzJSONFastPaths holds the quick body scans to the slow walks they stand
// in for.
func FuzzJSONFastPaths(f *testing.F) {
	for _, c := range jsonScanCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFastPaths(t, body) })
}
