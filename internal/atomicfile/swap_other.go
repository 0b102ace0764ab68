//go:build !linux

package atomicfile

import "os"

// swap puts spare's content at path in one step: a rename (the next write
// makes a new spare; only Linux exchanges the two names).
func swap(spare, path string) error { return os.Rename(spare, path) }
