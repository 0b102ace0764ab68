package restore

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// A restore is journaled. Before it changes the first file it writes
// restore.journal in the store (fsynced, atomically): the snapshot, the
// safety snapshot of the tree before it, what it was limited to, the
// workdir it acts in (device and inode), and every file it will remove or
// write; it appends its progress as it goes (every journalEvery files),
// and removes the journal once the last file is in
// place and the file system is synced. A restore interrupted by a kill, a
// crash or a full disk leaves the journal, and the next Open finishes it
// (FinishInterrupted).
//
// Finished, not rolled back: the restore was asked for, and the safety
// snapshot taken before its first change already holds the tree as it
// was, so finishing loses nothing and one command (the report's) undoes
// it; rolling back would throw away a request the client may believe done
// (the daemon can die after the last file, before its answer), and would
// need a safety snapshot and a restore of its own anyway. The finish is a
// restore of the same snapshot limited to the journaled files: it takes a
// safety snapshot of the tree as it is now (what was changed after the
// interruption is kept there) and goes through the same checks. It is
// journaled in turn, keeping the first safety snapshot, so an interrupted
// finish is finished at the start after.
//
// What was found is reported until the next successful restore, or for
// interruptedShownFor after it was found (kept in restore.interrupted
// across restarts): Interrupted, which the agent shows in status and
// resume with the command that undoes it, and a WARN in the log.

// Files of a restore's journal and report, in the store.
const (
	JournalFile     = "restore.journal"
	InterruptedFile = "restore.interrupted"
)

// journalEvery is how many files a restore changes between two synced
// progress lines of its journal.
const journalEvery = 256

// interruptedShownFor bounds how long an interrupted restore is reported
// when no successful restore came after it.
const interruptedShownFor = 7 * 24 * time.Hour

// Interrupted is a restore that a kill, a crash or a full disk
// interrupted: what it was, how far it got, and what the store did about
// it (it finishes it at its next start). It is kept as JSON across
// restarts (InterruptedFile).
type Interrupted struct {
	Snapshot string `json:"snapshot"` // the snapshot it restored
	// Safety is the snapshot of the tree before the restore: restoring it
	// (as Paths say) undoes the restore.
	Safety string `json:"safety"`
	// Paths are what the restore was limited to (none: the whole tree),
	// each in its exact form (termsafe.Exact: valid UTF-8, read back by
	// termsafe.ParseExact), as `continuityd snapshot restore --path`
	// takes it.
	Paths []string  `json:"paths,omitempty"`
	Began time.Time `json:"began"`
	// Found is when the store found it interrupted: its next start, or
	// the failure that stopped it.
	Found time.Time `json:"found"`
	Files int       `json:"files"` // the files it was to change
	Done  int       `json:"done"`  // of them, known done when it stopped (at least)
	// Finished is set once the store finished it; FinishSafety is then the
	// snapshot of the tree as the finish found it (what changed after the
	// interruption is there).
	Finished     bool   `json:"finished"`
	FinishSafety string `json:"finish_safety,omitempty"`
	// Problem says why it is not finished (yet).
	Problem string `json:"problem,omitempty"`
}

// Interrupted is the interrupted restore the store found (at Open, or a
// restore that failed part way), until a restore succeeds after it or
// interruptedShownFor passed; ok is false when there is none.
func (rs *Restorer) Interrupted() (r Interrupted, ok bool) {
	p := rs.interrupted.Load()
	if p == nil {
		return Interrupted{}, false
	}
	if rs.now().Sub(p.Found) > interruptedShownFor {
		return Interrupted{}, false
	}
	return *p, true
}

// InterruptedChanges are the files the interrupted restore found at Open
// was to change (the finish changed those still to do), each in its exact
// form (termsafe.Exact), for a caller that must not take what they lost
// for lost work; nil when Open found none.
func (rs *Restorer) InterruptedChanges() []string {
	return rs.interruptedPaths
}

// journalHead is the journal's first line.
type journalHead struct {
	V        int    `json:"v"`
	ID       string `json:"id"` // names the restore's temporary files (tempName)
	Snapshot string `json:"snapshot"`
	// Tree is the tree restored when no ref names Snapshot: a version of
	// one file from the version journal (Version).
	Tree   string    `json:"tree,omitempty"`
	Safety string    `json:"safety"`
	Paths  []string  `json:"paths,omitempty"`
	Began  time.Time `json:"began"`
	// Workdir is the directory the restore acts in (links resolved), Dev
	// and Ino its identity: a finish acts only there.
	Workdir string          `json:"workdir"`
	Dev     uint64          `json:"dev,omitempty"`
	Ino     uint64          `json:"ino,omitempty"`
	Changes []journalChange `json:"changes"`
}

// journalChange is one file of a restore: removed, or written (the i-th
// change is written under tempName(ID, i) first).
type journalChange struct {
	Path   string `json:"path"`
	Remove bool   `json:"remove,omitempty"`
}

