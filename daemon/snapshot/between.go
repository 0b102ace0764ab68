package snapshot

import (
	"context"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Between lists the files that differ from snapshot from to snapshot to
// (ids or unique prefixes of 7+ characters), sorted by path. It reads the
// store only and runs beside Take and Restore.
func (s *Store) Between(ctx context.Context, from, to string) ([]TreeChange, error) {
	if s.lock.Closed() {
		return nil, ErrClosed
	}
	a, all, err := s.repo.Resolve(ctx, from, "from")
	if err != nil {
		return nil, err
	}
	// A whole id is found in the list just read: one git run less on the
	// path every work snapshot takes (daemon/capture checks each one).
	i := slices.IndexFunc(all, func(snap repo.Snapshot) bool { return snap.ID == to })
	var b repo.Snapshot
	if i >= 0 {
		b = all[i]
	} else if b, _, err = s.repo.Resolve(ctx, to, "to"); err != nil {
		return nil, err
	}
	if a.Tree == b.Tree {
		return nil, nil
	}
	if c := s.recent.changes.Load(); c != nil && c.from == a.Tree && c.to == b.Tree {
		return slices.Clone(c.list), nil // the newest Take's own changes: no git run
	}
	changes, err := s.repo.DiffTree(ctx, a.Tree, b.Tree)
	if err != nil {
		return nil, err
	}
	return treeChanges(changes), nil
}

func treeChanges(changes []repo.Change) []TreeChange {
	out := make([]TreeChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, TreeChange{Path: c.Path,
			OldID: present(c.OldID), NewID: present(c.NewID),
			OldMode: present(c.OldMode), NewMode: present(c.NewMode)})
	}
	return out
}

// changeSet is what changed from tree from to tree to, as Between gives
// it: a Take from what changed keeps its own for the check every work
// snapshot gets (daemon/capture's work-lost check asks Between of the
// snapshot before and the new one).
type changeSet struct {
	from, to string
	list     []TreeChange
}

// present maps git's all-zeros (no object, no mode) to "".
func present(v string) string {
	if strings.Trim(v, "0") == "" {
		return ""
	}
	return v
}
