package snapshot

import "github.com/continuityd/continuityd/daemon/snapshot/repo"

// Conversions from the parts' types to the answers'.

// snapshotOf is snap as the answers give it, with took (zero when it was
// read back).
func snapshotOf(snap repo.Snapshot, took Timings) Snapshot {
	return Snapshot{ID: snap.ID, Time: snap.Time, Trigger: snap.Trigger, Seq: snap.Seq, Parent: snap.Parent,
		Added: snap.Added, Modified: snap.Modified, Deleted: snap.Deleted, Skipped: snap.Skipped,
		Conversation: (*Conversation)(snap.Conversation), Message: snap.Note, Took: took}
}

// snapshotsOf is snapshotOf of each.
func snapshotsOf(snaps []repo.Snapshot) []Snapshot {
	out := make([]Snapshot, len(snaps))
	for i, snap := range snaps {
		out[i] = snapshotOf(snap, Timings{})
	}
	return out
}

// skippedOf is list as the answers give it.
func skippedOf(list []repo.Skipped) []Skipped {
	if list == nil {
		return nil
	}
	out := make([]Skipped, len(list))
	for i, k := range list {
		out[i] = Skipped(k)
	}
	return out
}

// fileChangesOf is list as the answers give it.
func fileChangesOf(list []repo.FileChange) []FileChange {
	if list == nil {
		return nil
	}
	out := make([]FileChange, len(list))
	for i, f := range list {
		out[i] = FileChange{Path: f.Path, Status: f.Status, LinesAdded: f.LinesAdded, LinesDeleted: f.LinesDeleted, Binary: f.Binary}
	}
	return out
}

// withheldOf is list as the answers give it.
func withheldOf(list []repo.Withheld) []Withheld {
	if list == nil {
		return nil
	}
	out := make([]Withheld, len(list))
	for i, w := range list {
		out[i] = Withheld(w)
	}
	return out
}
