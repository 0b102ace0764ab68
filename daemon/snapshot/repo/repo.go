package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/gittool"
)

// Files of the store besides git's own.
const (
	OversizedFile = "oversized.exclude" // core.excludesFile: the files skipped for their size
)

// Repo is one store on disk: the bare repository at Dir, for one work
// tree.
type Repo struct {
	dir    string
	git    *Git
	log    *slog.Logger
	listed atomic.Pointer[listedRefs] // the snapshots as last read from the refs (List)
}

// Open opens the store at dir for the work tree work, making it when
// missing, with git tool; exclude is its info/exclude (BaseExclude). What
// the store does on its own (stale locks cleared) goes to log.
func Open(ctx context.Context, dir, work string, tool *gittool.Tool, log *slog.Logger, exclude []byte) (*Repo, error) {
	r := &Repo{dir: dir, git: NewGit(tool, dir, work), log: log}
	if err := r.init(ctx, exclude); err != nil {
		return nil, err
	}
	return r, nil
}

// Dir is the store's directory.
func (r *Repo) Dir() string { return r.dir }

// Git runs git on the store.
func (r *Repo) Git() *Git { return r.git }

// init makes the bare repository when missing, clears what a killed git
// left behind, and writes the store's own ignore (exclude) and attribute
// files.
func (r *Repo) init(ctx context.Context, exclude []byte) error {
	dir := r.dir
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return fmt.Errorf("snapshot store: %s exists, is not empty and is not a snapshot store; move it away", dir)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
		// --template= copies no sample hooks; init reads no template
		// directory from any configuration (none is read at all).
		if _, err := r.git.Run(ctx, Call{Args: []string{"init", "-q", "--bare", "--template=", dir}, NoRepo: true}); err != nil {
			return fmt.Errorf("snapshot store: making %s: %w", dir, err)
		}
	} else if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	r.ClearStaleLocks()
	if err := os.MkdirAll(filepath.Join(dir, "info"), 0o700); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	// info/attributes outranks every .gitattributes of the work tree: no
	// filter, end-of-line or encoding conversion, so a snapshot holds the
	// bytes as they are and a restore writes them back as they were.
	attrs := []byte("* -text -ident -filter -working-tree-encoding\n")
	if err := WriteIfChanged(filepath.Join(dir, "info", "attributes"), attrs); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if err := WriteIfChanged(filepath.Join(dir, "info", "exclude"), exclude); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, OversizedFile)); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(filepath.Join(dir, OversizedFile), nil, 0o600); err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
	}
	return nil
}

// BaseExclude is the store's info/exclude: ignore ([watch] ignore), the
// ignored directory names (ignoreDirs), and the store (dir) and the
// paths of exclude (the state directory) when they lie in the workdir
// work, which it returns too (excludeAbs: absolute and clean). It is
// git's ignore file of the store, so the user's own .git/info/exclude is
// never read.
func BaseExclude(work, dir string, ignore, ignoreDirs, exclude []string) (file []byte, excludeAbs []string) {
	var b bytes.Buffer
	b.WriteString("# written by continuityd at every start; edits are lost\n")
	for _, p := range ignore {
		b.WriteString(p + "\n")
	}
	for _, d := range ignoreDirs {
		b.WriteString(EscapeGlob(d) + "/\n")
	}
	for _, p := range append([]string{dir}, exclude...) {
		if !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if rel, ok := Inside(work, p); ok {
			if rel == "." {
				continue // the whole workdir: nonsense, ignore
			}
			excludeAbs = append(excludeAbs, p)
			b.WriteString("/" + EscapeGlob(filepath.ToSlash(rel)) + "\n")
		}
	}
	return b.Bytes(), excludeAbs
}

// WriteIfChanged replaces a store file atomically when its content differs.
func WriteIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// ClearStaleLocks removes the lock files a git killed mid-way leaves in
// the store (index.lock, ref locks, …): the store is the daemon's alone
// and no git of ours runs while the writer lock is held, so any lock is
// stale. Readers take none (they only read refs and objects). It runs at
// open (a daemon killed mid-way) and at a Take after a git run of ours
// failed (one killed, or stopped by an error), not at every Take.
func (r *Repo) ClearStaleLocks() {
	dir := r.dir
	var stale []string
	for _, name := range []string{"index.lock", "restore.index", "restore.index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock"} {
		stale = append(stale, filepath.Join(dir, name))
	}
	_ = filepath.WalkDir(filepath.Join(dir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			stale = append(stale, p)
		}
		return nil
	})
	for _, p := range stale {
		if err := os.Remove(p); err == nil {
			r.log.Warn("snapshot store: removed a lock left by an interrupted git run", "file", p)
		}
	}
}
