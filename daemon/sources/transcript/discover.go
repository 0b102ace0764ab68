package transcript

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/continuityd/continuityd/internal/safefile"
)

// ClaudeProjectDir returns the folder in which Claude Code keeps the
// transcripts of sessions launched in launchDir:
// claudeHome/projects/<EncodeClaudeProject(launchDir)>. claudeHome is
// Claude Code's own folder (~/.claude, or $CLAUDE_CONFIG_DIR), the
// transcripts.claude_home of the configuration: not the user's home. It is
// the directory Claude Code was started in that counts, not a later cwd.
//
// A name longer than claudeMaxName is cut there and given a hash of the
// launch directory ("<first 200>-<hash>"), and the hash depends on the
// runtime Claude Code ran on (Bun's own hash for the CLI, a 32-bit string
// hash under Node.js). So for a long name the folder is found the way
// Claude Code's SDK finds it: the existing folder that starts with the cut
// name and a dash (the most recently modified, if several do); when none
// exists yet, the Node.js name.
func ClaudeProjectDir(claudeHome, launchDir string) string {
	projects := filepath.Join(claudeHome, "projects")
	name := EncodeClaudeProject(launchDir)
	if len(name) <= claudeMaxName {
		return filepath.Join(projects, name)
	}
	prefix := name[:claudeMaxName] + "-"
	var best string
	var bestMod time.Time
	entries, _ := os.ReadDir(projects)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && (best == "" || fi.ModTime().After(bestMod)) {
			best, bestMod = e.Name(), fi.ModTime()
		}
	}
	if best == "" {
		best = prefix + claudeNodeHash(launchDir)
	}
	return filepath.Join(projects, best)
}

// claudeMaxName is the longest project-folder name Claude Code uses
// uncut (its MAX_SANITIZED_LENGTH, counted in UTF-16 code units, which
// EncodeClaudeProject's ASCII output has one byte each).
const claudeMaxName = 200

// claudeNodeHash is the suffix Claude Code gives a cut name when it runs on
// Node.js: Math.abs of the JavaScript 32-bit hash h = h*31 + c over the
// launch directory's UTF-16 code units, in base 36.
func claudeNodeHash(launchDir string) string {
	var h int32
	for _, c := range utf16.Encode([]rune(launchDir)) {
		h = h*31 + int32(c)
	}
	return strconv.FormatInt(int64(math.Abs(float64(h))), 36)
}

// EncodeClaudeProject names a launch directory the way Claude Code names
// its project folders: every character that is not an ASCII letter or digit
// becomes "-" ("/tmp/shp-schemas-tx.blIf90/work" →
// "-tmp-shp-schemas-tx-blIf90-work", `C:\Users\Techn` → "C--Users-Techn").
// Claude Code does this with a JavaScript regular expression, which sees
// UTF-16 code units, so a character outside the Basic Multilingual Plane
// becomes two dashes here too.
func EncodeClaudeProject(launchDir string) string {
	var b strings.Builder
	b.Grow(len(launchDir))
	for _, r := range launchDir {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// LatestClaudeTranscript returns the most recently modified session
// transcript (*.jsonl) directly in projectDir. Side-chain files
// (agent-*.jsonl: subagents and the compaction summarizer) are not session
// transcripts and are skipped. It returns an error satisfying
// errors.Is(err, fs.ErrNotExist) when there is none.
func LatestClaudeTranscript(projectDir string) (string, error) {
	path, _, err := NewestClaudeTranscript(projectDir)
	return path, err
}

// NewestClaudeTranscript is LatestClaudeTranscript with the transcript's
// modification time.
func NewestClaudeTranscript(projectDir string) (path string, modTime time.Time, err error) {
	files, err := claudeTranscripts(projectDir)
	if err != nil {
		return "", time.Time{}, err
	}
	if len(files) == 0 {
		return "", time.Time{}, fmt.Errorf("no Claude Code transcript in %s: %w", projectDir, fs.ErrNotExist)
	}
	newestFirst(files)
	return files[0].path, files[0].mtime, nil
}

// claudeTranscripts lists the session transcripts directly in projectDir.
func claudeTranscripts(projectDir string) ([]candidate, error) {
	entries, err := os.ReadDir(projectDir)
	if err != nil {
		return nil, err
	}
	var files []candidate
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".jsonl") || strings.HasPrefix(name, "agent-") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		files = append(files, candidate{filepath.Join(projectDir, name), fi.ModTime()})
	}
	return files, nil
}

