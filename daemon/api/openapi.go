package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/openapi"
)

// OpenAPIDocument is the OpenAPI 3.1 description of the local API, as
// GET /v1/openapi.json serves it and docs/openapi.json keeps it. It does
// not depend on the running daemon (info.version is the API's, v1).
func OpenAPIDocument() ([]byte, error) {
	capsuleSchema := new(jsonschema.Schema)
	if err := json.Unmarshal(guard.CapsuleSchemaJSON, capsuleSchema); err != nil {
		return nil, err
	}
	return openapi.Document(openapi.Info{
		Title:   "continuityd local API",
		Version: "1",
		Description: "HTTP/1.1 over the daemon's Unix socket (or its optional loopback listener, " +
			"which needs Authorization: Bearer <api.token from the state directory>). " +
			"Request bodies are strict JSON: an unknown field, a duplicate key or a wrong type is refused. " +
			"/mcp (MCP Streamable HTTP) is described by the MCP specification, not here.",
		ErrorBody:  errorBody{},
		BearerAuth: "the loopback listener's token (api.token in the state directory); the Unix socket needs none",
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{
			reflect.TypeFor[capsule.NullableString](): {Types: []string{"null", "string"}},
			reflect.TypeFor[config.Duration]():        {Type: "string"},
		},
	}, operations(capsuleSchema))
}

// The refusals an operation may answer with, by what it does.
var (
	// anyRefusals: the loopback listener's token, Host and Origin checks,
	// and a handler's bug.
	anyRefusals = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError}
	// agentRefusals: picking the agent (?agent=, ?cwd=) and a query.
	agentRefusals = append(slices.Clone(anyRefusals), http.StatusBadRequest, http.StatusNotFound,
		http.StatusConflict, http.StatusServiceUnavailable)
	// bodyRefusals: reading and storing a body.
	bodyRefusals = append(slices.Clone(agentRefusals), http.StatusRequestTimeout,
		http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage)
	// snapshotRefusals: the snapshot store, here or fetched from a fleet.
	snapshotRefusals = append(slices.Clone(bodyRefusals), http.StatusBadGateway)
)

// agentQuery are the query parameters of every operation on one agent.
var agentQuery = []openapi.Param{
	{Name: "agent", Description: "the agent; optional when the daemon serves one, or when cwd picks it"},
	{Name: "cwd", Description: "a directory: the agent whose workdir holds it"},
}

// boolParam is a query flag as boolQuery reads it.
func boolParam(name, description string) openapi.Param {
	return openapi.Param{Name: name, Description: description, Schema: &jsonschema.Schema{
		Type: "string", Enum: []any{"1", "0", "t", "f", "T", "F", "true", "false", "TRUE", "FALSE", "True", "False"},
	}}
}

func withAgent(ps ...openapi.Param) []openapi.Param {
	return append(slices.Clone(agentQuery), ps...)
}

// sealRequestSchema is the body of POST /v1/capsule/seal, as
// guard.DecodeSealRequest reads it.
func sealRequestSchema() *jsonschema.Schema {
	text := func() *jsonschema.Schema { return &jsonschema.Schema{Types: []string{"null", "string"}} }
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"goal": text(), "done": text(), "next": text(), "blockers": text(),
			"do_not": text(), "refuted": text(), "handoff_to": text(),
			"receipts": {Types: []string{"null", "array"}, Items: &jsonschema.Schema{Type: "string"}},
			"ttl_days": {Description: "as the capsule's schema takes it"},
		},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

