// Package transfer ships a snapshot store's snapshots between machines:
// a snapshot is its commit, its trees and its blobs, each named by its git
// hash, so a copy elsewhere sends only the objects the other side lacks,
// and a receiver checks every object against its name and imports a
// snapshot only once it is whole.
//
// Imported snapshots get a ref of their own (refs/imported/<id>): they
// are found by id (Show, Diff, Restore) but are not numbered among the
// store's own, so they never change the newest snapshot, the next one's
// parent or retention's count.
package transfer

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Object is one git object of a snapshot.
type Object struct {
	ID   string // its git hash
	Type string // "commit", "tree" or "blob"
}

// Transfer sends the snapshots of one store and receives others into it.
type Transfer struct {
	repo         *repo.Repo
	lock         *repo.WriteLock
	maxFileBytes int64 // the largest blob received; negative: no limit
}

// New sends from and receives into r, whose writer lock is lock; a blob
// over maxFileBytes is refused (negative: no limit).
func New(r *repo.Repo, lock *repo.WriteLock, maxFileBytes int64) *Transfer {
	return &Transfer{repo: r, lock: lock, maxFileBytes: maxFileBytes}
}

// Objects lists the objects snapshot id is made of: its commit first,
// then its root tree, then every tree and blob the tree reaches (each
// once). id must name a snapshot of this store (a unique prefix of 7+
// characters is enough).
func (t *Transfer) Objects(ctx context.Context, id string) (repo.Snapshot, []Object, error) {
	if t.lock.Closed() {
		return repo.Snapshot{}, nil, repo.ErrClosed
	}
	snap, _, err := t.repo.Resolve(ctx, id, "id")
	if err != nil {
		return repo.Snapshot{}, nil, err
	}
	out, err := t.repo.Git().Run(ctx, repo.Call{Args: []string{"ls-tree", "-r", "-t", "-z", "--full-tree", snap.Tree}})
	if err != nil {
		return repo.Snapshot{}, nil, fmt.Errorf("snapshot store: %w", err)
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
	return snap, objs, nil
}

// Missing returns those of ids the store does not hold, in order.
func (t *Transfer) Missing(ctx context.Context, ids []string) ([]string, error) {
	if t.lock.Closed() {
		return nil, repo.ErrClosed
	}
	for _, id := range ids {
		if !repo.ObjectID.MatchString(id) {
			return nil, fmt.Errorf("snapshot store: %q is not a git object id", id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := t.repo.Git().Run(ctx, repo.Call{Args: []string{"cat-file", "--batch-check=%(objectname)"},
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
func (t *Transfer) WriteObject(ctx context.Context, o Object, data []byte) error {
	if t.lock.Closed() {
		return repo.ErrClosed
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
	if err := t.lock.LockOpen(); err != nil {
		return err
	}
	defer t.lock.Unlock()
	// hash-object checks a commit's and a tree's format before writing.
	if _, err := t.repo.Git().Run(ctx, repo.Call{Args: []string{"hash-object", "-t", o.Type, "-w", "--stdin"}, Stdin: bytes.NewReader(data)}); err != nil {
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
// whole is refused (repo.ErrDamaged) and leaves no ref, so GC never meets a
// missing object. Importing one the store already has is a no-op.
func (t *Transfer) Import(ctx context.Context, id, commit string) (repo.Snapshot, error) {
	for _, h := range []string{id, commit} {
		if !repo.ObjectID.MatchString(h) {
			return repo.Snapshot{}, fmt.Errorf("snapshot store: %q is not a git object id", h)
		}
	}
	if err := t.lock.LockOpen(); err != nil {
		return repo.Snapshot{}, err
	}
	defer t.lock.Unlock()
	out, err := t.repo.Git().Run(ctx, repo.Call{Args: []string{"cat-file", "commit", commit}})
	if err != nil {
		return repo.Snapshot{}, fmt.Errorf("snapshot store: importing %s: the commit %s cannot be read (%w): %w", repo.Short(id), repo.Short(commit), err, repo.ErrDamaged)
	}
	tree, subject, ok := repo.CommitTreeAndSubject(out)
	snap, isSnap := repo.ParseSubject(id, tree, subject)
	if !ok || !isSnap {
		return repo.Snapshot{}, fmt.Errorf("snapshot store: commit %s is not a continuityd snapshot: %w", repo.Short(commit), repo.ErrDamaged)
	}
	snap.Commit = commit
	if err := t.repo.CheckConnected(ctx, commit); err != nil {
		return repo.Snapshot{}, fmt.Errorf("snapshot store: importing %s: %w", repo.Short(id), err)
	}
	if _, err := t.repo.Git().Run(ctx, repo.Call{Args: []string{"update-ref", repo.ImportPrefix + id, commit}}); err != nil {
		return repo.Snapshot{}, fmt.Errorf("snapshot store: %w", err)
	}
	return snap, nil
}

// What a store receives from another machine is untrusted: every object
// is streamed to disk (never held whole in memory), its declared and
// actual size checked against the store's limits as it arrives, its hash
// checked before it gets its name, and a snapshot gets its ref only once
// every object it reaches is present. Imported snapshots are under the
// same retention as the store's own.

// MaxMetaObjectBytes bounds a commit or a tree received from elsewhere
// (read whole, for git to check its format); a real one is a few KiB.
const MaxMetaObjectBytes = 16 << 20

// ReceiveObject stores one object received from elsewhere, read from r,
// which the sender says is size bytes. A blob is streamed into a loose
// object (zlib, as git writes them) in a file of its own while its hash
// is computed, and is moved under its name only when it hashes to o.ID:
// memory stays small whatever the size. A blob over the store's
// MaxFileBytes (declared or actual), or a commit or tree over
// MaxMetaObjectBytes, is refused with repo.ErrDamaged before it is read
// further. Objects received and not yet imported are garbage to GC: call
// HoldObjects before the first and release it after Import.
func (t *Transfer) ReceiveObject(ctx context.Context, o Object, size int64, r io.Reader) error {
	if t.lock.Closed() {
		return repo.ErrClosed
	}
	if !repo.ObjectID.MatchString(o.ID) {
		return fmt.Errorf("snapshot store: %q is not a git object id: %w", o.ID, repo.ErrDamaged)
	}
	limit := t.maxFileBytes // < 0: no limit
	if o.Type != "blob" {
		limit = MaxMetaObjectBytes
	}
	if size < 0 || (limit >= 0 && size > limit) {
		return fmt.Errorf("snapshot store: the %s %s is %d bytes, over the %d this store takes (max_file_size): %w", o.Type, o.ID, size, limit, repo.ErrDamaged)
	}
	if o.Type != "blob" {
		data, err := io.ReadAll(io.LimitReader(r, size+1))
		if err != nil {
			return fmt.Errorf("snapshot store: receiving %s: %w", o.ID, err)
		}
		if int64(len(data)) != size {
			return fmt.Errorf("snapshot store: the %s %s is %d bytes or more, %d were declared: %w", o.Type, o.ID, len(data), size, repo.ErrDamaged)
		}
		return t.WriteObject(ctx, o, data)
	}
	tmp, err := t.receiveLoose(ctx, o, size, r)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return err
	}
	// The writer lock keeps GC from running while the object lands; once
	// it is under its name, HoldObjects keeps GC from pruning it.
	if err := t.lock.LockOpen(); err != nil {
		return err
	}
	defer t.lock.Unlock()
	dst := filepath.Join(t.repo.Dir(), "objects", o.ID[:2], o.ID[2:])
	if _, err := os.Lstat(dst); err == nil {
		return nil // already there (git's objects are immutable)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	return nil
}

// receiveLoose writes blob o, read from r, as a loose object into a new
// file under incoming/ and checks its size and hash; it returns the
// file's path (to be removed by the caller when not moved).
func (t *Transfer) receiveLoose(ctx context.Context, o Object, size int64, r io.Reader) (string, error) {
	dir := filepath.Join(t.repo.Dir(), repo.IncomingDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("snapshot store: %w", err)
	}
	f, err := os.CreateTemp(dir, "obj-")
	if err != nil {
		return "", fmt.Errorf("snapshot store: %w", err)
	}
	tmp := f.Name()
	defer f.Close()
	h := sha1.New()
	zw, _ := zlib.NewWriterLevel(f, zlib.BestSpeed) // git's own level for loose objects
	header := fmt.Sprintf("blob %d\x00", size)
	h.Write([]byte(header))
	if _, err := io.WriteString(zw, header); err != nil {
		return tmp, fmt.Errorf("snapshot store: %w", err)
	}
	// One byte more than declared is read, to tell a longer object.
	n, err := io.Copy(io.MultiWriter(h, zw), io.LimitReader(ctxReader{ctx, r}, size+1))
	if err != nil {
		return tmp, fmt.Errorf("snapshot store: receiving %s: %w", o.ID, err)
	}
	if n != size {
		return tmp, fmt.Errorf("snapshot store: the blob %s is %s bytes, %d were declared: %w", o.ID, sizeSeen(n, size), size, repo.ErrDamaged)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != o.ID {
		return tmp, fmt.Errorf("snapshot store: the blob received as %s hashes to %s: %w", o.ID, got, repo.ErrDamaged)
	}
	if err := zw.Close(); err != nil {
		return tmp, fmt.Errorf("snapshot store: %w", err)
	}
	if err := f.Chmod(0o444); err != nil {
		return tmp, fmt.Errorf("snapshot store: %w", err)
	}
	return tmp, f.Close()
}

// sizeSeen says how many bytes arrived: n, or "more than" when the read
// stopped one past the declared size.
func sizeSeen(n, declared int64) string {
	if n > declared {
		return "more than " + strconv.FormatInt(declared, 10)
	}
	return strconv.FormatInt(n, 10)
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