// LatestCodexRollout returns the most recently modified Codex rollout
// (rollout-*.jsonl, anywhere under sessionsRoot, normally
// ~/.codex/sessions/YYYY/MM/DD/) whose session_meta cwd is cwd. Files are
// ordered by modification time rather than by their dated folder because a
// resumed session keeps appending to its original, older-dated file. It
// returns an error satisfying errors.Is(err, fs.ErrNotExist) when none
// matches.
func LatestCodexRollout(sessionsRoot, cwd string) (string, error) {
	path, _, err := NewestCodexRollout(sessionsRoot, cwd)
	return path, err
}

// NewestCodexRollout is LatestCodexRollout with the rollout's
// modification time.
func NewestCodexRollout(sessionsRoot, cwd string) (path string, modTime time.Time, err error) {
	files, err := codexRollouts(sessionsRoot)
	if err != nil {
		return "", time.Time{}, err
	}
	newestFirst(files)
	want := filepath.Clean(cwd)
	for _, f := range files {
		if dir, _ := codexRolloutCwd(safefile.Here, f.path); dir != "" && filepath.Clean(dir) == want {
			return f.path, f.mtime, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("no Codex rollout for %s under %s: %w", cwd, sessionsRoot, fs.ErrNotExist)
}

// codexRollouts lists the rollout files anywhere under sessionsRoot.
func codexRollouts(sessionsRoot string) ([]candidate, error) {
	var files []candidate
	err := filepath.WalkDir(sessionsRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == sessionsRoot {
				return err
			}
			return nil // an unreadable subfolder hides only its own files
		}
		name := d.Name()
		if !d.Type().IsRegular() || !strings.HasPrefix(name, "rollout-") || !strings.HasSuffix(name, ".jsonl") {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			files = append(files, candidate{path, fi.ModTime()})
		}
		return nil
	})
	return files, err
}

// maxMetaLine bounds the first line of a rollout read for its cwd; the
// session_meta carries the base instructions and can be tens of kilobytes.
const maxMetaLine = 4 << 20

// codexRolloutCwd reads the cwd from a rollout's first line, its
// session_meta. final is false while that is not known yet (the file is
// missing, or its first line is not complete yet), so the caller may look
// again later; a complete first line that names no cwd gives "" and true.
func codexRolloutCwd(op safefile.Opener, path string) (cwd string, final bool) {
	f, _, err := op.Open(path, safefile.OpenOptions{}) // a FIFO or a link is no rollout
	if err != nil {
		var refused *safefile.Error
		return "", errors.As(err, &refused)
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxMetaLine)).ReadBytes('\n')
	switch {
	case err == nil, errors.Is(err, io.EOF) && len(line) == maxMetaLine:
	case errors.Is(err, io.EOF):
		// No newline yet: Codex may be writing it. If it already decodes,
		// it is whole.
		var l codexLine
		if decodeLine(bytes.TrimSpace(line), &l) != nil {
			return "", false
		}
	default:
		return "", false
	}
	var l codexLine
	if decodeLine(bytes.TrimSpace(line), &l) != nil || l.Type.v != "session_meta" || !l.Payload.ok {
		return "", true
	}
	if !l.Payload.v.Cwd.ok {
		return "", true
	}
	return l.Payload.v.Cwd.v, true
}

type candidate struct {
	path  string
	mtime time.Time
}

// newestFirst sorts by modification time, newest first; equal times fall
// back to the name, descending, so the choice is stable.
func newestFirst(c []candidate) {
	sort.Slice(c, func(i, j int) bool {
		if !c[i].mtime.Equal(c[j].mtime) {
			return c[i].mtime.After(c[j].mtime)
		}
		return c[i].path > c[j].path
	})
}
