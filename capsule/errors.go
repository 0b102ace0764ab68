package capsule

import "fmt"

// Codes of refusals. The first group is the Q-Day seed's own (same names,
// same statuses); the rest are continuityd's, for input the seed leaves open.
// StatusOf is the one table of the HTTP status each travels with (the
// README's error table is checked against it).
const (
	CodeInvalidPublicStatus = "INVALID_PUBLIC_STATUS" // 400
	CodeInvalidWorkingState = "INVALID_WORKING_STATE" // 400
	CodeMotiveRequired      = "MOTIVE_REQUIRED"       // 400
	CodeTooManyOpenLoops    = "TOO_MANY_OPEN_LOOPS"   // 400
	CodeEvidenceRequired    = "EVIDENCE_REQUIRED"     // 400
	CodeResidencyStopped    = "RESIDENCY_STOPPED"     // 409

	CodeInvalidCapsule    = "INVALID_CAPSULE"    // 400: fails the published JSON Schema
	CodeSecretDetected    = "SECRET_DETECTED"    // 400: a credential-shaped value
	CodeInvalidJSON       = "INVALID_JSON"       // 400: not one well-formed JSON object
	CodeInvalidUTF8       = "INVALID_UTF8"       // 400: the body is not valid UTF-8
	CodeUnknownField      = "UNKNOWN_FIELD"      // 400: a field the API does not define
	CodeInvalidField      = "INVALID_FIELD"      // 400: a field of the wrong type or value
	CodeInvalidFocus      = "INVALID_FOCUS"      // 400: focus too long
	CodeInvalidDecision   = "INVALID_DECISION"   // 400: decide without chosen, or too long
	CodeInvalidCommitment = "INVALID_COMMITMENT" // 400: a malformed commitment operation
	CodeUnknownCommitment = "UNKNOWN_COMMITMENT" // 400: close/drop of an id that is not open
	CodeInvalidStop       = "INVALID_STOP"       // 400: stop without a reason
	CodeEmptyCheckpoint   = "EMPTY_CHECKPOINT"   // 400: a checkpoint that carries nothing
	CodeInvalidSignal     = "INVALID_SIGNAL"     // 400: a malformed context signal
	CodeBodyTooLarge      = "BODY_TOO_LARGE"     // 413
	CodeNoCapsule         = "NO_CAPSULE"         // 404: nothing stored yet
	CodeNotFound          = "NOT_FOUND"          // 404: no such path
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED" // 405
	CodeUnknownAgent      = "UNKNOWN_AGENT"      // 404
	CodeAgentRequired     = "AGENT_REQUIRED"     // 400: several agents and no ?agent=
	CodeInvalidQuery      = "INVALID_QUERY"      // 400: a bad query parameter
	CodeUnauthorized      = "UNAUTHORIZED"       // 401: loopback listener without the token
	CodeForbiddenOrigin   = "FORBIDDEN_ORIGIN"   // 403: a browser page from another origin
	CodeForbiddenHost     = "FORBIDDEN_HOST"     // 403: loopback listener asked for another host name (DNS rebinding)
	CodeSpoolFull         = "SPOOL_FULL"         // 507: the outbox is full
	CodeDiskFull          = "DISK_FULL"          // 507: the state directory's disk is full; nothing was saved
	CodeShuttingDown      = "SHUTTING_DOWN"      // 503: the daemon is stopping
	CodeAgentDamaged      = "AGENT_DAMAGED"      // 503: the agent's files are damaged; an operator must accept the loss
	CodeInternal          = "INTERNAL"           // 500: a bug or a disk failure; nothing was saved
	CodeAgentMoved        = "AGENT_MOVED"        // 409: the agent's state belongs to another workdir (package place)

	// Bounds on connections and MCP sessions: nothing is held open for ever.
	CodeRequestTimeout    = "REQUEST_TIMEOUT"     // 408: the body did not arrive in time
	CodeMCPSessionsFull   = "MCP_SESSIONS_FULL"   // 503: /mcp is at daemon.mcp_max_sessions
	CodeInvalidMCPRequest = "INVALID_MCP_REQUEST" // 400: a request the MCP transport refuses
	CodeUnsupportedMedia  = "UNSUPPORTED_MEDIA"   // 415: an MCP request whose body is not JSON
	// 503: the socket holds as many connections as one user, or all
	// users, may hold open.
	CodeTooManyConnections = "TOO_MANY_CONNECTIONS"

	// The fleet.
	CodeFleetUnavailable = "FLEET_UNAVAILABLE" // 503: the fleet upstream (nats, or a Delx fleet) did not answer
	// 409: another machine took the agent over (`continuityd fleet take`):
	// this daemon no longer writes it.
	CodeAgentHandedOver = "AGENT_HANDED_OVER"
	// 409: `fleet take` refused: the agent's writer was seen within the
	// conflict window (--force overrides), another taker won the race, or
	// there is nothing to take.
	CodeFleetTakeRefused = "FLEET_TAKE_REFUSED"

	// Delx fleets: reading a fellow member's capsule.
	CodeNoDelxFleet          = "NO_DELX_FLEET"          // 409: the agent is in no Delx fleet ([agent.delx_fleet.UPSTREAM])
	CodeFleetReadRefused     = "FLEET_READ_REFUSED"     // 403: Delx refused the read (not a member, a wrong invite token, an unknown fleet); the message carries Delx's code
	CodeRemoteCapsuleInvalid = "REMOTE_CAPSULE_INVALID" // 502: the member's capsule from Delx fails the schema or the guards; nothing of it is shown

	// Per-agent access on a shared socket.
	CodeAgentForbidden = "AGENT_FORBIDDEN" // 403: the socket's peer is not one of the agent's users

	// What the fleet sends is untrusted.
	CodeFleetSnapshotDamaged = "FLEET_SNAPSHOT_DAMAGED" // 502: a snapshot fetched from the fleet is damaged or forged; nothing of it was kept
)

