package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/daemon/agent"
)

// handleResume is GET /v1/continuity. The agent's own read resets
// since_last_visit, once the answer has reached it (written and flushed
// while the client still waits: a client that gave up resets nothing);
// ?peek=1 reads without resetting (for people and tools). ?local=1 answers
// from the daemon's own state at once, with the upstreams' views as last
// fetched (a SessionStart hook has half a second; a resume that asks the
// upstreams may wait for them and their rate limits).
func (a *API) handleResume(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	peek, err := boolQuery(r, "peek")
	if err != nil {
		writeError(w, err)
		return
	}
	local, err := boolQuery(r, "local")
	if err != nil {
		writeError(w, err)
		return
	}
	buf := resumeBufs.Get().(*[]byte)
	defer resumeBufs.Put(buf)
	raw, visit, eerr := ag.ResumeJSON(r.Context(), agent.ResumeOptions{Local: local}, (*buf)[:0])
	if r.Context().Err() != nil {
		return // the client is gone: nobody to answer, no visit
	}
	if eerr != nil {
		writeError(w, capsule.Refuse(capsule.CodeInternal, "", "the resume could not be encoded: %v", eerr))
		return
	}
	*buf = raw
	writeBody(w, http.StatusOK, raw)
	// Delivered: the answer left in full. A client that closes as soon as
	// it has read it (a hook) may cancel the context right after; that is
	// no reason to count the visit undone.
	if !peek && http.NewResponseController(w).Flush() == nil {
		ag.Visited(visit)
	}
}

// resumeBufs are the buffers resume answers are encoded in: each is
// written out before the handler returns it.
var resumeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// handleCheckpoint is POST /v1/continuity/checkpoint.
func (a *API) handleCheckpoint(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
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
	ans, err := ag.Checkpoint(r.Context(), g, body, sync)
	if err != nil {
		writeError(w, err)
		return
	}
	head, tail, err := ans.JSONAround()
	if err != nil {
		writeError(w, capsule.Refuse(capsule.CodeInternal, "",
			"the write was stored (seq %d) but the answer could not be encoded: %v", ans.Seq, err))
		return
	}
	writeBody(w, http.StatusOK, head, ans.State, tail)
}

// handleWait is GET /v1/continuity/wait?max_seconds=N[&after=CURSOR]. Without
// `after` it waits for the next event; with the cursor of a previous answer
// it returns what happened since, at once if anything did.
func (a *API) handleWait(w http.ResponseWriter, r *http.Request, ag *agent.Agent, g *guard.Guard) {
	q := r.URL.Query()
	secs := agent.WaitDefault
	if v := q.Get("max_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, agent.WaitSecondsError())
			return
		}
		secs = n
	}
	var after *uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, capsule.Refuse(capsule.CodeInvalidQuery, "after",
				"after must be the cursor of a previous answer (a non-negative integer)"))
			return
		}
		after = &n
	}
	if secs <= agent.WaitMax {
		ExtendWriteDeadline(r, time.Duration(secs)*time.Second+writeMargin)
	}
	ans, err := ag.Wait(r.Context(), secs, after)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// boolQuery reads an optional boolean query parameter (1/0/true/false).
func boolQuery(r *http.Request, name string) (bool, *capsule.Error) {
	if r.URL.RawQuery == "" {
		return false, nil // most requests: no query to parse
	}
	v := queryGet(r.URL.RawQuery, name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, capsule.Refuse(capsule.CodeInvalidQuery, name, "%s must be 1, 0, true or false", name)
	}
	return b, nil
}
