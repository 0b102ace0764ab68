package capsule

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// CapsuleSchemaJSON is the published Continuity Capsule v1 JSON Schema,
// byte for byte (see schema/SOURCE.md). Exported so the daemon can serve
// it and `continuityd capsule validate` can show it; callers must treat it
// as read-only (NewGuard compiles it).
//
//go:embed schema/continuity-capsule-v1.schema.json
var CapsuleSchemaJSON []byte

// compileCapsuleSchema compiles the embedded schema under its own $id. The
// compiler gets the document as a resource, and its draft 2020-12
// meta-schema is built into the library, so nothing is fetched.
func compileCapsuleSchema() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(CapsuleSchemaJSON))
	if err != nil {
		return nil, err
	}
	obj, _ := doc.(map[string]any)
	id, _ := obj["$id"].(string)
	if id == "" {
		return nil, errors.New("the embedded schema has no $id")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return c.Compile(id)
}

// DecodeCapsule decodes a Continuity Capsule v1 (PUT /v1/capsule, a handoff
// file) strictly: UTF-8 and one JSON object as for every body, then the
// published schema, then the secret guard over every string. A refusal is
// always a *Error; schema failures are INVALID_CAPSULE naming the failing
// location and rule, never the value. Strings are never cut. TTLDays keeps
// the JSON text it came as (14, "14", and also 14.0, which JSON Schema
// counts as an integer).
func (g *Guard) DecodeCapsule(body []byte) (*Capsule, error) {
	c, err := g.decodeCapsule(body)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (g *Guard) decodeCapsule(body []byte) (*Capsule, *Error) {
	if err := checkBody(body, MaxCapsuleBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		if m.name == "ttl_days" && hugeExponent(m.value) {
			return nil, ttlOutOfRange()
		}
	}
	if err := g.validateCapsuleJSON(body); err != nil {
		return nil, err
	}
	var c Capsule
	if err := json.Unmarshal(body, &c); err != nil {
		// Cannot happen once the schema passed; refuse rather than guess.
		return nil, Refuse(CodeInvalidCapsule, "", "does not decode as a capsule")
	}
	if len(c.Receipts) == 0 {
		c.Receipts = nil // [] and absent mean the same
	}
	if err := g.checkCapsuleSecrets(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// CheckCapsule applies DecodeCapsule's checks to a capsule built in memory
// (POST /v1/capsule/seal): valid UTF-8 in every string, the schema on its
// JSON form, then the secret guard.
func (g *Guard) CheckCapsule(c *Capsule) error {
	if err := g.checkCapsule(c); err != nil {
		return err
	}
	return nil
}

func (g *Guard) checkCapsule(c *Capsule) *Error {
	if c == nil {
		return Refuse(CodeInvalidCapsule, "", "no capsule")
	}
	// json.Marshal would silently replace invalid UTF-8 with U+FFFD.
	for _, f := range capsuleStrings(c) {
		if !utf8.ValidString(f.value) {
			return Refuse(CodeInvalidUTF8, f.path, "is not valid UTF-8")
		}
	}
	if len(c.TTLDays) > 0 && !json.Valid(c.TTLDays) {
		return Refuse(CodeInvalidCapsule, "ttl_days", "is not a JSON value (type)")
	}
	if hugeExponent(c.TTLDays) {
		return ttlOutOfRange()
	}
	body, err := json.Marshal(c)
	if err != nil {
		return Refuse(CodeInvalidCapsule, "", "does not encode as JSON")
	}
	if err := g.validateCapsuleJSON(body); err != nil {
		return err
	}
	return g.checkCapsuleSecrets(c)
}

// validateCapsuleJSON validates a well-formed body against the schema. The
// body is decoded with jsonschema.UnmarshalJSON, which keeps numbers as
// json.Number, so 14.5 is not rounded into an integer on the way.
func (g *Guard) validateCapsuleJSON(body []byte) *Error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return Refuse(CodeInvalidJSON, "", "malformed JSON")
	}
	err = g.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return Refuse(CodeInvalidCapsule, "", "fails the Continuity Capsule v1 schema")
	}
	return schemaRefusal(inst, verr)
}

