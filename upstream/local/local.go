// Package local is the `local` upstream: an archive, in each agent's state
// directory, of every accepted checkpoint, capsule and session end as JSON a
// person can read (`jq . archive/2026-11-30.jsonl`). It gives the embedded
// default somewhere to ship with no network and no account.
package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/atomicfile"
)

// Kind is this upstream's kind in the config.
const Kind = "local"

// ArchiveDir is the archive's directory name inside an agent's state
// directory.
const ArchiveDir = "archive"

// Archive appends each delivered write as one JSON line to
// <agent dir>/archive/<UTC day it was accepted>.jsonl. A write delivered
// twice (after a crash, before the acknowledgement) appears twice with the
// same seq and Idempotency-Key; ReadAll keeps one.
//
// One file per day rather than per write: creating a file is the costly
// part of a small write on most file systems, and a busy agent would pay it
// for every checkpoint.
//
// Deliver only encodes the line and keeps it; Flush appends a batch's lines
// to each file with one write and makes them durable with one sync, so a
// flood of writes costs the disk a system call and a sync per batch, not
// per write (the outbox acknowledges nothing before Flush returns).
//
// A file only ever holds whole lines: an append that fails or falls short
// (a full disk takes what fits) is cut off again before the error is
// returned, and a partial last line an earlier process left (killed
// mid-append) is cut off, with a warning, when the file is opened. Either
// batch was never acknowledged, so the outbox sends it again.
type Archive struct {
	name     string
	agentDir func(agent string) string
	log      *slog.Logger
	// open opens an archive file for reading and appending; tests replace
	// it to inject failures.
	open func(path string) (file, error)

	mu    sync.Mutex
	files map[string]*archiveFile // agent/day → open file, synced at Flush
	dirty map[string]bool         // agent → something appended since the last Flush
}

// file is what the archive needs of an open file: *os.File opened for
// reading and appending.
type file interface {
	io.Writer
	io.ReaderAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

// archiveFile is an open archive file.
type archiveFile struct {
	f    file
	path string
	// size is the file's length: whole lines only, the point a failed
	// append is cut back to.
	size int64
	// lines are the lines delivered since the last Flush, not yet written.
	lines []byte
}

// New returns the archive upstream called name; agentDir maps an agent to
// its state directory. It logs to slog.Default until WithLogger.
func New(name string, agentDir func(agent string) string) *Archive {
	return &Archive{name: name, agentDir: agentDir, log: slog.Default(), open: openFile, files: map[string]*archiveFile{}, dirty: map[string]bool{}}
}

// WithLogger makes the archive log (repairs of a torn file) to log, and
// returns it.
func (a *Archive) WithLogger(log *slog.Logger) *Archive {
	a.log = log
	return a
}

func openFile(path string) (file, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
}

// Name implements upstream.Upstream.
func (a *Archive) Name() string { return a.name }

// Kind implements upstream.Upstream.
func (a *Archive) Kind() string { return Kind }

// Accepts implements upstream.Upstream: the archive keeps everything.
func (a *Archive) Accepts(capsule.WriteKind) bool { return true }

// FileName is the archive file a write goes to.
func FileName(w capsule.Write) string {
	return w.At.UTC().Format("2006-01-02") + ".jsonl"
}

// Deliver implements upstream.Upstream. The line is kept for Flush, which
// appends and syncs the batch at once; the outbox acknowledges nothing
// before it returns.
func (a *Archive) Deliver(ctx context.Context, agent string, w capsule.Write) error {
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	af, err := a.file(agent, agent+"/"+FileName(w))
	if err != nil {
		return err
	}
	af.lines = append(append(af.lines, raw...), '\n')
	a.dirty[agent] = true
	return nil
}

// maxKeptLines bounds the buffer an open file keeps for its next batch's
// lines; a larger one, grown by a batch of large capsules, is let go.
const maxKeptLines = 256 << 10

// appendLines writes the lines kept for af in one append. On error the
// file is as it was before (or, when even the cut fails, dropped to be
// repaired when it is opened again) and the lines are discarded: the
// outbox sends the batch again. a.mu is held.
func (a *Archive) appendLines(key string, af *archiveFile) error {
	lines := af.lines
	af.lines = af.lines[:0]
	if cap(lines) > maxKeptLines {
		af.lines = nil // a batch of large capsules: not held between batches
	}
	n, err := af.f.Write(lines)
	if err == nil && n != len(lines) {
		err = io.ErrShortWrite
	}
	if err == nil {
		af.size += int64(n)
		return nil
	}
	if n > 0 {
		// Part of the batch reached the file: cut it off, or the retry
		// would append the whole batch after it and leave a line no JSON
		// reader can parse.
		if terr := af.f.Truncate(af.size); terr != nil {
			a.drop(key)
			return fmt.Errorf("archive %s: appending %d bytes failed (%w) and the partial batch could not be cut off (%v); "+
				"the file is reopened and repaired before the next write", af.path, len(lines), err, terr)
		}
	}
	return fmt.Errorf("archive %s: appending %d bytes: %w%s", af.path, len(lines), err, hint(err))
}

// hint is what to do about err, for people reading the upstream's last
// error.
func hint(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return " (the disk is full; the write is sent again once there is room)"
	}
	return ""
}

