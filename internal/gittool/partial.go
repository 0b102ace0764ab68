package gittool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/continuityd/continuityd/internal/safefile"
)

// ErrRefused is wrapped by Refuses's error: git is not run on that
// repository.
var ErrRefused = errors.New("git is not run on this repository")

// Refuses says why git must not run on the repository whose git directory
// is gitDir (HEAD's) and common directory commonDir (config, objects; the
// same for all but a linked worktree), nil when it may. Its one reason: a
// partial clone, which fetches the objects it lacks from its promisor
// remote as soon as a command reads one, when this git is too old to be
// kept from it (HonoursNoLazyFetch). The repository's configuration is
// read here, as text, without running anything from it, through the
// tool's Opener (ReadsWith): with the rights git runs with.
func (t *Tool) Refuses(gitDir, commonDir string) error {
	if t.Version.HonoursNoLazyFetch() {
		return nil
	}
	why, err := PartialClone(t.Opener(), gitDir, commonDir)
	if err != nil {
		return fmt.Errorf("%w: git %s cannot be kept from fetching a partial clone's missing objects, and %v; upgrade git (2.45, or 2.39.4, 2.40.2, 2.41.1, 2.42.2, 2.43.4, 2.44.1 or later on those lines)",
			ErrRefused, t.Version, err)
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: it is a partial clone (%s), and git %s cannot be kept from fetching its missing objects from the promisor remote (GIT_NO_LAZY_FETCH needs git 2.45, or 2.39.4, 2.40.2, 2.41.1, 2.42.2, 2.43.4, 2.44.1 or later on those lines): upgrade git",
		ErrRefused, why, t.Version)
}

// maxConfigBytes bounds a configuration file read by PartialClone; a
// larger one is not read and the repository is taken for a partial clone.
const maxConfigBytes = 4 << 20

// maxIncludeDepth is git's own bound on nested includes.
const maxIncludeDepth = 10

// PartialClone says what makes the repository a partial clone ("" when
// nothing does): extensions.partialClone, or a remote with promisor set,
// in commonDir/config, a worktree's config.worktree, or any file they
// include (every include.path and includeIf.*.path is followed, whatever
// its condition: a superset of what git reads). An error (a file that
// cannot be read or parsed) means it cannot be told. Every file is read
// through op (nil: this process opens them), as a regular file: a FIFO
// or a device named by an include is an error, never waited on.
func PartialClone(op safefile.Opener, gitDir, commonDir string) (string, error) {
	if op == nil {
		op = safefile.Here
	}
	files := []string{filepath.Join(commonDir, "config"), filepath.Join(commonDir, "config.worktree")}
	if gitDir != commonDir {
		files = append(files, filepath.Join(gitDir, "config.worktree"))
	}
	var why string
	for _, f := range files {
		err := scanConfig(op, f, 0, func(file, section, sub, key, value string, hasValue bool) {
			switch {
			case why != "":
			case section == "extensions" && sub == "" && key == "partialclone":
				why = fmt.Sprintf("extensions.partialClone = %q in %s", value, file)
			case section == "remote" && key == "promisor" && truthy(value, hasValue):
				why = fmt.Sprintf("remote %q is a promisor in %s", sub, file)
			}
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err // no file at all is no setting, as git reads it
		}
		if why != "" {
			return why, nil
		}
	}
	return "", nil
}

// truthy is git's reading of a boolean, taking anything it would not read
// as false for true.
func truthy(value string, hasValue bool) bool {
	if !hasValue {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "false", "no", "off", "0":
		return false
	}
	return true
}

// scanConfig calls fn with each setting of the git configuration file at
// path (section and key lower-cased, as git compares them), following its
// includes; fn is told the file each setting is in.
func scanConfig(op safefile.Opener, path string, depth int, fn func(file, section, sub, key, value string, hasValue bool)) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("the configuration includes nest deeper than %d at %s", maxIncludeDepth, path)
	}
	f, _, err := op.Open(path, safefile.OpenOptions{Follow: true})
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return fmt.Errorf("%s is over %d bytes", path, maxConfigBytes)
	}
	var includes []string
	err = parseConfig(data, func(section, sub, key, value string, hasValue bool) {
		if key == "path" && hasValue && (section == "include" && sub == "" || section == "includeif") {
			includes = append(includes, value)
		}
		fn(path, section, sub, key, value, hasValue)
	})
	if err != nil {
		return fmt.Errorf("cannot parse %s: %w", path, err)
	}
	for _, inc := range includes {
		switch {
		case inc == "":
			continue
		case strings.HasPrefix(inc, "~"):
			// git expands it with HOME, which is /dev/null for every run.
			continue
		case strings.HasPrefix(inc, "%(prefix)/"):
			// git's own installation: nothing a repository's owner writes.
			continue
		case !filepath.IsAbs(inc):
			inc = filepath.Join(filepath.Dir(path), inc)
		}
		if err := scanConfig(op, inc, depth+1, fn); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err // git skips an include that does not exist, as this does
		}
	}
	return nil
}

