package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/events"
)

// Wait bounds, from the Q-Day seed.
const (
	waitDefault = 20
	waitMax     = 90
	// syncTimeout bounds ?sync=1: how long a checkpoint waits for its
	// upstreams before answering with what it knows.
	syncTimeout = 10 * time.Second
)

// handleResume is GET /v1/continuity. The agent's own read resets
// since_last_visit; ?peek=1 reads without resetting (for people and tools).
func (d *Daemon) handleResume(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	peek, err := boolQuery(r, "peek")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.resume(r.Context(), !peek))
}

// checkpointAnswer is the answer to a checkpoint: its sequence number, the
// saved state, and with ?sync=1 what each upstream did.
type checkpointAnswer struct {
	Seq   uint64           `json:"seq"`
	State json.RawMessage  `json:"state"` // capsule.Resume, as the store encoded it
	Sync  []syncedUpstream `json:"sync,omitempty"`
}

// appendJSON encodes the answer as encoding/json would, without scanning
// the state again: the store made it and it is most of the answer.
func (ans *checkpointAnswer) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, ans.Seq, 10)
	b = append(b, `,"state":`...)
	b = append(b, ans.State...)
	if len(ans.Sync) > 0 {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(ans.Sync); err != nil {
			return nil, err
		}
		b = append(b, `,"sync":`...)
		b = append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	return append(b, "}\n"...), nil
}

type syncedUpstream struct {
	Name      string  `json:"name"`
	Delivered bool    `json:"delivered"`
	State     string  `json:"state"`
	Error     *string `json:"error"`
}

// handleCheckpoint is POST /v1/continuity/checkpoint.
func (d *Daemon) handleCheckpoint(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	sync, qerr := boolQuery(r, "sync")
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	cp, err := st.guard.DecodeCheckpoint(body)
	if err != nil {
		writeError(w, err)
		return
	}
	seq, err := a.store.Checkpoint(r.Context(), cp, capsule.OriginExplicit)
	if err != nil {
		writeError(w, err)
		return
	}
	ans := checkpointAnswer{Seq: seq}
	if sync {
		ans.Sync = a.waitSynced(r.Context(), seq)
	}
	// The saved state, from the residency alone: an answer to a write never
	// waits on an upstream's own view (resume has that).
	if ans.State, err = a.store.StateJSON(); err == nil {
		var out []byte
		if out, err = ans.appendJSON(make([]byte, 0, len(ans.State)+64)); err == nil {
			writeBody(w, http.StatusOK, out)
			return
		}
	}
	writeError(w, capsule.RefuseStatus(http.StatusInternalServerError, capsule.CodeInternal, "",
		"the write was stored (seq %d) but the answer could not be encoded: %v", seq, err))
}

// waitSynced waits (bounded) for every upstream to take seq.
func (a *agent) waitSynced(ctx context.Context, seq uint64) []syncedUpstream {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	out := make([]syncedUpstream, len(a.shippers))
	done := make(chan struct{})
	for i, s := range a.shippers {
		go func() {
			defer func() { done <- struct{}{} }()
			err := s.WaitDelivered(ctx, seq)
			st := s.State()
			out[i] = syncedUpstream{Name: st.Name, Delivered: err == nil, State: st.State, Error: st.LastError}
		}()
	}
	for range a.shippers {
		<-done
	}
	return out
}

// waitAnswer is the answer to a long poll.
type waitAnswer struct {
	Woke   string         `json:"woke"` // event or timeout
	Events []events.Event `json:"events"`
	Cursor uint64         `json:"cursor"`
	Scope  string         `json:"directions_scope"`
}

// handleWait is GET /v1/continuity/wait?max_seconds=N[&after=CURSOR]. Without
// `after` it waits for the next event; with the cursor of a previous answer
// it returns what happened since, at once if anything did.
func (d *Daemon) handleWait(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	q := r.URL.Query()
	secs := waitDefault
	if v := q.Get("max_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > waitMax {
			writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "max_seconds",
				"max_seconds must be an integer from 1 to %d", waitMax))
			return
		}
		secs = n
	}
	after := a.feed.Cursor()
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "after",
				"after must be the cursor of a previous answer (a non-negative integer)"))
			return
		}
		after = n
	}
	extendWriteDeadline(w, time.Duration(secs)*time.Second+writeMargin)
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(secs)*time.Second)
	defer cancel()
	evs, cursor := a.feed.Wait(ctx, after)
	ans := waitAnswer{Woke: "event", Events: evs, Cursor: cursor, Scope: "agent_events"}
	if len(evs) == 0 {
		ans.Woke, ans.Events = "timeout", []events.Event{}
	}
	writeJSON(w, http.StatusOK, ans)
}

// boolQuery reads an optional boolean query parameter (1/0/true/false).
func boolQuery(r *http.Request, name string) (bool, *capsule.Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, capsule.Refuse(capsule.CodeInvalidQuery, name, "%s must be 1, 0, true or false", name)
	}
	return b, nil
}
