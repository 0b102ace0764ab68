//go:build !linux

package snapshot

import "io/fs"

// indexStatKnown: outside Linux a first snapshot is staged by git.
const indexStatKnown = false

// statOf: outside Linux a first snapshot is staged by git (see
// indexstat_linux.go).
func statOf(fs.FileInfo) (indexStat, bool) { return indexStat{}, false }
