package asowner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// The calls a worker serves, one path each (POST /NAME): the store's
// operations and the worker's own (open, close of a store).
const (
	opOpen          = "open"
	opClose         = "close"
	opTake          = "take"
	opRestore       = "restore"
	opList          = "list"
	opShow          = "show"
	opDiff          = "diff"
	opBetween       = "between"
	opNewest        = "newest"
	opLookup        = "lookup"
	opProgress      = "progress"
	opGCProblem     = "gc_problem"
	opFollow        = "follow"
	opUnfollow      = "unfollow"
	opNoteChanged   = "note_changed"
	opNoteUnknown   = "note_unknown"
	opObjects       = "objects"
	opReadObjects   = "read_objects"
	opReceiveObject = "receive_object"
	opImport        = "import"
	opHold          = "hold"
	opRelease       = "release"
	opMissing       = "missing"
	opWorkdir       = "workdir_problem"
	opInterrupted   = "interrupted"
)

// Bounds of what crosses the wire.
const (
	// maxAnswer bounds a JSON answer of the worker (a Show lists at most
	// snapshot.MaxShowFiles files, a Diff what the caller bounds).
	maxAnswer = 64 << 20
	// maxRequest bounds a JSON request the worker reads (paths, ids).
	maxRequest = 64 << 20
	// maxMessage bounds an error message kept from the worker.
	maxMessage = 4096
)

// request is every call's body: the store it names and the arguments of
// its operation (the others left empty).
type request struct {
	Store        uint64                 `json:"store,omitempty"`
	Options      *snapshot.Options      `json:"options,omitempty"`
	Trigger      string                 `json:"trigger,omitempty"`
	Seq          uint64                 `json:"seq,omitempty"`
	Conversation *snapshot.Conversation `json:"conversation,omitempty"`
	Take         *snapshot.TakeOptions  `json:"take,omitempty"` // a Take's message
	ID           string                 `json:"id,omitempty"`
	Against      string                 `json:"against,omitempty"`
	From         string                 `json:"from,omitempty"`
	To           string                 `json:"to,omitempty"`
	Commit       string                 `json:"commit,omitempty"`
	Paths        []string               `json:"paths,omitempty"`
	IDs          []string               `json:"ids,omitempty"`
	DryRun       bool                   `json:"dry_run,omitempty"`
	Stat         bool                   `json:"stat,omitempty"` // a diff's --stat
	MaxBytes     int                    `json:"max_bytes,omitempty"`
	Hold         uint64                 `json:"hold,omitempty"`
	// ReceiveObject's object and size (its content is the body's rest).
	Object *snapshot.Object `json:"object,omitempty"`
	Size   int64            `json:"size,omitempty"`
}

// The answers that are not a snapshot package type.
type (
	openAnswer struct {
		Store uint64 `json:"store"`
	}
	takeAnswer struct {
		Snapshot snapshot.Snapshot `json:"snapshot"`
		New      bool              `json:"new"`
		Took     snapshot.Timings  `json:"took"`
	}
	listAnswer struct {
		Snapshots []snapshot.Snapshot `json:"snapshots"`
	}
	diffAnswer struct {
		Diff string `json:"diff"`
		Cut  bool   `json:"cut"`
	}
	betweenAnswer struct {
		Changes []snapshot.TreeChange `json:"changes"`
	}
	newestAnswer struct {
		Snapshot snapshot.Snapshot `json:"snapshot"`
		OK       bool              `json:"ok"`
	}
	problemAnswer struct {
		Problem string `json:"problem"`
	}
	objectsAnswer struct {
		Snapshot snapshot.Snapshot `json:"snapshot"`
		Objects  []snapshot.Object `json:"objects"`
	}
	holdAnswer struct {
		Hold uint64 `json:"hold"`
	}
	missingAnswer struct {
		Missing []string `json:"missing"`
	}
	interruptedAnswer struct {
		Restore snapshot.InterruptedRestore `json:"restore"`
		OK      bool                        `json:"ok"`
		Changes []string                    `json:"changes"`
	}
	empty struct{}
)

// wireError is a failed call's answer.
type wireError struct {
	Kind    string `json:"kind"`
	Code    string `json:"code,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// The kinds of wireError: the errors callers tell apart.
const (
	kindRefusal = "refusal" // a *capsule.Error
	kindClosed  = "closed"  // snapshot.ErrClosed
	kindDamaged = "damaged" // snapshot.ErrDamaged
	kindNoGit   = "no_git"  // snapshot.ErrGitUnavailable
	kindError   = "error"
)

// refusalCodes are the codes a worker's refusal may carry: those the
// snapshot store refuses with. Any other is garbage (a worker cannot make
// the daemon answer AGENT_FORBIDDEN, say).
var refusalCodes = map[string]bool{
	capsule.CodeNotFound:     true,
	capsule.CodeInvalidField: true,
	capsule.CodeSnapshotsOff: true,
	capsule.CodeAgentMoved:   true, // the workdir's path leads elsewhere now
}

// toWire is how the worker sends err.
func toWire(err error) wireError {
	var ce *capsule.Error
	switch {
	case errors.As(err, &ce):
		return wireError{Kind: kindRefusal, Code: ce.Code, Field: ce.Field, Message: ce.Message}
	case errors.Is(err, snapshot.ErrClosed):
		return wireError{Kind: kindClosed, Message: err.Error()}
	case errors.Is(err, snapshot.ErrDamaged):
		return wireError{Kind: kindDamaged, Message: err.Error()}
	case errors.Is(err, snapshot.ErrGitUnavailable):
		return wireError{Kind: kindNoGit, Message: err.Error()}
	}
	return wireError{Kind: kindError, Message: err.Error()}
}

// fromWire is the daemon's error for a worker's failed call: the kinds
// callers tell apart become their sentinels again, the message is
// escaped and bounded, and anything else is garbage.
func (w *Worker) fromWire(op string, raw []byte) error {
	var we wireError
	if err := decodeStrict(raw, &we); err != nil {
		return w.garbage(op, err)
	}
	msg := termsafe.Line(cut(we.Message, maxMessage))
	switch we.Kind {
	case kindRefusal:
		if !refusalCodes[we.Code] || strings.ContainsFunc(we.Field, notFieldRune) || len(we.Field) > 64 {
			return w.garbage(op, fmt.Errorf("a refusal with code %q field %q", cut(we.Code, 64), cut(we.Field, 64)))
		}
		return capsule.Refuse(we.Code, we.Field, "%s", msg)
	case kindClosed:
		return snapshot.ErrClosed
	case kindDamaged:
		return fmt.Errorf("%s (%s): %s: %w", w.name(), op, msg, snapshot.ErrDamaged)
	case kindNoGit:
		return fmt.Errorf("%s (%s): %s: %w", w.name(), op, msg, snapshot.ErrGitUnavailable)
	case kindError:
		return fmt.Errorf("%s (%s): %s", w.name(), op, msg)
	}
	return w.garbage(op, fmt.Errorf("an error of kind %q", cut(we.Kind, 64)))
}

// notFieldRune is a rune no field name of a refusal holds.
func notFieldRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.')
}

// cut bounds s to n bytes (a rune cut in two becomes U+FFFD on escaping).
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// decodeStrict decodes one JSON value, and nothing after it, into v: a
// field v does not have is an error.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// readBounded reads r whole, failing past limit bytes.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
}