// journalProgress is a line after the head: done files are changed.
type journalProgress struct {
	Done int `json:"done"`
}

// journal is a restore's journal being written.
type journal struct {
	head journalHead
	f    *os.File
	done int
}

// newJournalID names one restore's journal.
func newJournalID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startJournal writes the journal's head, synced, in place before the
// restore's first change. Its paths are written in their exact form
// (termsafe.Exact): JSON would turn bytes that are not UTF-8 into U+FFFD.
func (rs *Restorer) startJournal(head journalHead) (*journal, error) {
	onDisk := head
	onDisk.Paths = exactPaths(head.Paths)
	onDisk.Changes = make([]journalChange, len(head.Changes))
	for i, c := range head.Changes {
		onDisk.Changes[i] = journalChange{Path: termsafe.Exact(c.Path), Remove: c.Remove}
	}
	line, err := json.Marshal(onDisk)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(rs.dir, JournalFile)
	if err := atomicfile.WriteFile(path, append(line, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("the restore's journal cannot be written: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("the restore's journal cannot be written: %w", err)
	}
	return &journal{head: head, f: f}, nil
}

// progress notes one more file changed; every journalEvery files the
// count is appended (note).
func (j *journal) progress() error {
	j.done++
	if j.done%journalEvery != 0 {
		return nil
	}
	return j.note()
}

// note appends the count of files changed. It is not synced: a kill
// keeps it (the page cache outlives the process), a power loss may lose
// some of it, and the count is only ever "at least" (a finish redoes what
// is left from the files, not from the count).
func (j *journal) note() error {
	line, _ := json.Marshal(journalProgress{Done: j.done})
	_, err := j.f.Write(append(line, '\n'))
	return err
}

// close closes the journal's file; it stays on disk.
func (j *journal) close() { j.f.Close() }

// endJournal removes the journal of a restore that is done.
func (rs *Restorer) endJournal(j *journal) {
	j.close()
	path := filepath.Join(rs.dir, JournalFile)
	if err := os.Remove(path); err != nil {
		rs.log.Warn("snapshot store: the journal of a restore that ended cannot be removed; the next start finds nothing left to do", "err", err)
		return
	}
	atomicfile.SyncDir(rs.dir)
}

// readJournal reads a journal left in the store: its head and the last
// progress it recorded. A line cut short by a crash ends it.
func readJournal(path string) (journalHead, int, error) {
	var head journalHead
	b, err := os.ReadFile(path)
	if err != nil {
		return head, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	if !sc.Scan() {
		return head, 0, errors.New("it is empty")
	}
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil || head.V != 1 || head.Snapshot == "" || head.ID == "" {
		return head, 0, fmt.Errorf("its head does not read as a journal (%v)", err)
	}
	for i, p := range head.Paths {
		if head.Paths[i], err = termsafe.ParseExact(p); err != nil {
			return head, 0, err
		}
	}
	for i, c := range head.Changes {
		if head.Changes[i].Path, err = termsafe.ParseExact(c.Path); err != nil {
			return head, 0, err
		}
	}
	done := 0
	for sc.Scan() {
		var p journalProgress
		if json.Unmarshal(sc.Bytes(), &p) != nil {
			break
		}
		done = p.Done
	}
	return head, done, nil
}

// report is an interrupted restore from its journal.
func (h journalHead) report(done int, found time.Time) Interrupted {
	return Interrupted{Snapshot: h.Snapshot, Safety: h.Safety, Paths: exactPaths(h.Paths), Began: h.Began,
		Found: found, Files: len(h.Changes), Done: done}
}

// exactPaths are paths in their exact form (termsafe.Exact).
func exactPaths(paths []string) []string {
	if paths == nil {
		return nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = termsafe.Exact(p)
	}
	return out
}

// setInterrupted reports r (nil: nothing) and keeps it for the next start.
func (rs *Restorer) setInterrupted(r *Interrupted) {
	rs.interrupted.Store(r)
	viewstamp.Changed() // resume shows it
	path := filepath.Join(rs.dir, InterruptedFile)
	if r == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			rs.log.Warn("snapshot store: the report of an interrupted restore cannot be removed", "err", err)
		}
		return
	}
	raw, _ := json.Marshal(r)
	if err := atomicfile.WriteFile(path, raw, 0o600); err != nil {
		rs.log.Warn("snapshot store: the report of an interrupted restore cannot be kept; a restart forgets it", "err", err)
	}
}

// loadInterrupted reads the report the last run kept, if it is still to
// be shown.
func (rs *Restorer) loadInterrupted() {
	raw, err := os.ReadFile(filepath.Join(rs.dir, InterruptedFile))
	if err != nil {
		return
	}
	var r Interrupted
	if err := json.Unmarshal(raw, &r); err != nil || rs.now().Sub(r.Found) > interruptedShownFor {
		rs.setInterrupted(nil)
		return
	}
	rs.interrupted.Store(&r)
	viewstamp.Changed()
}
