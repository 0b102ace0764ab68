package capsule

import _ "embed"

// SchemaJSON is the published Continuity Capsule v1 JSON Schema, byte for
// byte (see continuity-capsule-v1.SOURCE.md). The daemon serves it,
// capsule/schema compiles it for validation, and capsule/guard reads it
// to name the field a capsule fails on. Callers must treat it as
// read-only.
//
//go:embed continuity-capsule-v1.schema.json
var SchemaJSON []byte
