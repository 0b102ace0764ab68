// Package schema compiles the published Continuity Capsule v1 JSON Schema
// (capsule.SchemaJSON) into the validator capsule/guard checks every
// capsule with (guard.Options.CapsuleSchema).
//
// It is a package of its own so that a program that never validates a
// capsule does not link the JSON Schema library, whose package
// initialisation every process of a binary would pay: the continuityd
// front, which an agent starts at every hook, hands `capsule validate` to
// continuityd-daemon instead.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/continuityd/continuityd/capsule"
	"github.com/google/jsonschema-go/jsonschema"
)

// Compile resolves the published schema under its own $id. The validator
// is github.com/google/jsonschema-go (draft 2020-12, the one the MCP SDK
// uses); no loader is configured, so nothing is ever fetched. The result
// is safe for concurrent use.
func Compile() (*jsonschema.Resolved, error) {
	var tree jsonschema.Schema
	if err := json.Unmarshal(capsule.SchemaJSON, &tree); err != nil {
		return nil, fmt.Errorf("capsule schema: %w", err)
	}
	if tree.ID == "" {
		return nil, errors.New("capsule schema: the embedded schema has no $id")
	}
	rs, err := tree.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("capsule schema: %w", err)
	}
	return rs, nil
}
