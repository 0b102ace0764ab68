package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// CapsuleSchema is the published Continuity Capsule v1 schema, compiled
// (capsule/schema.Compile): it decides whether a capsule's JSON, decoded
// into any, satisfies the schema. It comes through Options so that guard
// links no JSON Schema library: the programs that never read a capsule do
// not pay for its initialisation.
type CapsuleSchema interface {
	Validate(instance any) error
}

// noCapsuleSchema refuses every capsule a Guard built without the schema
// is given: it fails closed, and says why.
func noCapsuleSchema() *capsule.Error {
	return capsule.Refuse(capsule.CodeInternal, "", "this program's capsule guard was built without the capsule schema, so it accepts no capsule")
}

// capsuleSchema is the validator from Options and the schema's tree, which
// explain reads to name the field and the rule that failed.
type capsuleSchema struct {
	validator CapsuleSchema
	tree      *schemaNode
}

// newCapsuleSchema pairs the validator with the tree of capsule.SchemaJSON.
func newCapsuleSchema(v CapsuleSchema) (*capsuleSchema, error) {
	var tree schemaNode
	if err := json.Unmarshal(capsule.SchemaJSON, &tree); err != nil {
		return nil, err
	}
	return &capsuleSchema{validator: v, tree: &tree}, nil
}