// schemaRefusal reports one failure of the schema: the first leaf error in
// (location, keyword) order, so the same capsule always gets the same
// answer (the library walks properties in map order).
func schemaRefusal(inst any, verr *jsonschema.ValidationError) *Error {
	var leaves []*jsonschema.ValidationError
	var collect func(e *jsonschema.ValidationError)
	collect = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			collect(c)
		}
	}
	collect(verr)
	sort.SliceStable(leaves, func(i, j int) bool {
		pi, pj := strings.Join(leaves[i].InstanceLocation, "\x00"), strings.Join(leaves[j].InstanceLocation, "\x00")
		if pi != pj {
			return pi < pj
		}
		return strings.Join(leaves[i].ErrorKind.KeywordPath(), "/") < strings.Join(leaves[j].ErrorKind.KeywordPath(), "/")
	})
	leaf := leaves[0]
	field, hidden := instancePath(inst, leaf.InstanceLocation)
	name := func(n string) string { // a property named by the rule, under field
		if hidden || !isSafeName(n) {
			return ""
		}
		return joinPath(field, n)
	}
	const code = CodeInvalidCapsule
	switch k := leaf.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		props := append([]string(nil), k.Properties...)
		sort.Strings(props)
		if f := name(props[0]); f != "" {
			return Refuse(code, f, "is not a Continuity Capsule v1 property (additionalProperties: false)")
		}
		return Refuse(code, "", "carries a property that is not a Continuity Capsule v1 property, whose name is not shown (additionalProperties: false)")
	case *kind.Required:
		return Refuse(code, name(k.Missing[0]), "is required (required)")
	case *kind.MaxLength:
		return Refuse(code, field, "is %d characters; the schema allows at most %d (maxLength %d); nothing is ever cut", k.Got, k.Want, k.Want)
	case *kind.MaxItems:
		return Refuse(code, field, "has %d items; the schema allows at most %d (maxItems %d)", k.Got, k.Want, k.Want)
	case *kind.Enum:
		want := make([]string, 0, len(k.Want))
		for _, w := range k.Want {
			b, _ := json.Marshal(w)
			want = append(want, string(b))
		}
		return Refuse(code, field, "must be one of %s (enum)", strings.Join(want, ", "))
	case *kind.Type:
		return Refuse(code, field, "must be %s, got %s (type)", strings.Join(k.Want, " or "), k.Got)
	default:
		return Refuse(code, field, "fails the schema rule %s", strings.Join(leaf.ErrorKind.KeywordPath(), "/"))
	}
}

// instancePath turns a schema instance location into our dotted path
// ("receipts[3]"), walking the instance to tell array indexes from keys.
// hidden is true when a key on the way is not safe to repeat; the path is
// then "".
func instancePath(inst any, loc []string) (path string, hidden bool) {
	cur := inst
	for _, tok := range loc {
		switch x := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return "", true
			}
			path, cur = indexPath(path, i), x[i]
		case map[string]any:
			if !isSafeName(tok) {
				return "", true
			}
			path, cur = joinPath(path, tok), x[tok]
		default:
			return "", true
		}
	}
	return path, false
}

// capsuleField is one string of a capsule with its path.
type capsuleField struct{ path, value string }

// capsuleStrings lists every string a capsule carries, by JSON path.
func capsuleStrings(c *Capsule) []capsuleField {
	fs := []capsuleField{
		{"version", c.Version}, {"goal", c.Goal}, {"done", c.Done}, {"next", c.Next},
		{"blockers", c.Blockers}, {"do_not", c.DoNot}, {"refuted", c.Refuted},
	}
	for i, r := range c.Receipts {
		fs = append(fs, capsuleField{indexPath("receipts", i), r})
	}
	fs = append(fs, capsuleField{"written_by", c.WrittenBy}, capsuleField{"written_at", c.WrittenAt})
	if len(c.TTLDays) > 0 && c.TTLDays[0] == '"' {
		var s string
		if json.Unmarshal(c.TTLDays, &s) == nil {
			fs = append(fs, capsuleField{"ttl_days", s})
		}
	}
	return append(fs, capsuleField{"handoff_to", c.HandoffTo})
}

// checkCapsuleSecrets runs the secret guard over every string of a capsule.
func (g *Guard) checkCapsuleSecrets(c *Capsule) *Error {
	for _, f := range capsuleStrings(c) {
		if err := g.checkSecret(f.path, f.value); err != nil {
			return err
		}
	}
	return nil
}

// maxTTLExponent bounds the exponent of a numeric ttl_days. JSON Schema
// counts 1e5 as an integer, and the schema library decides that with
// math/big, where 1e1000000 costs tens of milliseconds: a nine-byte body
// could make every capsule write slow. No useful number of days needs an
// exponent above this, so larger ones are refused before the schema runs.
const maxTTLExponent = 100

// hugeExponent reports a JSON number whose exponent exceeds maxTTLExponent
// in size (either sign).
func hugeExponent(raw json.RawMessage) bool {
	if jsonKind(raw) != "number" {
		return false
	}
	i := bytes.IndexAny(raw, "eE")
	if i < 0 {
		return false
	}
	exp := strings.TrimLeft(string(raw[i+1:]), "+-")
	exp = strings.TrimLeft(exp, "0")
	n, err := strconv.Atoi(exp)
	return len(exp) > 6 || err == nil && n > maxTTLExponent
}

func ttlOutOfRange() *Error {
	return Refuse(CodeInvalidCapsule, "ttl_days", "is out of range: write a whole number of days (type)")
}
