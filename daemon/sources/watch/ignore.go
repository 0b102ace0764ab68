package watch

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/continuityd/continuityd/internal/safefile"
)

// pattern is one compiled gitignore line.
type pattern struct {
	negate   bool
	dirOnly  bool     // "dir/": directories only
	anchored bool     // had a slash before its end: matched against the path relative to its base
	segs     []string // glob segments; "**" is its own segment; !anchored → exactly one
	lits     []bool   // segs[i] has no glob metacharacter
}

// ruleSet is the patterns of one directory's .gitignore (after those of the
// repository's .git/info/exclude when the directory is a repository root).
// Within a set the last matching pattern decides.
type ruleSet struct {
	pats []pattern
}

// parseRules compiles gitignore text. Lines that are blank, comments or
// invalid globs are skipped, as git does.
func parseRules(data []byte) *ruleSet {
	rs := &ruleSet{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if p, ok := compilePattern(sc.Text()); ok {
			rs.pats = append(rs.pats, p)
		}
	}
	return rs
}

func compilePattern(line string) (pattern, bool) {
	var p pattern
	line = strings.TrimSuffix(line, "\r")
	if line == "" || line[0] == '#' {
		return p, false
	}
	// Trailing spaces are dropped unless escaped with a backslash.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	if line[0] == '!' {
		p.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if strings.Contains(line, "/") {
		p.anchored = true
		line = strings.TrimLeft(line, "/")
	}
	if line == "" {
		return p, false
	}
	for _, s := range strings.Split(line, "/") {
		if s == "" { // "a//b"
			continue
		}
		if s == "**" {
			if n := len(p.segs); n > 0 && p.segs[n-1] == "**" {
				continue
			}
		} else {
			s = fixBrackets(s)
			if _, err := path.Match(s, ""); err != nil {
				return p, false
			}
		}
		p.segs = append(p.segs, s)
		p.lits = append(p.lits, s != "**" && !strings.ContainsAny(s, `*?[\`))
	}
	if !p.anchored && len(p.segs) != 1 {
		return p, false
	}
	return p, len(p.segs) > 0
}

// fixBrackets turns git's "[!...]" negated class into path.Match's "[^...]".
func fixBrackets(s string) string {
	if !strings.Contains(s, "[!") {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '[':
			if i+1 < len(b) && b[i+1] == '!' {
				b[i+1] = '^'
			}
		}
	}
	return string(b)
}

// match reports whether rel (slash-separated, relative to the directory of
// the .gitignore, no leading or trailing slash) matches the pattern.
func (p *pattern) match(rel string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if !p.anchored {
		base := rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			base = rel[i+1:]
		}
		return segMatch(p.segs[0], p.lits[0], base)
	}
	return p.matchSegs(0, rel)
}

func (p *pattern) matchSegs(i int, rel string) bool {
	for ; i < len(p.segs); i++ {
		if p.segs[i] == "**" {
			if i == len(p.segs)-1 {
				return rel != "" // "a/**" matches what is inside a, not a
			}
			for {
				if p.matchSegs(i+1, rel) {
					return true
				}
				j := strings.IndexByte(rel, '/')
				if j < 0 {
					return false
				}
				rel = rel[j+1:]
			}
		}
		if rel == "" {
			return false
		}
		seg, rest := rel, ""
		if j := strings.IndexByte(rel, '/'); j >= 0 {
			seg, rest = rel[:j], rel[j+1:]
		}
		if !segMatch(p.segs[i], p.lits[i], seg) {
			return false
		}
		rel = rest
	}
	return rel == ""
}

func segMatch(pat string, lit bool, name string) bool {
	if lit {
		return pat == name
	}
	ok, _ := path.Match(pat, name)
	return ok
}

// check returns whether a pattern of the set matched rel and, if so,
// whether the path is ignored (the last matching pattern decides).
func (rs *ruleSet) check(rel string, isDir bool) (matched, ignored bool) {
	if rs == nil {
		return false, false
	}
	for i := len(rs.pats) - 1; i >= 0; i-- {
		if rs.pats[i].match(rel, isDir) {
			return true, !rs.pats[i].negate
		}
	}
	return false, false
}

// maxIgnoreFile bounds a .gitignore or info/exclude read: a real one is
// kilobytes.
const maxIgnoreFile = 1 << 20

// maxGitFile bounds a .git file or a commondir read: a path.
const maxGitFile = 64 << 10

// loadRules reads dir/.gitignore, preceded by dir/.git/info/exclude when dir
// is a repository root (gitDir), through op (nil: this process opens them).
// It returns nil when neither has a usable pattern. A cloned tree may carry
// its .gitignore as a link (to /dev/zero, say): like git since 2.32, a
// .gitignore that is a link is not followed, and either file must be a
// regular one within maxIgnoreFile, so a FIFO never stalls the watcher and
// a device never fills its memory.
//
// A file that cannot be read (one the tree's owner may not read, as a
// root-run tool leaves behind) is passed over: git, run by that owner,
// warns "unable to access" and applies the other files' patterns, and
// the owner's snapshots, taken with the owner's rights, see the tree as
// that git does.
func loadRules(op safefile.Opener, dir string, gitDir bool) *ruleSet {
	rs, _, _ := loadRulesFrom(op, dir, gitDir)
	return rs
}

// loadRules is loadRules for a directory of the tree: a .git/info/exclude
// with patterns makes the Watcher's summaries incomplete (a snapshot of
// the tree does not read it), and a file that exists but cannot be read
// is logged once, as git warns of it.
func (w *Watcher) loadRules(dir string, gitDir bool) *ruleSet {
	rs, foreign, unread := loadRulesFrom(w.o.Opener, dir, gitDir)
	if foreign {
		w.foreignRules = true
	}
	for _, u := range unread {
		w.unreadRules(u)
	}
	return rs
}

// maxUnreadLogged bounds the ignore files a Watcher names in its log as
// unreadable: past it, no more are named.
const maxUnreadLogged = 64

// unreadRules logs an ignore file that could not be read, once per path.
// Its content is never read, so nothing of it is logged.
func (w *Watcher) unreadRules(u unreadFile) {
	if w.unreadLogged[u.path] || len(w.unreadLogged) >= maxUnreadLogged {
		return
	}
	if w.unreadLogged == nil {
		w.unreadLogged = map[string]bool{}
	}
	w.unreadLogged[u.path] = true
	w.log.Warn("watch: an ignore file cannot be read; its patterns do not apply, as git run by the tree's owner passes over it too",
		"path", u.path, "err", u.err)
}

// unreadFile is an ignore file that exists and could not be read.
type unreadFile struct {
	path string
	err  error
}

// loadRulesFrom is loadRules; foreign says whether .git/info/exclude held
// patterns, and unread are the files that could not be read for another
// reason than their absence (git's own warning's cases).
func loadRulesFrom(op safefile.Opener, dir string, gitDir bool) (rs *ruleSet, foreign bool, unread []unreadFile) {
	if op == nil {
		op = safefile.Here
	}
	read := func(path string, follow bool) []byte {
		b, err := safefile.ReadFileWith(op, path, follow, maxIgnoreFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			unread = append(unread, unreadFile{path, err})
		}
		return b
	}
	var data []byte
	if gitDir {
		if b := read(dir+"/.git/info/exclude", true); b != nil {
			data = append(b, '\n')
			foreign = len(parseRules(b).pats) > 0
		}
	}
	data = append(data, read(dir+"/.gitignore", false)...)
	if len(data) == 0 {
		return nil, foreign, unread
	}
	rs = parseRules(data)
	if len(rs.pats) == 0 {
		return nil, foreign, unread
	}
	return rs, foreign, unread
}

// Matcher evaluates gitignore rules the way git does for a tree: the rules
// of each directory apply to its subtree, deeper files take precedence, and
// a path inside an ignored directory is ignored whatever later patterns say.
// The watcher uses the per-directory sets directly; Matcher is the same logic
// for a static set of files (and for tests).
type Matcher struct {
	sets map[string]*ruleSet // "" is the root
}

// NewMatcher builds a Matcher from .gitignore contents keyed by the
// slash-separated directory they live in ("" for the root).
func NewMatcher(files map[string]string) *Matcher {
	m := &Matcher{sets: map[string]*ruleSet{}}
	for dir, text := range files {
		m.sets[strings.Trim(dir, "/")] = parseRules([]byte(text))
	}
	return m
}

// Ignored reports whether rel (slash-separated, relative to the root) is
// ignored; isDir says whether rel itself is a directory.
func (m *Matcher) Ignored(rel string, isDir bool) bool {
	rel = strings.Trim(rel, "/")
	// A path is ignored when any ancestor directory is.
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && m.ignoredHere(rel[:i], true) {
			return true
		}
	}
	return m.ignoredHere(rel, isDir)
}

// ignoredHere applies the rule sets of rel's ancestors, deepest first, to rel
// alone (its ancestors are assumed not ignored).
func (m *Matcher) ignoredHere(rel string, isDir bool) bool {
	dir := rel
	for {
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			dir = ""
		} else {
			dir = dir[:i]
		}
		if rs := m.sets[dir]; rs != nil {
			sub := rel
			if dir != "" {
				sub = rel[len(dir)+1:]
			}
			if matched, ign := rs.check(sub, isDir); matched {
				return ign
			}
		}
		if dir == "" {
			return false
		}
	}
}

// isEditorTemp reports names that editors and agents write and then rename
// over (or delete): they are never reported; the rename's target is.
//
//	x.go.tmp, x.go.tmp123, x.go.tmp.4711.1700000000 (agents, renameio)
//	.x.go.swp .swo .swx, 4913 (vim), x.go~ (vim, emacs backups)
//	.#x.go, #x.go# (emacs), x.go___jb_tmp___ / ___jb_old___ (JetBrains)
//	.goutputstream-XXXXXX (GTK), x.kate-swp, .~lock.x#, ~$x (office)
//	sedXXXXXX (sed -i), tmpXXXXXXXX (Python tempfile in the same dir)
//	*.crdownload, *.part (partial downloads)
func isEditorTemp(name string) bool {
	n := len(name)
	if n == 0 {
		return false
	}
	switch {
	case name[n-1] == '~',
		name == "4913",
		strings.HasPrefix(name, ".#"),
		n > 2 && name[0] == '#' && name[n-1] == '#',
		strings.HasPrefix(name, ".~lock."),
		strings.HasPrefix(name, "~$"),
		strings.HasPrefix(name, ".goutputstream-"),
		strings.HasSuffix(name, "___jb_tmp___"),
		strings.HasSuffix(name, "___jb_old___"),
		strings.HasSuffix(name, ".kate-swp"),
		strings.HasSuffix(name, ".crdownload"),
		strings.HasSuffix(name, ".part"):
		return true
	}
	if name[0] == '.' && n > 4 {
		switch name[n-4:] {
		case ".swp", ".swo", ".swx", ".swn":
			return true
		}
	}
	// ".tmp" followed by the end, digits, '.', '-' or '_' (not ".tmpl").
	for i := 0; ; {
		j := strings.Index(name[i:], ".tmp")
		if j < 0 {
			break
		}
		k := i + j + 4
		if i+j == 0 { // ".tmp..." is a name of its own
			i = k
			continue
		}
		if k == n {
			return true
		}
		if c := name[k]; c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9') {
			return true
		}
		i = k
	}
	if n == 9 && strings.HasPrefix(name, "sed") && isAlnum(name[3:]) && strings.ContainsAny(name[3:], "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return true
	}
	if n == 11 && strings.HasPrefix(name, "tmp") && isTempfileChars(name[3:]) {
		return true
	}
	return false
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isTempfileChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
