// Package ops is the local API's one table of operations, with every
// request and answer of its operations. Each entry names an operation (its
// method and path, its request and answer types, its query parameters, the
// error codes it may answer, a one-line summary) and the doors it has: the
// HTTP route, the MCP tool, the CLI command. daemon/api registers its
// routes from the table (a handler per operation name), daemon/mcpserver
// lists its tools from it, and the CLI calls the daemon through its typed
// endpoints, decoding answers into the very types the daemon encodes.
// Adding an operation is one entry here and one handler in daemon/api.
//
// It imports only the capsule package and the standard library, so the
// light client (cmd/continuityd, which an agent starts at every hook)
// links the API's types without linking the daemon; the daemon's packages
// answer with these types, under their own names (type aliases).
package ops

import (
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// None is the request type of an operation that takes no body, and the
// answer type of one whose answer is not JSON (/metrics, /mcp).
type None struct{}

// Param is a query or path parameter.
type Param struct {
	Name string
	// In is "query" or "path".
	In string
	// Type is the JSON Schema type of its value: boolean, integer or
	// string (a query's booleans are 1, 0, true or false).
	Type    string
	Summary string
	// Min and Max bound an integer's value (both zero: unbounded).
	Min, Max int64
}

// Op is one operation as the table describes it, without Go type
// parameters: what the routes, the tool list, the tests and a generator
// (OpenAPI) read.
type Op struct {
	// Name is the operation's one name: daemon/api's handler is found by
	// it, and the tests and the OpenAPI document (operationId) use it.
	Name    string
	Method  string
	Path    string // a net/http pattern path: /v1/snapshots/{id}
	Summary string
	// Agent is set for an operation on one agent: it takes ?agent= and
	// ?cwd= (which agent; the only one when neither is given) and may answer
	// the codes of AgentErrors.
	Agent bool
	// Params are its query and path parameters (agent and cwd included
	// where Agent is set).
	Params []Param
	// Request is the zero value of its body's Go type; nil: no body.
	Request any
	// Answer is the zero value of its JSON answer's Go type; nil when the
	// answer is not JSON (AnswerMedia says what it is; "" : no body).
	Answer      any
	AnswerMedia string
	// Errors are the error codes it may answer (each with the status
	// capsule.StatusOf gives), beyond the ones every route may answer.
	Errors []string
	// When is set for a second answer of another entry's route: the query
	// (name=value) that selects it, e.g. diff=1 on GET /v1/snapshots/{id}.
	// Such an entry has no handler of its own: the route's handler answers.
	When string
	// BodyOptional says an empty body is an empty request (the body's
	// fields may all be left out, and so may the body).
	BodyOptional bool
	// MCP is its MCP tool; nil: none.
	MCP *Tool
	// CLI are the command lines that call it (`continuityd capsule show`
	// is "capsule show"); none for an operation only tools and people
	// with curl use.
	CLI []string
	// waits is what the call waits by design beyond an ordinary answer (a
	// long poll, a synced checkpoint): the client allows for it.
	waits func(q url.Values) time.Duration
}

// Tool is an operation's MCP tool: its name, what MCP clients are told of
// it, and how its arguments become the operation's request. Its arguments
// are agent (on an operation on one agent), the operation's parameters
// Params names, and the request body: the body's fields as arguments of
// their own or, with BodyIn set, the whole body as that one argument.
// daemon/mcpserver makes the tool's input schema from these: the
// parameters' entries and the request's Go type, the type the OpenAPI
// document describes the body with.
type Tool struct {
	Name, Title, Description string
	// Params are the names of the operation's parameters (query or path)
	// the tool takes as arguments, besides agent.
	Params []string
	// BodyIn names the one argument that is the request body; "": the
	// body's fields are the tool's arguments.
	BodyIn string
	// Defaults are arguments, as JSON, that a call leaving them out is
	// given (a signal's via, the newest snapshot's id).
	Defaults map[string]string
}

// Waits is how long a call of the operation with query q waits by design,
// beyond an ordinary answer.
func (o Op) Waits(q url.Values) time.Duration {
	if o.waits == nil {
		return 0
	}
	return o.waits(q)
}

// Pattern is the operation's net/http ServeMux pattern.
func (o Op) Pattern() string { return o.Method + " " + o.Path }

// RequestType and AnswerType are the reflect.Types of Request and Answer
// (nil for none).
func (o Op) RequestType() reflect.Type { return typeOf(o.Request) }
func (o Op) AnswerType() reflect.Type  { return typeOf(o.Answer) }

func typeOf(v any) reflect.Type {
	if v == nil {
		return nil
	}
	return reflect.TypeOf(v)
}

// Codes every operation on one agent may answer: which agent, and whether
// it is served to this peer.
var agentErrors = []string{
	capsule.CodeUnknownAgent, capsule.CodeAgentRequired, capsule.CodeAgentForbidden,
	capsule.CodeAgentDamaged, capsule.CodeAgentMoved,
}

// Codes every operation with a body may answer: the body as a whole.
var bodyErrors = []string{
	capsule.CodeInvalidJSON, capsule.CodeInvalidUTF8, capsule.CodeUnknownField,
	capsule.CodeInvalidField, capsule.CodeBodyTooLarge, capsule.CodeRequestTimeout,
}

// Codes a write may answer: stored or not.
var writeErrors = []string{capsule.CodeShuttingDown, capsule.CodeDiskFull, capsule.CodeSpoolFull, capsule.CodeInternal}

// Codes of a snapshot operation.
var snapshotErrors = []string{capsule.CodeSnapshotsOff, capsule.CodeNotFound, capsule.CodeFleetSnapshotDamaged, capsule.CodeInternal}

// Param sets several operations share.
var (
	agentParams = []Param{
		{Name: "agent", In: "query", Type: "string", Summary: "the agent; may be left out when the daemon serves one"},
		{Name: "cwd", In: "query", Type: "string", Summary: "pick the agent whose workdir holds this directory"},
	}
	snapshotID = Param{Name: "id", In: "path", Type: "string", Summary: "a snapshot id, a unique prefix of 7+ characters, or latest"}
)

// Endpoint is an operation with its request (Req) and answer (Ans) Go
// types: the typed door the clients call it through (Call).
type Endpoint[Req, Ans any] struct{ op Op }

// Op is the table's entry.
func (e Endpoint[Req, Ans]) Op() Op { return e.op }

// endpoint makes an operation's entry: its request and answer types come
// from the type parameters (None: no body, no JSON answer), the codes every
// operation of its kind may answer are added to its own.
func endpoint[Req, Ans any](o Op) Endpoint[Req, Ans] {
	if _, none := any(*new(Req)).(None); !none {
		o.Request = *new(Req)
		o.Errors = append(append([]string{}, bodyErrors...), o.Errors...)
	}
	if _, none := any(*new(Ans)).(None); !none {
		o.Answer = *new(Ans)
		o.AnswerMedia = "application/json"
	}
	if o.Agent {
		o.Params = append(append([]Param{}, agentParams...), o.Params...)
		o.Errors = append(append([]string{}, agentErrors...), o.Errors...)
	}
	o.Errors = dedupe(o.Errors)
	if o.Method == "" {
		o.Method = http.MethodGet
	}
	return Endpoint[Req, Ans]{op: o}
}

func dedupe(codes []string) []string {
	seen := map[string]bool{}
	out := codes[:0:0]
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}
