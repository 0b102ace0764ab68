package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Objects, for shipping snapshots to another machine: a snapshot is its
// commit, its trees and its blobs, each named by its git hash, so a copy
// elsewhere sends only the objects the other side lacks and a receiver
// checks every object against its name. Imported snapshots get a ref of
// their own (refs/imported/<id>): they are found by id (Show, Diff,
// Restore) but are not numbered among the store's own, so they never
// change the newest snapshot, the next one's parent or retention's count.

// Objects lists the objects snapshot id is made of: its commit first,
// then its root tree, then every tree and blob the tree reaches (each
// once). id must name a snapshot of this store (a unique prefix of 7+
// characters is enough).
func (s *Store) Objects(ctx context.Context, id string) (Snapshot, []Object, error) {
	if s.closed.Load() {
		return Snapshot{}, nil, ErrClosed
	}
	snap, _, err := s.repo.Resolve(ctx, id, "id")
	if err != nil {
		return Snapshot{}, nil, err
	}
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-t", "-z", "--full-tree", snap.Tree}})
	if err != nil {
		return Snapshot{}, nil, fmt.Errorf("snapshot store: %w", err)
	}
	objs := []Object{{ID: snap.ID, Type: "commit"}, {ID: snap.Tree, Type: "tree"}}
	seen := map[string]bool{snap.ID: true, snap.Tree: true}
	for entry := range bytes.SplitSeq(out, []byte{0}) {
		// "<mode> SP <type> SP <hash> TAB <path>"
		meta, _, ok := bytes.Cut(entry, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) != 3 || (f[1] != "tree" && f[1] != "blob") || seen[f[2]] {
			continue // a gitlink ("commit") names another repository's object
		}
		seen[f[2]] = true
		objs = append(objs, Object{ID: f[2], Type: f[1]})
	}
	return snapshotOf(snap, Timings{}), objs, nil
}

// ReadObjects reads the objects named by ids with one `git cat-file
// --batch` and hands each to fn in order. A missing object is an error
// naming it.
func (s *Store) ReadObjects(ctx context.Context, ids []string, fn func(o Object, data []byte) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.repo.ReadBatch(ctx, ids, func(id, typ string, data []byte) error { return fn(Object{ID: id, Type: typ}, data) })
}

// HoldObjects keeps GC from deleting objects no ref reaches yet (those
// WriteObject writes before Import names them) until release is called.
func (s *Store) HoldObjects() (release func()) {
	s.holds.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.holds.Add(-1) }) }
}

// Missing returns those of ids the store does not hold, in order.
func (s *Store) Missing(ctx context.Context, ids []string) ([]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	for _, id := range ids {
		if !repo.ObjectID.MatchString(id) {
			return nil, fmt.Errorf("snapshot store: %q is not a git object id", id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "--batch-check=%(objectname)"},
		Stdin: strings.NewReader(strings.Join(ids, "\n") + "\n")})
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	var missing []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if id, ok := strings.CutSuffix(line, " missing"); ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// WriteObject stores one object received from elsewhere and checks that
// it hashes to o.ID: an object whose content does not match its name is
// refused and not written. Objects written and not yet imported are
// garbage to GC: call HoldObjects before the first and release it after
// Import.
func (s *Store) WriteObject(ctx context.Context, o Object, data []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !repo.ObjectID.MatchString(o.ID) {
		return fmt.Errorf("snapshot store: %q is not a git object id", o.ID)
	}
	switch o.Type {
	case "commit", "tree", "blob":
	default:
		return fmt.Errorf("snapshot store: object %s: type %q is not commit, tree or blob", o.ID, o.Type)
	}
	// The hash is checked before anything is written, so a damaged or
	// forged object never lands in the store (under any name).
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", o.Type, len(data))
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != o.ID {
		return fmt.Errorf("snapshot store: the %s received as %s hashes to %s: refused", o.Type, o.ID, got)
	}
	// The writer lock keeps GC (which deletes every object no ref reaches)
	// from removing it before Import names it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	// hash-object checks a commit's and a tree's format before writing.
	if _, err := s.git.Run(ctx, repo.Call{Args: []string{"hash-object", "-t", o.Type, "-w", "--stdin"}, Stdin: bytes.NewReader(data)}); err != nil {
		return fmt.Errorf("snapshot store: writing object %s: %w", o.ID, err)
	}
	return nil
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
	for _, h := range []string{id, commit} {
		if !repo.ObjectID.MatchString(h) {
			return Snapshot{}, fmt.Errorf("snapshot store: %q is not a git object id", h)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return Snapshot{}, ErrClosed
	}
	out, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", commit}})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot store: importing %s: the commit %s cannot be read (%w): %w", short(id), short(commit), err, ErrDamaged)
	}
	tree, subject, ok := repo.CommitTreeAndSubject(out)
	snap, isSnap := repo.ParseSubject(id, tree, subject)
	if !ok || !isSnap {
		return Snapshot{}, fmt.Errorf("snapshot store: commit %s is not a continuityd snapshot: %w", short(commit), ErrDamaged)
	}
	snap.Commit = commit
	if err := s.repo.CheckConnected(ctx, commit); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot store: importing %s: %w", short(id), err)
	}
	if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-ref", repo.ImportPrefix + id, commit}}); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot store: %w", err)
	}
	return snapshotOf(snap, Timings{}), nil
}
