package repo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// RefPrefix holds the store's own snapshots, refs/snapshots/<n>.
const RefPrefix = "refs/snapshots/"

// RefName is the ref of the store's snapshot number n.
func RefName(n uint64) string { return fmt.Sprintf("%s%012d", RefPrefix, n) }

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