// Error is a refusal: a stable code, the HTTP status it travels with, the
// field at fault (dotted path, empty when the whole body is at fault) and a
// message for people. A message never repeats a refused value that might be
// a secret.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// StatusOf is the HTTP status a refusal with code travels with; 0 for a
// code this package does not define.
func StatusOf(code string) int {
	switch code {
	case CodeInvalidPublicStatus, CodeInvalidWorkingState, CodeMotiveRequired, CodeTooManyOpenLoops,
		CodeEvidenceRequired, CodeInvalidCapsule, CodeSecretDetected, CodeInvalidJSON, CodeInvalidUTF8,
		CodeUnknownField, CodeInvalidField, CodeInvalidFocus, CodeInvalidDecision, CodeInvalidCommitment,
		CodeUnknownCommitment, CodeInvalidStop, CodeEmptyCheckpoint, CodeInvalidSignal, CodeAgentRequired,
		CodeInvalidQuery, CodeInvalidMCPRequest:
		return 400
	case CodeUnauthorized:
		return 401
	case CodeForbiddenOrigin, CodeForbiddenHost, CodeAgentForbidden, CodeFleetReadRefused:
		return 403
	case CodeNoCapsule, CodeNotFound, CodeUnknownAgent:
		return 404
	case CodeMethodNotAllowed:
		return 405
	case CodeRequestTimeout:
		return 408
	case CodeResidencyStopped, CodeAgentMoved, CodeWhoseUnknown, CodeNoDelxFleet, CodeAgentHandedOver, CodeFleetTakeRefused:
		return 409
	case CodeBodyTooLarge:
		return 413
	case CodeUnsupportedMedia:
		return 415
	case CodeInternal:
		return 500
	case CodeFleetSnapshotDamaged, CodeRemoteCapsuleInvalid:
		return 502
	case CodeShuttingDown, CodeAgentDamaged, CodeMCPSessionsFull, CodeFleetUnavailable, CodeSnapshotsOff, CodeTooManyConnections:
		return 503
	case CodeSpoolFull, CodeDiskFull:
		return 507
	}
	return 0
}

// Refuse builds the Error for code (with its status from StatusOf) and
// field, with a formatted message.
func Refuse(code, field, format string, args ...any) *Error {
	return &Error{Status: StatusOf(code), Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Work snapshots.
const (
	CodeSnapshotsOff = "SNAPSHOTS_UNAVAILABLE" // 503: work snapshots are off, or git is missing or failing; the message says why
	// 409: a restore without paths keeps to the agent's own files, and who
	// changed what since the snapshot is not known; paths or all says what
	// to restore.
	CodeWhoseUnknown = "WHOSE_UNKNOWN"
)
