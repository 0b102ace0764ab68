package snapshot

import "context"

// Lookup finds the snapshot id names (a full id or a unique prefix of 7+
// characters, an imported one too), with its metadata: when it was taken
// says what changed since.
func (s *Store) Lookup(ctx context.Context, id string) (Snapshot, error) {
	if s.lock.Closed() {
		return Snapshot{}, ErrClosed
	}
	snap, _, err := s.repo.Resolve(ctx, id, "id")
	return snapshotOf(snap, Timings{}), err
}
