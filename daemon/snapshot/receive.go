package snapshot

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// What a store receives from another machine is untrusted: every object
// is streamed to disk (never held whole in memory), its declared and
// actual size checked against the store's limits as it arrives, its hash
// checked before it gets its name, and a snapshot gets its ref only once
// every object it reaches is present. Imported snapshots are under the
// same retention as the store's own.

// MaxMetaObjectBytes bounds a commit or a tree received from elsewhere
// (read whole, for git to check its format); a real one is a few KiB.
const MaxMetaObjectBytes = 16 << 20

// ErrDamaged marks what was received from elsewhere and is not what it
// claims to be: an object whose content does not hash to its name, is
// larger than declared or than the store takes, or a snapshot that is not
// whole. Nothing of it is kept under its name.
var ErrDamaged = repo.ErrDamaged

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
	if s.closed.Load() {
		return ErrClosed
	}
	if !repo.ObjectID.MatchString(o.ID) {
		return fmt.Errorf("snapshot store: %q is not a git object id: %w", o.ID, ErrDamaged)
	}
	limit := s.opt.MaxFileBytes // < 0: no limit
	if o.Type != "blob" {
		limit = MaxMetaObjectBytes
	}
	if size < 0 || (limit >= 0 && size > limit) {
		return fmt.Errorf("snapshot store: the %s %s is %d bytes, over the %d this store takes (max_file_size): %w", o.Type, o.ID, size, limit, ErrDamaged)
	}
	if o.Type != "blob" {
		data, err := io.ReadAll(io.LimitReader(r, size+1))
		if err != nil {
			return fmt.Errorf("snapshot store: receiving %s: %w", o.ID, err)
		}
		if int64(len(data)) != size {
			return fmt.Errorf("snapshot store: the %s %s is %d bytes or more, %d were declared: %w", o.Type, o.ID, len(data), size, ErrDamaged)
		}
		return s.WriteObject(ctx, o, data)
	}
	tmp, err := s.receiveLoose(ctx, o, size, r)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return err
	}
	// The writer lock keeps GC from running while the object lands; once
	// it is under its name, HoldObjects keeps GC from pruning it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	dst := filepath.Join(s.opt.Dir, "objects", o.ID[:2], o.ID[2:])
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
func (s *Store) receiveLoose(ctx context.Context, o Object, size int64, r io.Reader) (string, error) {
	dir := filepath.Join(s.opt.Dir, repo.IncomingDir)
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
		return tmp, fmt.Errorf("snapshot store: the blob %s is %s bytes, %d were declared: %w", o.ID, sizeSeen(n, size), size, ErrDamaged)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != o.ID {
		return tmp, fmt.Errorf("snapshot store: the blob received as %s hashes to %s: %w", o.ID, got, ErrDamaged)
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

// leaveWithheld takes out of a restore's changes the files the snapshot's
// machine withheld from the fleet, and names each (under paths, when
// given) as left alone: this machine's copy is neither overwritten nor
// removed. A snapshot taken here withholds nothing.
func (s *Store) leaveWithheld(ctx context.Context, target repo.Snapshot, paths []string, changes []repo.Change) ([]repo.Change, []Refusal, error) {
	if target.Commit == "" || target.Commit == target.ID {
		return changes, nil, nil
	}
	raw, err := s.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", target.Commit}})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot store: %w", err)
	}
	_, msg, _ := bytes.Cut(raw, []byte("\n\n"))
	withheld := map[string]string{}
	var left []Refusal
	for _, w := range repo.ParseWithheld(string(msg)) {
		if !underAny(w.Path, paths) {
			continue
		}
		withheld[w.Path] = w.Reason
		left = append(left, Refusal{Path: w.Path,
			Reason: "withheld from the fleet by the machine that took the snapshot (" + w.Reason + "); left as it is here"})
	}
	if len(withheld) == 0 {
		return changes, nil, nil
	}
	changes = slices.DeleteFunc(slices.Clone(changes), func(c repo.Change) bool { _, ok := withheld[c.Path]; return ok })
	return changes, left, nil
}

// underAny says whether rel is one of paths or lies below one; no paths
// means the whole tree.
func underAny(rel string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, p := range paths {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// ---- retention and leftovers of imports ---------------------------------

// dropImported applies retention to the snapshots fetched from elsewhere:
// the newest KeepCount of them (by the time they were taken) are kept,
// the refs of the others deleted. Called by GC with the writer lock held.
func (s *Store) dropImported(ctx context.Context) (int, error) {
	imp, err := s.repo.Imported(ctx)
	if err != nil || len(imp) <= s.opt.KeepCount {
		return 0, err
	}
	slices.SortFunc(imp, func(a, b repo.Snapshot) int { return b.Time.Compare(a.Time) })
	var b strings.Builder
	for _, snap := range imp[s.opt.KeepCount:] {
		fmt.Fprintf(&b, "delete %s%s\n", repo.ImportPrefix, snap.ID)
	}
	if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-ref", "--stdin"}, Stdin: strings.NewReader(b.String())}); err != nil {
		return 0, fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
	}
	return len(imp) - s.opt.KeepCount, nil
}

// dropBrokenImports deletes the refs of imported snapshots that do not
// reach every object they name, and says how many it dropped.
func (s *Store) dropBrokenImports(ctx context.Context) (int, error) {
	imp, err := s.repo.Imported(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, snap := range imp {
		err := s.repo.CheckConnected(ctx, snap.CommitID())
		if !errors.Is(err, ErrDamaged) {
			continue
		}
		if _, err := s.git.Run(ctx, repo.Call{Args: []string{"update-ref", "-d", repo.ImportPrefix + snap.ID}}); err != nil {
			return n, fmt.Errorf("snapshot store %s: gc: %w", s.opt.Dir, err)
		}
		s.log.Warn("snapshot store: dropped an imported snapshot that is not whole (git gc failed on it)", "snapshot", snap.ID, "err", err)
		n++
	}
	return n, nil
}

// removeLeftovers deletes what a failed or interrupted git gc leaves
// behind (objects/pack/tmp_*: the packs it was writing; git removes them
// only when a later gc gets as far as pruning) and what a daemon killed
// mid-receive left in incoming/ over an hour ago. Called by GC, one at a
// time: only a GC packs.
func (s *Store) removeLeftovers() {
	// Under the writer lock: a full Take's git add streams into a
	// temporary pack of its own (core.bigFileThreshold=1) while it runs.
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, _ := filepath.Glob(filepath.Join(s.opt.Dir, "objects", "pack", "tmp_*"))
	if ents, err := os.ReadDir(filepath.Join(s.opt.Dir, repo.IncomingDir)); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				gone = append(gone, filepath.Join(s.opt.Dir, repo.IncomingDir, e.Name()))
			}
		}
	}
	for _, p := range gone {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("snapshot store: a temporary file could not be removed", "file", p, "err", err)
		}
	}
	if len(gone) > 0 {
		s.log.Info("snapshot store: removed temporary packs a failed gc left", "files", len(gone))
	}
}
