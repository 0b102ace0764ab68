package ui

import (
	"context"
	"sync"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// listCache keeps each place's list of snapshots as the operation last
// answered it, with the newest snapshot it held: a place with 10,000
// snapshots answers a list of megabytes, and the timeline shows 100 of
// it a page. The list is asked for again when the newest snapshot changed
// (a snapshot taken, a restore's safety snapshot, retention after a take).
// It is only reused for a caller whose own operation (the resume naming
// the newest snapshot) the API has just answered: whoever may use the
// place sees the same list.
type listCache struct {
	mu sync.Mutex
	m  map[string]cachedList
}

type cachedList struct {
	newest string
	list   []ops.Snapshot
}

// maxCachedPlaces bounds the lists kept.
const maxCachedPlaces = 64

// snapshotList is the place's snapshots, newest first; newest is the
// newest snapshot as the caller's resume names it (nil: none known, the
// list is asked for).
func (s *Server) snapshotList(ctx context.Context, agent string, newest *capsule.SnapshotRef) ([]ops.Snapshot, error) {
	if newest != nil {
		s.lists.mu.Lock()
		c, ok := s.lists.m[agent]
		s.lists.mu.Unlock()
		if ok && c.newest == newest.ID {
			return c.list, nil
		}
	}
	list, err := call(ctx, s, ops.Snapshots, ops.Args{Query: agentQuery(agent)})
	if err != nil {
		return nil, err
	}
	if newest != nil && len(list.Snapshots) > 0 && list.Snapshots[0].ID == newest.ID {
		s.lists.mu.Lock()
		if s.lists.m == nil || len(s.lists.m) >= maxCachedPlaces {
			s.lists.m = map[string]cachedList{}
		}
		s.lists.m[agent] = cachedList{newest: newest.ID, list: list.Snapshots}
		s.lists.mu.Unlock()
	}
	return list.Snapshots, nil
}
