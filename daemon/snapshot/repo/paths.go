package repo

import (
	"path/filepath"
	"strings"
)

// Paths as the store names them: relative to the work tree, with "/".

// Bounds of a path a restore writes, those of Linux: a name over NAME_MAX
// or a path over PATH_MAX cannot be created, and would fail a restore
// half-way.
const (
	MaxNameBytes = 255
	MaxPathBytes = 4095
	// MaxLinkBytes bounds a symbolic link's target.
	MaxLinkBytes = 4095
)

// Inside reports whether p is dir or lies in it, and p relative to dir.
func Inside(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// EscapeGlob makes a path a literal gitignore pattern. A line break cannot
// be written in a gitignore file; it becomes "?", which may also match a
// sibling differing in that one character only.
func EscapeGlob(p string) string {
	var b strings.Builder
	for i, r := range p {
		switch r {
		case '\\', '*', '?', '[', ']':
			b.WriteByte('\\')
		case '!', '#':
			if i == 0 {
				b.WriteByte('\\')
			}
		case '\n', '\r':
			b.WriteByte('?')
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	if strings.HasSuffix(s, " ") { // trailing spaces are dropped unless escaped
		trimmed := strings.TrimRight(s, " ")
		s = trimmed + strings.Repeat("\\ ", len(s)-len(trimmed))
	}
	return s
}

// IsDotGit reports whether a file name is, or a file system may take it
// for, ".git": any case, trailing dots or spaces (NTFS), the 8.3 short
// name GIT~1 (NTFS), or with characters HFS+ ignores.
func IsDotGit(name string) bool {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == 0x200C || r == 0x200D || r == 0x200E || r == 0x200F,
			r >= 0x202A && r <= 0x202E, r >= 0x206A && r <= 0x206F, r == 0xFEFF:
			continue // ignored by HFS+
		}
		b.WriteRune(r)
	}
	n := strings.ToLower(strings.TrimRight(b.String(), ". "))
	return n == ".git" || n == "git~1"
}

// Under reports whether p is root or lies below it.
func Under(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}

// CutLast splits a slash path at its last "/".
func CutLast(p string) (dir, name string, ok bool) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p, false
	}
	return p[:i], p[i+1:], true
}
