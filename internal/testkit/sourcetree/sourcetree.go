// Package sourcetree is for benchmarks only: the tree of source-like text
// the snapshot, burst and resting-memory benchmarks build, one way, so
// that their figures describe the same kind of tree.
package sourcetree

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// File is the path of file i of a tree, relative to it: directories of
// 100 files.
func File(i int) string { return fmt.Sprintf("pkg%03d/file%03d.go", i/100, i%100) }

// Text is size bytes (at least) of text that compresses like source
// code, different for each seed.
func Text(seed, size int) []byte {
	var out []byte
	for line := 0; len(out) < size; line++ {
		out = fmt.Appendf(out, "func f%d_%d(x int) int { return x*%d + %d } // line %d\n", seed, line, seed%97, line, line)
	}
	return out
}

// Write writes files files of size bytes of Text into dir (file i at
// File(i)) and returns the bytes written.
func Write(tb testing.TB, dir string, files, size int) int64 {
	tb.Helper()
	var total int64
	for i := range files {
		p := filepath.Join(dir, filepath.FromSlash(File(i)))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		content := Text(i, size)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			tb.Fatal(err)
		}
		total += int64(len(content))
	}
	return total
}
