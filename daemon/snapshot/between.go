package snapshot

import (
	"context"
	"slices"
	"strings"
)

// TreeChange is a file that differs between two snapshots: its git object
// and mode on each side, "" on the side where it is absent. Two sides with
// the same object hold the same bytes, in this store and in any git
// repository (the agent's own included), so a caller can tell whether a
// commit holds a snapshot's file by comparing hashes.
type TreeChange struct {
	Path    string `json:"path"`
	OldID   string `json:"old_id,omitempty"`
	NewID   string `json:"new_id,omitempty"`
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
}

// Between lists the files that differ from snapshot from to snapshot to
// (ids or unique prefixes of 7+ characters), sorted by path. It reads the
// store only and runs beside Take and Restore.
func (s *Store) Between(ctx context.Context, from, to string) ([]TreeChange, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	a, all, err := s.resolve(ctx, from, "from")
	if err != nil {
		return nil, err
	}
	// A whole id is found in the list just read: one git run less on the
	// path every work snapshot takes (daemon/capture checks each one).
	i := slices.IndexFunc(all, func(snap Snapshot) bool { return snap.ID == to })
	var b Snapshot
	if i >= 0 {
		b = all[i]
	} else if b, _, err = s.resolve(ctx, to, "to"); err != nil {
		return nil, err
	}
	if a.tree == b.tree {
		return nil, nil
	}
	if c := s.lastChanges.Load(); c != nil && c.from == a.tree && c.to == b.tree {
		return slices.Clone(c.list), nil // the newest Take's own changes: no git run
	}
	changes, err := s.diffTree(ctx, a.tree, b.tree)
	if err != nil {
		return nil, err
	}
	return treeChanges(changes), nil
}

func treeChanges(changes []change) []TreeChange {
	out := make([]TreeChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, TreeChange{Path: c.path,
			OldID: present(c.oldID), NewID: present(c.newID),
			OldMode: present(c.oldMode), NewMode: present(c.newMode)})
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
