//go:build !linux

package repo

import "io/fs"

// IndexStatKnown: outside Linux a first snapshot is staged by git.
const IndexStatKnown = false

// StatOf: outside Linux a first snapshot is staged by git (see
// indexstat_linux.go).
func StatOf(fs.FileInfo) (IndexStat, bool) { return IndexStat{}, false }
