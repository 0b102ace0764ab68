package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// RefPrefix holds the store's own snapshots, refs/snapshots/<n>.
const RefPrefix = "refs/snapshots/"

// Short is the first 12 characters of an id, as messages name it.
func Short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// RefName is the ref of the store's snapshot number n.
func RefName(n uint64) string { return fmt.Sprintf("%s%012d", RefPrefix, n) }

// ImportPrefix holds the refs of snapshots fetched from another machine.
const ImportPrefix = "refs/imported/"

// ObjectID matches a git object id, in full.
var ObjectID = lazyregexp.New(`^[0-9a-f]{40}$`)

// CreateRef makes ref name point at id as `git update-ref name id ""`
// does: refused when the ref exists (loose or packed); a lock file made
// exclusively, fsynced and renamed into place, the directory fsynced.
// locked runs once the lock file is written, before it is renamed.
func (r *Repo) CreateRef(name string, id OID, locked func()) error {
	p := filepath.Join(r.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("snapshot store: %s exists already", name)
	}
	if packed, err := os.ReadFile(filepath.Join(r.dir, "packed-refs")); err == nil && bytes.Contains(packed, []byte(" "+name+"\n")) {
		return fmt.Errorf("snapshot store: %s exists already (packed)", name)
	}
	lock := p + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("snapshot store: locking %s: %w", name, err)
	}
	_, err = f.WriteString(id.String() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	locked()
	if err == nil {
		err = os.Rename(lock, p)
	}
	if err != nil {
		os.Remove(lock)
		return fmt.Errorf("snapshot store: writing %s: %w", name, err)
	}
	if d, err := os.Open(filepath.Dir(p)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// list reads every snapshot the refs reach, newest first. Objects a killed
// Take wrote without its ref are never listed: the ref is made last, with
// a lock file and a rename.
func (r *Repo) List(ctx context.Context) ([]Snapshot, error) {
	// The work record of every burst, status and the API list the
	// snapshots: a git run each (several per burst) is kept for when the
	// refs changed by another hand than a Take's (ListTaken).
	stamp, stamped := r.Stamp()
	if c := r.listed.Load(); stamped && c != nil && c.stamp == stamp {
		return slices.Clone(c.snaps), nil
	}
	all, err := r.RefsUnder(ctx, RefPrefix, true)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b Snapshot) int {
		switch {
		case a.N > b.N:
			return -1
		case a.N < b.N:
			return 1
		}
		return 0
	})
	if stamped {
		r.listed.Store(&listedRefs{snaps: slices.Clone(all), stamp: stamp})
	}
	return all, nil
}

// listedRefs is the last list of the snapshots read from the refs, and
// what the refs looked like before it was read.
type listedRefs struct {
	snaps []Snapshot
	stamp RefsStamp
}

// Listed is the cached list of the snapshots, newest first; ok is false
// when none is cached (tests look).
func (r *Repo) Listed() (snaps []Snapshot, ok bool) {
	c := r.listed.Load()
	if c == nil {
		return nil, false
	}
	return slices.Clone(c.snaps), true
}

// RefsStamp is what changes when a snapshot ref is made, moved or
// deleted, by the store or by anyone else: the refs directory's and the
// packed refs file's times and sizes. The store also forgets the list at
// each change it makes itself (ForgetList), in case two changes fall in
// one tick of the file system's clock.
type RefsStamp struct {
	dirTime, packedTime time.Time
	dirSize, packedSize int64
}

// Stamp is the refs' stamp now; ok is false when it cannot be read.
func (r *Repo) Stamp() (st RefsStamp, ok bool) {
	dir, err := os.Stat(filepath.Join(r.dir, filepath.FromSlash(strings.TrimSuffix(RefPrefix, "/"))))
	if err != nil {
		return st, false
	}
	st.dirTime, st.dirSize = dir.ModTime(), dir.Size()
	if packed, err := os.Stat(filepath.Join(r.dir, "packed-refs")); err == nil {
		st.packedTime, st.packedSize = packed.ModTime(), packed.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, false
	}
	return st, true
}

// ForgetList drops the cached list: the store changed a snapshot ref.
func (r *Repo) ForgetList() { r.listed.Store(nil) }