// operations are the local API's operations. (A hand-made list for now;
// the table of operations will make it.)
func operations(capsuleSchema *jsonschema.Schema) []openapi.Operation {
	type entries struct {
		Entries []residency.DeadLetter `json:"entries"`
	}
	type snapshots struct {
		Snapshots []snapshot.Snapshot `json:"snapshots"`
	}
	type health struct {
		OK      bool   `json:"ok"`
		Version string `json:"version"`
	}
	return []openapi.Operation{
		{ID: "resume", Method: "GET", Path: "/v1/continuity", Summary: "where the agent was: the resume document",
			Query: withAgent(boolParam("peek", "read without resetting since_last_visit"),
				boolParam("local", "answer from the daemon's own state at once, with the upstreams' views as last fetched")),
			Answer: capsule.Resume{}, Errors: agentRefusals},
		{ID: "checkpoint", Method: "POST", Path: "/v1/continuity/checkpoint", Summary: "store the agent's checkpoint, durable before 200",
			Query:   withAgent(boolParam("sync", "wait (bounded) for the upstreams and report their answers")),
			Request: capsule.Checkpoint{}, Answer: agent.CheckpointAnswer{}, Errors: bodyRefusals},
		{ID: "wait", Method: "GET", Path: "/v1/continuity/wait", Summary: "long poll for the agent's events",
			Query: withAgent(
				openapi.Param{Name: "max_seconds", Description: "how long to wait", Schema: &jsonschema.Schema{Type: "string", Pattern: "^(0*[1-9]|0*[1-8][0-9]|0*90)$"}},
				openapi.Param{Name: "after", Description: "the cursor of a previous answer", Schema: &jsonschema.Schema{Type: "string", Pattern: "^[0-9]+$"}}),
			Answer: agent.WaitAnswer{}, Errors: agentRefusals},
		{ID: "getCapsule", Method: "GET", Path: "/v1/capsule", Summary: "the agent's latest capsule",
			Query: withAgent(), Answer: capsule.CapsuleRecord{}, Errors: agentRefusals},
		{ID: "putCapsule", Method: "PUT", Path: "/v1/capsule", Summary: "store a Continuity Capsule v1",
			Query: withAgent(), Request: capsuleSchema, Answer: agent.CapsuleAnswer{}, Errors: bodyRefusals},
		{ID: "sealCapsule", Method: "POST", Path: "/v1/capsule/seal", Summary: "build a capsule from the current state and receipts, and store it",
			Query: withAgent(), Request: sealRequestSchema(), RequestOptional: true, Answer: agent.CapsuleAnswer{}, Errors: bodyRefusals},
		{ID: "signal", Method: "POST", Path: "/v1/signals", Summary: "a context signal",
			Query: withAgent(), Request: capsule.Signal{}, Answer: agent.SignalAnswer{}, Errors: bodyRefusals},
		{ID: "deadLetters", Method: "GET", Path: "/v1/deadletter", Summary: "the writes upstreams refused for good",
			Query:  withAgent(openapi.Param{Name: "upstream", Description: "one upstream's only"}),
			Answer: entries{}, Errors: agentRefusals},
		{ID: "retryDeadLetters", Method: "POST", Path: "/v1/deadletter/retry", Summary: "send dead letters again",
			Query: withAgent(), Request: guard.DeadLetterRequest{}, OptionalFields: []string{"seq"},
			Answer: struct {
				Retried int `json:"retried"`
			}{}, Errors: bodyRefusals},
		{ID: "discardDeadLetters", Method: "POST", Path: "/v1/deadletter/discard", Summary: "drop dead letters",
			Query: withAgent(), Request: guard.DeadLetterRequest{}, OptionalFields: []string{"seq"},
			Answer: struct {
				Discarded int `json:"discarded"`
			}{}, Errors: bodyRefusals},
		{ID: "listSnapshots", Method: "GET", Path: "/v1/snapshots", Summary: "the agent's work snapshots, newest first",
			Query: withAgent(), Answer: snapshots{}, Errors: snapshotRefusals},
		{ID: "showSnapshot", Method: "GET", Path: "/v1/snapshots/{id}", Summary: "one snapshot with its files, or its diff",
			Query: withAgent(boolParam("diff", "the unified diff against its parent instead"),
				openapi.Param{Name: "against", Description: "with diff: the snapshot to compare with"},
				openapi.Param{Name: "max_bytes", Description: "with diff: the bound of the diff", Schema: &jsonschema.Schema{Type: "string", Pattern: "^[0-9]+$"}}),
			Answer: openapi.OneOf{snapshot.Detail{}, agent.DiffAnswer{}}, Errors: snapshotRefusals},
		{ID: "restoreSnapshot", Method: "POST", Path: "/v1/snapshots/{id}/restore", Summary: "what a restore would change, or do it",
			Query: withAgent(), Request: guard.RestoreRequest{}, RequestOptional: true, OptionalFields: []string{"paths", "dry_run"},
			Answer: snapshot.RestoreResult{}, Errors: snapshotRefusals},
		{ID: "status", Method: "GET", Path: "/v1/status", Summary: "the daemon's state",
			Answer: Status{}, Errors: anyRefusals},
		{ID: "fleet", Method: "GET", Path: "/v1/fleet", Summary: "the agents a fleet upstream knows",
			Query:  []openapi.Param{{Name: "upstream", Description: "the fleet upstream; optional when there is one"}},
			Answer: FleetAnswer{}, Errors: append(slices.Clone(anyRefusals), http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable)},
		{ID: "health", Method: "GET", Path: "/healthz", Summary: "liveness",
			Answer: health{}, Errors: anyRefusals},
		{ID: "metrics", Method: "GET", Path: "/metrics", Summary: "Prometheus metrics",
			Answer: &jsonschema.Schema{Type: "string"}, AnswerType: "text/plain", Errors: append(slices.Clone(anyRefusals), http.StatusNotFound)},
		{ID: "openapi", Method: "GET", Path: "/v1/openapi.json", Summary: "this document",
			Answer: &jsonschema.Schema{Type: "object"}, Errors: anyRefusals},
	}
}

// handleOpenAPI is GET /v1/openapi.json.
func (a *API) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := a.openAPI()
	if err != nil {
		writeError(w, capsule.Refuse(capsule.CodeInternal, "", "the OpenAPI document could not be made: %v", err))
		return
	}
	writeBody(w, http.StatusOK, doc)
}
