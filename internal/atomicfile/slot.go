package atomicfile

import (
	"os"
	"path/filepath"
	"sync"
)

// Slot is one file its owner rewrites again and again (a state file saved
// after each change). Each write fills a spare file kept beside it
// (.NAME.spare) and swaps the two names in one step (see swap): a reader
// sees the old content or the new, as with WriteFile, but no inode is
// created or freed per write, which on a busy file system costs more than
// the write itself. A Slot is safe for concurrent use; a path must have
// one Slot, and nothing else may write it.
type Slot struct {
	path, spare string
	perm        os.FileMode
	durable     bool
	mu          sync.Mutex
}

// NewSlot is the Slot of path, whose writes get permissions perm. durable
// makes each write durable, as WriteFile does (the spare synced before the
// swap, the directory after it); otherwise nothing is synced: for a file
// its writer rebuilds from durable state when it starts (a cache), which a
// crash of the machine may leave old, empty or damaged, and whose reader
// must refuse a damaged one.
func NewSlot(path string, perm os.FileMode, durable bool) *Slot {
	return &Slot{path: path, spare: filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".spare"), perm: perm, durable: durable}
}

// Write replaces the file's content with data.
func (s *Slot) Write(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.spare, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, s.perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(s.perm)
	}
	if err == nil && s.durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = swap(s.spare, s.path)
	}
	if err != nil {
		os.Remove(s.spare)
		return err
	}
	if s.durable {
		return SyncDir(filepath.Dir(s.path))
	}
	return nil
}