// ListTaken puts the snapshot whose ref a Take just made (id, its tree
// and commit message) at the head of the cached list, as the refs would
// list it, when that list was current just before the ref (before is what
// the refs looked like then): the list a burst's work record reads next
// then needs no git run. Otherwise the list is forgotten, to be read
// again. A list read meanwhile (List takes no lock) that already holds the
// snapshot is kept as it is, under the new stamp.
func (r *Repo) ListTaken(id, tree, message string, before RefsStamp, stamped bool) {
	c := r.listed.Load()
	after, ok := r.Stamp()
	subject, _, _ := strings.Cut(message, "\n")
	snap, parsed := ParseSubject(id, tree, subject)
	if c == nil || !stamped || !ok || !parsed || c.stamp != before {
		r.ForgetList()
		return
	}
	snaps := c.snaps
	if len(snaps) == 0 || snaps[0].N < snap.N {
		snaps = append([]Snapshot{snap}, snaps...)
	}
	if !r.listed.CompareAndSwap(c, &listedRefs{snaps: snaps, stamp: after}) {
		r.ForgetList()
	}
}

// RefsUnder reads the snapshots the refs under prefix reach; a ref whose
// commit is not a snapshot is skipped (and said, when warn is set).
func (r *Repo) RefsUnder(ctx context.Context, prefix string, warn bool) ([]Snapshot, error) {
	out, err := r.git.Run(ctx, Call{Args: []string{"for-each-ref",
		"--format=%(refname)%00%(objectname)%00%(tree)%00%(contents:subject)", prefix}})
	if err != nil {
		return nil, err
	}
	var all []Snapshot
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.SplitN(line, "\x00", 4)
		if len(f) != 4 {
			continue
		}
		// An imported snapshot is named by its ref: its commit may be a
		// copy with files withheld (Import).
		id := f[1]
		if name, ok := strings.CutPrefix(f[0], ImportPrefix); ok && ObjectID.MatchString(name) {
			id = name
		}
		snap, ok := ParseSubject(id, f[2], f[3])
		if id != f[1] {
			snap.Commit = f[1]
		}
		if !ok {
			if warn {
				r.log.Warn("snapshot store: a ref that is not a snapshot", "commit", f[0])
			}
			continue
		}
		all = append(all, snap)
	}
	return all, nil
}

var idRE = lazyregexp.New(`^[0-9a-f]{7,40}$`)

// CheckID normalizes a snapshot id a person typed (a full id or a prefix
// of 7+ characters) and refuses, naming field, one that cannot be.
func CheckID(id, field string) (string, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	if !idRE.MatchString(id) {
		return "", capsule.Refuse(capsule.CodeInvalidField, field,
			"a snapshot id is 7 to 40 hexadecimal characters, as `continuityd snapshot list` shows")
	}
	return id, nil
}

// Resolve finds the snapshot an id (or a unique prefix of 7+ characters)
// names, an error naming field when none or several; all are the
// snapshots it looked at (the store's, and the imported ones when it
// looked there too). The id is never handed to git as a revision.
func (r *Repo) Resolve(ctx context.Context, id, field string) (Snapshot, []Snapshot, error) {
	id, err := CheckID(id, field)
	if err != nil {
		return Snapshot{}, nil, err
	}
	all, err := r.List(ctx)
	if err != nil {
		return Snapshot{}, nil, err
	}
	var found []Snapshot
	for _, snap := range all {
		if strings.HasPrefix(snap.ID, id) {
			found = append(found, snap)
		}
	}
	if len(found) == 0 {
		// A snapshot fetched from another machine (Import) is found by
		// its id too.
		imp, err := r.Imported(ctx)
		if err != nil {
			return Snapshot{}, nil, err
		}
		for _, snap := range imp {
			if strings.HasPrefix(snap.ID, id) {
				found = append(found, snap)
			}
		}
		all = append(all, imp...)
	}
	switch len(found) {
	case 0:
		return Snapshot{}, all, capsule.Refuse(capsule.CodeNotFound, field,
			"no snapshot %s: it never existed or retention dropped it; `continuityd snapshot list` shows those kept", id)
	case 1:
		return found[0], all, nil
	default:
		return Snapshot{}, all, capsule.Refuse(capsule.CodeInvalidField, field,
			"%s names %d snapshots; give more of the id", id, len(found))
	}
}

// Imported lists the snapshots fetched from elsewhere (Import).
func (r *Repo) Imported(ctx context.Context) ([]Snapshot, error) {
	return r.RefsUnder(ctx, ImportPrefix, false)
}
