// Package atomicfile writes whole files so that a reader, or the next boot
// after a crash, sees either the old content or the new, never a mix: write a
// temporary file in the same directory, fsync it, rename it over the target,
// fsync the directory. A file rewritten again and again (Slot) keeps its
// spare beside it instead of a new temporary file per write.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile atomically replaces filename with data, with permissions perm,
// and makes the replacement durable.
func WriteFile(filename string, data []byte, perm os.FileMode) error {
	if err := ReplaceFile(filename, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(filename))
}

// ReplaceFile is WriteFile without the final directory fsync: the content is
// durable, the name is durable only after SyncDir. Callers that write many
// files into one directory sync it once at the end.
func ReplaceFile(filename string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(filename)
	f, err := os.CreateTemp(dir, "."+filepath.Base(filename)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filename)
}

// SyncDir fsyncs a directory so that a rename or create inside it survives a
// crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