// file returns the open archive file of agent for a day (key), opening it
// when needed: created and named durably the first time, and repaired when
// an earlier process left a partial last line. a.mu is held.
func (a *Archive) file(agent, key string) (*archiveFile, error) {
	if af, ok := a.files[key]; ok {
		return af, nil
	}
	dir := filepath.Join(a.agentDir(agent), ArchiveDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, key[len(agent)+1:])
	_, statErr := os.Stat(path)
	f, err := a.open(path)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := atomicfile.SyncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := a.repair(f, path); err != nil {
		f.Close()
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("archive %s: %w", path, err)
	}
	// Keep at most the newest file of an agent open; an older one with
	// lines not yet written, or that does not sync, stays open for Flush.
	for k, old := range a.files {
		if strings.HasPrefix(k, agent+"/") && k < key && len(a.files) > 1 && len(old.lines) == 0 {
			if old.f.Sync() == nil {
				old.f.Close()
				delete(a.files, k)
			}
		}
	}
	af := &archiveFile{f: f, path: path, size: fi.Size()}
	a.files[key] = af
	return af, nil
}

// repair cuts off a partial last line (an append an earlier process was
// killed in the middle of, never acknowledged, so the outbox sends it
// again).
func (a *Archive) repair(f file, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	// Find the last newline, reading backwards.
	cut := int64(0)
	buf := make([]byte, 32<<10)
	for end := size; end > 0 && cut == 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == end-start) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			cut = start + int64(i) + 1
		}
		end = start
	}
	if cut == size {
		return nil
	}
	if err := f.Truncate(cut); err != nil {
		return fmt.Errorf("cut off the partial last line (%d bytes): %w", size-cut, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	a.log.Warn("archive: cut off a partial last line an interrupted append left; the outbox sends that write again",
		"upstream", a.name, "file", path, "bytes", size-cut, "offset", cut)
	return nil
}

// Recover implements upstream.Recoverer: every archive file of agent that
// ends in a partial line (a process killed mid-append) is cut back to its
// last whole line now, not at the next append to that day's file, which
// may never come. Only the tail of each file is read.
func (a *Archive) Recover(agent string) error {
	paths, err := filepath.Glob(filepath.Join(a.agentDir(agent), ArchiveDir, "*.jsonl"))
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, path := range paths {
		if _, open := a.files[agent+"/"+filepath.Base(path)]; open {
			continue // repaired when it was opened
		}
		f, err := a.open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("archive %s: %w", path, err))
			continue
		}
		if err := a.repair(f, path); err != nil {
			errs = append(errs, fmt.Errorf("archive %s: %w", path, err))
		}
		f.Close()
	}
	return errors.Join(errs...)
}

// drop closes an archive file that may end in a partial line, so the next
// write reopens (and repairs) it. What it holds is synced first, as Flush
// would (Flush no longer sees the file); lines not yet written are
// discarded (the outbox sends them again). a.mu is held.
func (a *Archive) drop(key string) {
	if af, ok := a.files[key]; ok {
		af.f.Sync()
		af.f.Close()
		delete(a.files, key)
	}
}

// Flush implements upstream.Flusher: everything delivered for agent since
// the last Flush is appended and reaches the disk. On error nothing of the
// batch counts as delivered: lines not yet written are discarded, and the
// outbox sends the batch again (a line written twice reads as one).
func (a *Archive) Flush(ctx context.Context, agent string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.dirty[agent] {
		return nil
	}
	delete(a.dirty, agent)
	var err error
	for k, af := range a.files {
		if !strings.HasPrefix(k, agent+"/") {
			continue
		}
		switch {
		case err != nil:
			af.lines = af.lines[:0]
		case len(af.lines) > 0:
			err = a.appendLines(k, af)
		}
	}
	if err != nil {
		return err
	}
	for k, af := range a.files {
		if strings.HasPrefix(k, agent+"/") {
			if err := af.f.Sync(); err != nil {
				return fmt.Errorf("archive %s: sync: %w%s", af.path, err, hint(err))
			}
		}
	}
	return nil
}

// Close syncs and closes the open files (shutdown, reload); lines not yet
// flushed were never acknowledged and are discarded.
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first error
	for k, af := range a.files {
		if err := af.f.Sync(); err != nil && first == nil {
			first = err
		}
		af.f.Close()
		delete(a.files, k)
	}
	return first
}

// ReadAll reads an agent's archive in sequence order, one entry per seq
// (tests, tools). A torn last line (a crash mid-append) is skipped: that
// write was never acknowledged and is delivered again.
func ReadAll(agentDir string) ([]capsule.Write, error) {
	paths, err := filepath.Glob(filepath.Join(agentDir, ArchiveDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		if _, err := os.Stat(filepath.Join(agentDir, ArchiveDir)); err != nil {
			return nil, err
		}
	}
	sort.Strings(paths)
	bySeq := map[uint64]capsule.Write{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			var w capsule.Write
			if json.Unmarshal(sc.Bytes(), &w) == nil && w.Seq > 0 {
				bySeq[w.Seq] = w
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	out := make([]capsule.Write, 0, len(bySeq))
	for _, w := range bySeq {
		out = append(out, w)
	}
	slices.SortFunc(out, func(x, y capsule.Write) int {
		switch {
		case x.Seq < y.Seq:
			return -1
		case x.Seq > y.Seq:
			return 1
		}
		return 0
	})
	return out, nil
}