// parseConfig reads git's configuration syntax: [section], [section
// "subsection"], [section.subsection], "key = value" or a bare key (true),
// '#' and ';' comments, quoted values with \" \\ \n \t \b escapes and
// backslash-newline continuations; a setting may follow a section header
// on its line.
func parseConfig(data []byte, fn func(section, sub, key, value string, hasValue bool)) error {
	p := configParser{data: data}
	return p.parse(fn)
}

type configParser struct {
	data []byte
	i    int
	line int
}

func (p *configParser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *configParser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line+1, fmt.Sprintf(format, args...))
}

func (p *configParser) skipSpace() {
	for p.i < len(p.data) && (p.data[p.i] == ' ' || p.data[p.i] == '\t' || p.data[p.i] == '\r') {
		p.i++
	}
}

func (p *configParser) skipLine() {
	for p.i < len(p.data) && p.data[p.i] != '\n' {
		p.i++
	}
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func (p *configParser) parse(fn func(section, sub, key, value string, hasValue bool)) error {
	var section, sub string
	inSection := false
	for p.i < len(p.data) {
		p.skipSpace()
		switch c := p.peek(); {
		case c == 0:
			return nil
		case c == '\n':
			p.i++
			p.line++
		case c == '#' || c == ';':
			p.skipLine()
		case c == '[':
			var err error
			if section, sub, err = p.header(); err != nil {
				return err
			}
			inSection = true
		case isKeyChar(c):
			if !inSection {
				return p.errorf("a setting outside any section")
			}
			start := p.i
			for p.i < len(p.data) && isKeyChar(p.data[p.i]) {
				p.i++
			}
			key := strings.ToLower(string(p.data[start:p.i]))
			p.skipSpace()
			switch p.peek() {
			case '=':
				p.i++
				value, err := p.value()
				if err != nil {
					return err
				}
				fn(section, sub, key, value, true)
			case '\n', 0, '#', ';':
				fn(section, sub, key, "", false)
			default:
				return p.errorf("a key %q followed by %q", key, p.peek())
			}
		default:
			return p.errorf("unexpected %q", c)
		}
	}
	return nil
}

// header reads "[section]", "[section "sub"]" or "[section.sub]".
func (p *configParser) header() (section, sub string, err error) {
	p.i++ // '['
	start := p.i
	for p.i < len(p.data) && (isKeyChar(p.data[p.i]) || p.data[p.i] == '.') {
		p.i++
	}
	name := string(p.data[start:p.i])
	p.skipSpace()
	switch p.peek() {
	case ']':
		p.i++
		if s, rest, ok := strings.Cut(name, "."); ok {
			return strings.ToLower(s), strings.ToLower(rest), nil // the old syntax lower-cases the subsection
		}
		return strings.ToLower(name), "", nil
	case '"':
		p.i++
		var b strings.Builder
		for {
			c := p.peek()
			switch {
			case c == 0 || c == '\n':
				return "", "", p.errorf("an unterminated subsection name")
			case c == '"':
				p.i++
				if p.peek() != ']' {
					return "", "", p.errorf("a subsection name not followed by ']'")
				}
				p.i++
				return strings.ToLower(name), b.String(), nil
			case c == '\\' && p.i+1 < len(p.data) && p.data[p.i+1] != '\n':
				b.WriteByte(p.data[p.i+1])
				p.i += 2
			default:
				b.WriteByte(c)
				p.i++
			}
		}
	default:
		return "", "", p.errorf("a bad section header")
	}
}

// value reads a value up to the end of its (possibly continued) line.
func (p *configParser) value() (string, error) {
	p.skipSpace()
	var b strings.Builder
	quoted := false
	spaces := 0 // trailing unquoted white space written, cut at the end
	for {
		c := p.peek()
		switch {
		case c == 0 || c == '\n':
			if quoted {
				return "", p.errorf("an unterminated quoted value")
			}
			s := b.String()
			return s[:len(s)-spaces], nil
		case !quoted && (c == '#' || c == ';'):
			p.skipLine()
		case c == '"':
			quoted = !quoted
			spaces = 0
			p.i++
		case c == '\\':
			if p.i+1 >= len(p.data) {
				return "", p.errorf("a value ends in a backslash")
			}
			e := p.data[p.i+1]
			p.i += 2
			switch e {
			case '\n':
				p.line++
				continue // a continuation
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '"', '\\':
				b.WriteByte(e)
			default:
				return "", p.errorf("a bad escape \\%c", e)
			}
			spaces = 0
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			b.WriteByte(c)
			spaces++
			p.i++
		default:
			b.WriteByte(c)
			spaces = 0
			p.i++
		}
	}
}

// Discover finds the repository git would find from dir, as git looks:
// dir and each parent in turn, a ".git" directory, or a ".git" file naming
// one ("gitdir: …"), or the directory itself when it is a bare one; a
// candidate without HEAD, objects and refs is passed over. It returns the
// git directory and the common one (config, objects; another for a linked
// worktree), and ok false when there is none. Nothing is run; what it
// looks at is opened through op (nil: by this process), so a repository
// op may not read is none.
func Discover(op safefile.Opener, dir string) (gitDir, commonDir string, ok bool) {
	if op == nil {
		op = safefile.Here
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", false
	}
	for d := abs; ; d = filepath.Dir(d) {
		for _, cand := range []string{filepath.Join(d, ".git"), d} {
			if g, c, ok := gitDirAt(op, cand, cand != d); ok {
				return g, c, true
			}
		}
		if d == filepath.Dir(d) {
			return "", "", false
		}
	}
}

// gitDirAt says whether p is a git directory (or, when file is allowed, a
// ".git" file naming one), and its common directory.
func gitDirAt(op safefile.Opener, p string, file bool) (gitDir, commonDir string, ok bool) {
	fi, err := stat(op, p)
	if err != nil {
		return "", "", false
	}
	if !fi.IsDir() {
		if !file {
			return "", "", false
		}
		b, err := safefile.ReadFileWith(op, p, true, maxGitFile)
		if err != nil {
			return "", "", false
		}
		line, _, _ := strings.Cut(string(b), "\n")
		target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return "", "", false
		}
		if target = strings.TrimSpace(target); !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	commonDir = p
	if b, err := safefile.ReadFileWith(op, filepath.Join(p, "commondir"), true, maxGitFile); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(p, c)
		}
		commonDir = filepath.Clean(c)
	}
	if _, err := stat(op, filepath.Join(p, "HEAD")); err != nil {
		return "", "", false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := stat(op, filepath.Join(commonDir, sub)); err != nil || !fi.IsDir() {
			return "", "", false
		}
	}
	return p, commonDir, true
}

// maxGitFile bounds a ".git" file or a commondir read by Discover: a path.
const maxGitFile = 64 << 10

// stat is what p is, opened through op (links followed): a regular file
// or a directory; anything else, or what op may not open, is an error.
func stat(op safefile.Opener, p string) (fs.FileInfo, error) {
	f, fi, err := op.Open(p, safefile.OpenOptions{Follow: true, Dir: true})
	if err != nil {
		return nil, err
	}
	f.Close()
	return fi, nil
}
