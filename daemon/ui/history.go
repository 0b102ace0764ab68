package ui

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
)

// History is where a file's versions come from: today its versions
// across the place's snapshots; the version journal (GET
// /v1/history?path=P) replaces it without touching the view.
type History interface {
	// Versions are the versions of file p in the named place, newest
	// first, as the request's user may see them (ctx carries the
	// session).
	Versions(ctx context.Context, agent, p string) ([]Version, error)
}

// Version is one version of a file.
type Version struct {
	At       time.Time
	Snapshot string // the snapshot holding it (a restore's source)
	Trigger  string
	Status   string // added, modified, deleted
	Added    int
	Deleted  int
	Binary   bool
}

// maxHistorySnapshots bounds how many snapshots, newest first, the
// snapshot-based history looks into for a file: one show per snapshot.
const maxHistorySnapshots = 200

// snapshotHistory finds a file's versions in the snapshots that changed
// it, through the snapshot operations as the session's user.
type snapshotHistory struct{ s *Server }

func (h snapshotHistory) Versions(ctx context.Context, agent, p string) ([]Version, error) {
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
		if sn.Added+sn.Modified+sn.Deleted == 0 {
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
