package ui

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// place is one agent's card on the places view.
type place struct {
	Status ops.AgentStatus
	Resume *capsule.Resume
	Err    string // the resume could not be read: why
	Open   []capsule.Commitment
	// LastCheckpoint is when the agent last saved its focus or working
	// state.
	LastCheckpoint time.Time
}

// placesView lists every place (agent) the session's user may see: the
// status lists only those, and each one's resume is read without
// resetting what the agent itself has not seen yet (peek, local).
func (s *Server) placesView(w http.ResponseWriter, r *http.Request) {
	st, err := call(r.Context(), s, ops.Status, ops.Args{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	places := make([]place, len(st.Agents))
	for i, a := range st.Agents {
		places[i] = s.placeOf(r.Context(), a)
	}
	s.render(w, r, http.StatusOK, "places", page{Title: "Places", Nav: "places", Data: places})
}

func (s *Server) placeOf(ctx context.Context, a ops.AgentStatus) place {
	p := place{Status: a}
	if a.Damaged != "" {
		return p
	}
	res, err := call(ctx, s, ops.Resume, ops.Args{Query: agentQuery(a.Name, "peek", "1", "local", "1")})
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.Resume = res
	for _, c := range res.Commitments {
		if c.Status == capsule.CommitmentOpen {
			p.Open = append(p.Open, c)
		}
	}
	if res.FocusUpdatedAt != nil {
		p.LastCheckpoint = *res.FocusUpdatedAt
	}
	if ws := res.WorkingState; ws != nil && ws.UpdatedAt.After(p.LastCheckpoint) {
		p.LastCheckpoint = ws.UpdatedAt
	}
	return p
}

// pageSize is how many snapshots a page of the timeline shows.
const pageSize = 100

// timeline is the timeline view's data.
type timeline struct {
	Agent     string
	Snapshots []ops.Snapshot
	Total     int
	Page      int
	Pages     int
	Session   string
	Sessions  []string
	Decisions []capsule.DecisionRecord
	WorkLost  []capsule.WorkLost
	Context   capsule.ContextState
	// Rows are the page's snapshots with what happened between them
	// (checkpoints, decisions, compactions, sessions, turns, work lost),
	// newest first.
	Rows []tlRow
	// SinceMessage is the changes since the agent's last message (the
	// newest turn_start snapshot against the newest snapshot).
	SinceMessage string
}

// timelineView is one place's snapshots, newest first, a page at a time
// (a place with 10,000 snapshots shows 100 per page), optionally of one
// session; with the place's decisions and lost work beside them.
func (s *Server) timelineView(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("agent")
	res, err := call(r.Context(), s, ops.Resume, ops.Args{Query: agentQuery(name, "peek", "1", "local", "1")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.snapshotList(r.Context(), name, res.Snapshot)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tl := timeline{Agent: name, Session: r.URL.Query().Get("session")}
	evs := s.feedNow(r.Context(), name)
	seen := map[string]bool{}
	snaps := list[:0:0]
	for _, sn := range list {
		if cv := sn.Conversation; cv != nil && cv.Session != "" && !seen[cv.Session] {
			seen[cv.Session] = true
			tl.Sessions = append(tl.Sessions, cv.Session)
		}
		// A snapshot that names no session (no transcript followed) is
		// kept under a filter, as the events that name none are: hiding
		// it would hide the turn it belongs to.
		if tl.Session == "" || sn.Conversation == nil || sn.Conversation.Session == "" || sn.Conversation.Session == tl.Session {
			snaps = append(snaps, sn)
		}
	}
	for _, e := range evs {
		if id := sessionOfEvent(e); id != "" && !seen[id] {
			seen[id] = true
			tl.Sessions = append(tl.Sessions, id)
		}
	}
	tl.Total = len(snaps)
	tl.Pages = max(1, (len(snaps)+pageSize-1)/pageSize)
	tl.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	tl.Page = min(max(tl.Page, 1), tl.Pages)
	from := (tl.Page - 1) * pageSize
	tl.Snapshots = snaps[from:min(from+pageSize, len(snaps))]
	tl.Decisions = slices.Clone(res.Decisions)
	slices.Reverse(tl.Decisions)
	tl.WorkLost = res.WorkLost
	tl.Context = res.Context
	tl.Rows = timelineRows(name, tl.Snapshots, turnStarts(snaps), tl.Page == 1, tl.Page == tl.Pages, tl.Session, evs, tl.Decisions)
	tl.SinceMessage = sinceLastMessage(name, snaps)
	s.render(w, r, http.StatusOK, "timeline", page{Title: "Timeline of " + name, Nav: "timeline", Agent: name, Data: tl})
}
