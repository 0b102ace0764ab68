package snapshot

import (
	"context"
	"io"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/transfer"
)

// Snapshots across machines (transfer), for daemon/fleetsnap.

// MaxMetaObjectBytes bounds a commit or a tree received from elsewhere
// (read whole, for git to check its format); a real one is a few KiB.
const MaxMetaObjectBytes = transfer.MaxMetaObjectBytes

// ErrDamaged marks what was received from elsewhere and is not what it
// claims to be: an object whose content does not hash to its name, is
// larger than declared or than the store takes, or a snapshot that is not
// whole. Nothing of it is kept under its name.
var ErrDamaged = repo.ErrDamaged

// Objects lists the objects snapshot id is made of: its commit first,
// then its root tree, then every tree and blob the tree reaches (each
// once). id must name a snapshot of this store (a unique prefix of 7+
// characters is enough).
func (s *Store) Objects(ctx context.Context, id string) (Snapshot, []Object, error) {
	snap, objs, err := s.xfer.Objects(ctx, id)
	if err != nil {
		return Snapshot{}, nil, err
	}
	out := make([]Object, len(objs))
	for i, o := range objs {
		out[i] = Object(o)
	}
	return snapshotOf(snap, Timings{}), out, nil
}

// ReadObjects reads the objects named by ids with one `git cat-file
// --batch` and hands each to fn in order. A missing object is an error
// naming it.
func (s *Store) ReadObjects(ctx context.Context, ids []string, fn func(o Object, data []byte) error) error {
	if s.lock.Closed() {
		return ErrClosed
	}
	return s.repo.ReadBatch(ctx, ids, func(id, typ string, data []byte) error { return fn(Object{ID: id, Type: typ}, data) })
}

// HoldObjects keeps GC from deleting objects no ref reaches yet (those
// WriteObject writes before Import names them) until release is called.
func (s *Store) HoldObjects() (release func()) {
	return s.gc.Hold()
}

// Missing returns those of ids the store does not hold, in order.
func (s *Store) Missing(ctx context.Context, ids []string) ([]string, error) {
	return s.xfer.Missing(ctx, ids)
}

// WriteObject stores one object received from elsewhere and checks that
// it hashes to o.ID: an object whose content does not match its name is
// refused and not written. Objects written and not yet imported are
// garbage to GC: call HoldObjects before the first and release it after
// Import.
func (s *Store) WriteObject(ctx context.Context, o Object, data []byte) error {
	return s.xfer.WriteObject(ctx, transfer.Object(o), data)
}

// ReceiveObject stores one object received from elsewhere, read from r,
// which the sender says is size bytes. A blob is streamed into a loose
// object (zlib, as git writes them) in a file of its own while its hash
// is computed, and is moved under its name only when it hashes to o.ID:
// memory stays small whatever the size. A blob over the store's
// MaxFileBytes (declared or actual), or a commit or tree over
// MaxMetaObjectBytes, is refused with ErrDamaged before it is read
// further. Objects received and not yet imported are garbage to GC: call
// HoldObjects before the first and release it after Import.
func (s *Store) ReceiveObject(ctx context.Context, o Object, size int64, r io.Reader) error {
	return s.xfer.ReceiveObject(ctx, transfer.Object(o), size, r)
}

// Import makes commit, whose objects are all in the store (written by
// WriteObject or ReceiveObject), the snapshot found by id: id is the
// snapshot's id where it was taken, commit the commit received for it
// (the same, or a copy with files withheld from the fleet). It must be a
// snapshot commit (its metadata line parses) and every object it reaches
// must be present, checked before the ref is made: a snapshot that is not
// whole is refused (ErrDamaged) and leaves no ref, so GC never meets a
// missing object. Importing one the store already has is a no-op.
func (s *Store) Import(ctx context.Context, id, commit string) (Snapshot, error) {
	snap, err := s.xfer.Import(ctx, id, commit)
	if err != nil {
		return Snapshot{}, err
	}
	return snapshotOf(snap, Timings{}), nil
}
