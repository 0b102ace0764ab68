package ui

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
)

// History is where a file's versions come from: the version journal
// (GET /v1/history?path=P, every version the watcher saw settle, whoever
// made it), or, where the place keeps no journal, its versions across the
// place's snapshots.
type History interface {
	// Versions are the versions of file p in the named place, newest
	// first, as the request's user may see them (ctx carries the
	// session).
	Versions(ctx context.Context, agent, p string) ([]Version, error)
}

// Version is one version of a file.
type Version struct {
	// ID is the journal's id of the version (history_restore restores
	// it); "" for a version found in the snapshots, restored from
	// Snapshot.
	ID       string
	At       time.Time
	Snapshot string // the snapshot holding it
	Trigger  string
	Status   string // added, modified, deleted
	Added    int
	Deleted  int
	Binary   bool
	// From the journal: its size and lines, whose change it was, the
	// agent session it was made in, and why its content was not kept.
	Size    int64
	Lines   int
	By      string
	Session string
	NotKept string
}

// journalHistory reads a file's versions from the version journal, as
// the session's user, newest first; where the place keeps no journal
// (SNAPSHOTS_UNAVAILABLE: off, or a store run as the workdir's owner) it
// falls back to the versions across the snapshots, and says so.
type journalHistory struct{ s *Server }

// errNoJournal wraps the journal's refusal when the snapshots answered
// instead: the view shows it as a note.
type errNoJournal struct{ why string }

func (e errNoJournal) Error() string {
	return e.why + "; these are the file's versions across the snapshots"
}

func (h journalHistory) Versions(ctx context.Context, agent, p string) ([]Version, error) {
	ans, err := call(ctx, h.s, ops.History, ops.Args{Query: agentQuery(agent, "path", p)})
	var ce *client.APIError
	if errors.As(err, &ce) && ce.Code == capsule.CodeSnapshotsOff {
		vs, serr := snapshotHistory(h).Versions(ctx, agent, p)
		if serr != nil {
			return vs, serr
		}
		return vs, errNoJournal{why: ce.Message}
	}
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(ans.Versions)+1)
	for i := len(ans.Versions) - 1; i >= 0; i-- { // the journal answers oldest first
		v := ans.Versions[i]
		st := ops.StatusModified
		if v.Gone {
			st = ops.StatusDeleted
		}
		added, deleted := max(v.LinesDelta, 0), max(-v.LinesDelta, 0)
		out = append(out, Version{ID: v.ID, At: v.At, Snapshot: v.Snapshot, Status: st, Added: added, Deleted: deleted,
			Size: v.Size, Lines: v.Lines, By: v.By, Session: v.Session, NotKept: v.NotKept})
	}
	// The journal holds what changed while it watched: the versions
	// before its oldest (a file as it stood when the daemon first looked)
	// are in the snapshots taken before then.
	before := time.Now()
	if len(out) > 0 {
		before = out[len(out)-1].At
	}
	older, err := snapshotHistory(h).versionsBefore(ctx, agent, p, before)
	return append(out, older...), err
}

// maxHistorySnapshots bounds how many snapshots, newest first, the
// snapshot-based history looks into for a file: one show per snapshot.
const maxHistorySnapshots = 200

// snapshotHistory finds a file's versions in the snapshots that changed
// it, through the snapshot operations as the session's user.
type snapshotHistory struct{ s *Server }

func (h snapshotHistory) Versions(ctx context.Context, agent, p string) ([]Version, error) {
	return h.versionsBefore(ctx, agent, p, time.Time{})
}

// versionsBefore are the file's versions in the snapshots taken before
// t (zero: all).
func (h snapshotHistory) versionsBefore(ctx context.Context, agent, p string, t time.Time) ([]Version, error) {
	list, err := call(ctx, h.s, ops.Snapshots, ops.Args{Query: agentQuery(agent)})
	if err != nil {
		return nil, err
	}
	p = path.Clean(strings.TrimPrefix(p, "/"))
	var out []Version
	for i, sn := range list.Snapshots {
		if i == maxHistorySnapshots {
			break
		}
		if sn.Added+sn.Modified+sn.Deleted == 0 || (!t.IsZero() && !sn.Time.Before(t)) {
			continue
		}
		d, err := call(ctx, h.s, ops.SnapshotShow, ops.Args{ID: sn.ID, Query: agentQuery(agent)})
		if err != nil {
			return out, err
		}
		for _, f := range d.Files {
			if f.Path == p {
				out = append(out, Version{At: sn.Time, Snapshot: sn.ID, Trigger: sn.Trigger, Status: f.Status,
					Added: f.LinesAdded, Deleted: f.LinesDeleted, Binary: f.Binary})
				break
			}
		}
	}
	return out, nil
}