// schemaNode is what explain reads of a JSON Schema: the keywords the
// capsule schema uses. It only names a failure for people; the validator
// decides.
type schemaNode struct {
	Type                 schemaTypes            `json:"type"`
	Enum                 []any                  `json:"enum"`
	MaxLength            *int                   `json:"maxLength"`
	MaxItems             *int                   `json:"maxItems"`
	Items                *schemaNode            `json:"items"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties *schemaNode            `json:"additionalProperties"`
	Required             []string               `json:"required"`
	never                bool                   // the schema false: nothing satisfies it
}

// UnmarshalJSON reads a schema object or a boolean schema (true allows
// anything, false nothing).
func (n *schemaNode) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*n = schemaNode{}
		return nil
	case "false":
		*n = schemaNode{never: true}
		return nil
	}
	type plain schemaNode
	return json.Unmarshal(b, (*plain)(n))
}

// schemaTypes is the keyword type: one type name or a list of them.
type schemaTypes []string

func (t *schemaTypes) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = schemaTypes{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("type is neither a string nor a list of strings")
	}
	*t = many
	return nil
}

// DecodeCapsule decodes a Continuity Capsule v1 (PUT /v1/capsule, a handoff
// file) strictly: UTF-8 and one JSON object as for every body, then the
// published schema, then control characters (INVALID_CAPSULE) and the
// secret guard over every string. A refusal is always a *Error; schema
// failures are INVALID_CAPSULE naming the failing location and rule, never
// the value. Strings are never cut. TTLDays keeps the JSON text it came as
// (14, "14", and also 14.0, which JSON Schema counts as an integer).
func (g *Guard) DecodeCapsule(body []byte) (*capsule.Capsule, error) {
	c, err := g.decodeCapsule(body)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (g *Guard) decodeCapsule(body []byte) (*capsule.Capsule, *capsule.Error) {
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
	var c capsule.Capsule
	if err := json.Unmarshal(body, &c); err != nil {
		// Cannot happen once the schema passed; refuse rather than guess.
		return nil, capsule.Refuse(capsule.CodeInvalidCapsule, "", "does not decode as a capsule")
	}
	if len(c.Receipts) == 0 {
		c.Receipts = nil // [] and absent mean the same
	}
	if err := checkCapsuleControl(&c); err != nil {
		return nil, err
	}
	if err := g.checkCapsuleSecrets(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// CheckCapsule applies DecodeCapsule's checks to a capsule built in memory
// (POST /v1/capsule/seal): valid UTF-8 in every string, the schema on its
// JSON form, then the secret guard.
func (g *Guard) CheckCapsule(c *capsule.Capsule) error {
	if err := g.checkCapsule(c); err != nil {
		return err
	}
	return nil
}

func (g *Guard) checkCapsule(c *capsule.Capsule) *capsule.Error {
	if c == nil {
		return capsule.Refuse(capsule.CodeInvalidCapsule, "", "no capsule")
	}
	// json.Marshal would silently replace invalid UTF-8 with U+FFFD.
	for _, f := range capsuleStrings(c) {
		if !utf8.ValidString(f.value) {
			return capsule.Refuse(capsule.CodeInvalidUTF8, f.path, "is not valid UTF-8")
		}
	}
	if len(c.TTLDays) > 0 && !json.Valid(c.TTLDays) {
		return capsule.Refuse(capsule.CodeInvalidCapsule, "ttl_days", "is not a JSON value (type)")
	}
	if hugeExponent(c.TTLDays) {
		return ttlOutOfRange()
	}
	body, err := json.Marshal(c)
	if err != nil {
		return capsule.Refuse(capsule.CodeInvalidCapsule, "", "does not encode as JSON")
	}
	if err := g.validateCapsuleJSON(body); err != nil {
		return err
	}
	if err := checkCapsuleControl(c); err != nil {
		return err
	}
	return g.checkCapsuleSecrets(c)
}

// validateCapsuleJSON validates a well-formed body against the schema.
// The validator decides; explain then names the field and rule for people
// (the validator's own messages quote the value, which could be a secret).
func (g *Guard) validateCapsuleJSON(body []byte) *capsule.Error {
	var inst any
	if err := json.Unmarshal(body, &inst); err != nil {
		return capsule.Refuse(capsule.CodeInvalidJSON, "", "malformed JSON")
	}
	if g.schema.validator == nil {
		return noCapsuleSchema()
	}
	if err := g.schema.validator.Validate(inst); err == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // exact numbers for the explanation
	var exact any
	if err := dec.Decode(&exact); err != nil {
		return capsule.Refuse(capsule.CodeInvalidCapsule, "", "fails the Continuity Capsule v1 schema")
	}
	if e := explain(g.schema.tree, exact, ""); e != nil {
		return e
	}
	return capsule.Refuse(capsule.CodeInvalidCapsule, "", "fails the Continuity Capsule v1 schema")
}

// explain walks an instance against a schema tree (the keywords the capsule
// schema uses: type, enum, maxLength, maxItems, items, properties,
// additionalProperties, required) and returns the first failure in a
// stable order, naming the field and rule but never the value.
func explain(s *schemaNode, v any, field string) *capsule.Error {
	const code = capsule.CodeInvalidCapsule
	if s == nil {
		return nil
	}
	if s.never {
		return capsule.Refuse(code, field, "is not a Continuity Capsule v1 property (additionalProperties: false)")
	}
	if types := s.Type; len(types) > 0 {
		got := jsonTypeOf(v)
		ok := false
		for _, t := range types {
			ok = ok || t == got || (t == "number" && got == "integer")
		}
		if !ok {
			return capsule.Refuse(code, field, "must be %s, got %s (type)", strings.Join(types, " or "), got)
		}
	}
	if s.Enum != nil {
		ok := false
		for _, e := range s.Enum {
			ok = ok || fmt.Sprint(e) == fmt.Sprint(v)
		}
		if !ok {
			want := make([]string, 0, len(s.Enum))
			for _, w := range s.Enum {
				b, _ := json.Marshal(w)
				want = append(want, string(b))
			}
			return capsule.Refuse(code, field, "must be one of %s (enum)", strings.Join(want, ", "))
		}
	}
	switch x := v.(type) {
	case string:
		if s.MaxLength != nil {
			if n := utf8.RuneCountInString(x); n > *s.MaxLength {
				return capsule.Refuse(code, field, "is %d characters; the schema allows at most %d (maxLength %d); nothing is ever cut", n, *s.MaxLength, *s.MaxLength)
			}
		}
	case []any:
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return capsule.Refuse(code, field, "has %d items; the schema allows at most %d (maxItems %d)", len(x), *s.MaxItems, *s.MaxItems)
		}
		for i, item := range x {
			if e := explain(s.Items, item, indexPath(field, i)); e != nil {
				return e
			}
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return capsule.Refuse(code, joinPath(field, r), "is required (required)")
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, declared := s.Properties[k]
			if !declared {
				if s.AdditionalProperties == nil {
					continue
				}
				if e := explain(s.AdditionalProperties, x[k], joinPath(field, k)); e != nil {
					if !isSafeName(k) {
						return capsule.Refuse(code, field, "carries a property that is not a Continuity Capsule v1 property, whose name is not shown (additionalProperties: false)")
					}
					return e
				}
				continue
			}
			if e := explain(sub, x[k], joinPath(field, k)); e != nil {
				return e
			}
		}
	}
	return nil
}

// jsonTypeOf is the JSON Schema type of a value decoded with UseNumber; a
// number with a zero fraction is an integer, as the specification says.
func jsonTypeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
			return "integer"
		}
		return "number"
	default:
		return "unknown"
	}
}

// capsuleField is one string of a capsule with its path.
type capsuleField struct{ path, value string }

// capsuleStrings lists every string a capsule carries, by JSON path.
func capsuleStrings(c *capsule.Capsule) []capsuleField {
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

// checkCapsuleControl refuses a capsule string holding a control character
// (firstControl), as every other stored text is: the published schema
// leaves them open, but a capsule is shown in terminals and prompts.
func checkCapsuleControl(c *capsule.Capsule) *capsule.Error {
	for _, f := range capsuleStrings(c) {
		if err := checkControl(f.value, capsule.CodeInvalidCapsule, f.path); err != nil {
			return err
		}
	}
	return nil
}

// checkCapsuleSecrets runs the secret guard over every string of a capsule.
func (g *Guard) checkCapsuleSecrets(c *capsule.Capsule) *capsule.Error {
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

func ttlOutOfRange() *capsule.Error {
	return capsule.Refuse(capsule.CodeInvalidCapsule, "ttl_days", "is out of range: write a whole number of days (type)")
}
