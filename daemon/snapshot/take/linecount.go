package take

import (
	"bytes"
	"context"
	"errors"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// Line counts in process, for a Take from what changed: the lines added
// and deleted of each changed file, as `git diff --numstat` counts them.
// The counts of a minimal line diff are the same whatever diff is chosen
// (the lines outside the longest common subsequence), and git's diff is
// minimal unless it gives up searching (past 256 edits at the least):
// past maxCountedEdits the Take leaves the counting to git (Show).

// maxCountedEdits is the largest edit distance counted in process.
const maxCountedEdits = 200

// errTooManyEdits: a file changed too much to be counted in process.
var errTooManyEdits = errors.New("too many edits to count in process")

// countChanged gives the line counts of changes (sorted by path): the new
// side from content (what the Take read), the old side read from the
// store. A nil result with no error means git counts them (Show).
func (c *fromChanged) countChanged(ctx context.Context, changes []repo.Change, content map[string][]byte) ([]repo.FileChange, error) {
	var olds []repo.OID // the old sides, read together
	for _, c := range changes {
		if c.Status != 'A' {
			olds = append(olds, oidOf(c.OldID))
		}
	}
	read, err := c.t.pipes.ReadObjects(ctx, olds)
	if err != nil {
		return nil, err
	}
	files := make([]repo.FileChange, 0, len(changes))
	for _, c := range changes {
		fc := repo.FileChange{Path: c.Path, Status: repo.StatusName(c.Status)}
		var before, after []byte
		if c.Status != 'A' {
			before, read = read[0].Data, read[1:]
		}
		if c.Status != 'D' {
			data, ok := content[c.Path]
			if !ok {
				return nil, nil // not kept (unreadable, kept from before): git counts
			}
			after = data
		}
		if isBinary(before) || isBinary(after) {
			fc.Binary = true
		} else {
			a, d, err := lineDiff(splitLines(before), splitLines(after))
			if err != nil {
				return nil, nil
			}
			fc.LinesAdded, fc.LinesDeleted = a, d
		}
		files = append(files, fc)
	}
	return files, nil
}

// isBinary is git's test: a NUL in the first 8,000 bytes.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// splitLines cuts data after each "\n"; a last line without one is a
// line (so "a" and "a\n" differ, as in git).
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, string(data))
			break
		}
		lines = append(lines, string(data[:i+1]))
		data = data[i+1:]
	}
	return lines
}

// lineDiff returns the lines added and deleted by a minimal diff of a
// and b (Myers' O(ND) search for the shortest edit script), or
// errTooManyEdits past maxCountedEdits.
func lineDiff(a, b []string) (added, deleted int, err error) {
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return m, n, nil
	}
	limit := min(n+m, maxCountedEdits)
	off := limit + 1
	v := make([]int, 2*limit+3) // v[k+off]: the furthest x on diagonal k
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[k-1+off] < v[k+1+off] {
				x = v[k+1+off] // down: an insertion
			} else {
				x = v[k-1+off] + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[k+off] = x
			if x >= n && y >= m {
				// d edits in all; the diagonal says how they split.
				return (d - k) / 2, (d + k) / 2, nil
			}
		}
	}
	return 0, 0, errTooManyEdits
}
