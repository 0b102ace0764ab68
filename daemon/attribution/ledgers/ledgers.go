// Package ledgers keeps the daemon's attribution ledgers (package
// attribution), one per workdir: shared by every agent working in it,
// telling each agent a conflict names, and kept across runs in the state
// directory as a file written whole and a journal of what changed since,
// by a save loop that writes at most once an interval (the daemon writes
// them a last time once its agents stopped). The rules of whose work a change is are package attribution's;
// this package is where they live on disk and whom they are told to.
package ledgers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/pacer"
)

// Set holds one attribution ledger per workdir: every agent of
// the daemon that shares a workdir shares its ledger, so a change is
// credited once and each agent sees the others' claims. A ledger lives as
// long as the daemon (a reload that keeps the workdir keeps what it
// learnt). It also knows who to tell of a conflict: each agent on the
// workdir registers where its conflicts go (Listen). The zero Set holds
// its ledgers in memory only (see KeepIn).
type Set struct {
	// Conflicts counts the conflicts found (the daemon's metric; nil: not
	// counted). Set it before the first For.
	Conflicts interface{ Inc() }

	mu        sync.Mutex
	m         map[string]*attribution.Ledger
	listeners map[string]map[string]func(attribution.Conflict) // workdir → agent → its feed
	// maxShell bounds a shell window without its end ([watch] shell_max;
	// 0: the ledger's default).
	maxShell time.Duration
	// dir keeps each ledger across runs (KeepIn; "" : in memory only),
	// saved is the ledger generation last written per workdir.
	dir   string
	log   *slog.Logger
	saved map[string]uint64
	// changed (buffered 1, made by KeepIn) tells SaveLoop that a ledger
	// changed; saveEvery is how often at most it saves (0:
	// saveLedgersEvery; tests set it).
	changed   chan struct{}
	saveEvery time.Duration
	files     map[string]*atomicfile.Slot // workdir → its ledger's file, once saved
	// saveMu is held by Save: the save loop's and the shutdown's never
	// interleave. journals (under saveMu) is each workdir's journal since
	// its ledger was last written whole in this run; none: the next write
	// is whole. genBase (under mu) is added to a ledger's Generation in
	// what is kept: the largest generation the run before kept, so that
	// kept generations only grow.
	saveMu   sync.Mutex
	journals map[string]*ledgerJournal
	genBase  map[string]uint64
}

// ledgerJournal is what Save knows of a workdir's journal: the bytes
// appended since the ledger was written whole, and that write's size.
type ledgerJournal struct {
	appended, whole int64
}

// A ledger is kept as its file (keptLedger, written whole) and a journal
// beside it (NAME.journal): one line per later write, what changed since
// the one before (journalRecord). A burst's write appends its few paths
// instead of writing every path the ledger holds (BenchmarkLedgerSave:
// 31.7 ms for a ledger of 20,000 paths, against 0.6-0.8 ms for the change
// alone). The ledger is written whole at the first write of a run, after
// a failed write, and when the journal outgrows it (minJournal at least),
// and the journal is emptied then. Each record and the whole file carry
// the generation they bring the ledger to; a load applies, in order, the
// records past the file's, so a journal left over from before the last
// whole write (a crash before it was emptied) changes nothing.
const (
	journalExt = ".journal"
	minJournal = 64 << 10
)

// journalRecord is one line of a ledger's journal.
type journalRecord struct {
	Gen   uint64            `json:"gen"`
	Delta attribution.Delta `json:"delta"`
}

func workdirKey(workdir string) string { return filepath.Clean(workdir) }

// For is the ledger of workdir ("" : none, the agent has no workdir).
func (l *Set) For(workdir string) *attribution.Ledger {
	if workdir == "" {
		return nil
	}
	key := workdirKey(workdir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*attribution.Ledger{}
	}
	if lg, ok := l.m[key]; ok {
		return lg
	}
	lg := l.load(key)
	l.m[key] = lg
	return lg
}

// Listen registers where agent's conflicts on workdir go (its wait feed),
// in place of what it registered before (a reopened agent); tell nil
// forgets it (a stopped one).
func (l *Set) Listen(workdir, agent string, tell func(attribution.Conflict)) {
	if workdir == "" {
		return
	}
	key := workdirKey(workdir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if tell == nil {
		delete(l.listeners[key], agent)
		return
	}
	if l.listeners == nil {
		l.listeners = map[string]map[string]func(attribution.Conflict){}
	}
	if l.listeners[key] == nil {
		l.listeners[key] = map[string]func(attribution.Conflict){}
	}
	l.listeners[key][agent] = tell
}

// Teller is what an agent's capture on workdir calls with the conflicts
// it finds: every agent the conflict names is told, once, whichever
// agent's event revealed it.
func (l *Set) Teller(workdir string) func(attribution.Conflict) {
	key := workdirKey(workdir)
	return func(c attribution.Conflict) {
		if l.Conflicts != nil {
			l.Conflicts.Inc()
		}
		l.mu.Lock()
		var tell []func(attribution.Conflict)
		for _, name := range c.Agents {
			if f := l.listeners[key][name]; f != nil {
				tell = append(tell, f)
			}
		}
		l.mu.Unlock()
		for _, f := range tell {
			f(c)
		}
	}
}

// ledgersDir is where the ledgers are kept, under the state directory.
const ledgersDir = "attribution"

// saveLedgersEvery is how often at most changed ledgers are written. A
// crash loses at most that much of who changed what: those changes then
// belong to nobody, and a restore of an agent's own paths leaves them
// alone. It is the residency's lag behind its log (storage's
// DefaultFlushDelay): a write (then the whole file and its directory
// synced, in a wake-up of its own when it trails a change) cost about 1 ms
// of CPU in every other 5-file burst at 2 s (BenchmarkSnapshotBurstCPU).
const saveLedgersEvery = 5 * time.Second

// keptLedger is a ledger's file: the workdir it belongs to, and its state
// at generation Gen (0 in files from before the journal).
type keptLedger struct {
	Workdir string            `json:"workdir"`
	Gen     uint64            `json:"gen,omitempty"`
	State   attribution.State `json:"state"`
}

// KeepIn makes the ledgers last across runs, in stateDir/attribution: a
// restart keeps who changed what (by_others, conflicts, and a restore of
// an agent's own paths from a snapshot taken before it). Called before
// the first For.
func (l *Set) KeepIn(stateDir string, log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dir, l.log = filepath.Join(stateDir, ledgersDir), log
	l.changed = make(chan struct{}, 1)
}

// SetMaxShell bounds the shell windows of every ledger, made or to come
// ([watch] shell_max, at start and at each reload).
func (l *Set) SetMaxShell(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxShell = d
	for _, lg := range l.m {
		lg.SetMaxShell(d)
	}
}

// options are what each ledger is made with: its changes kick SaveLoop.
// Changed is called with the ledger's lock held: it never blocks.
func (l *Set) options() attribution.Options {
	changed := l.changed
	return attribution.Options{MaxShell: l.maxShell, Changed: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
}

// file is where workdir's ledger is kept (one file per workdir, named by
// a hash of its path).
func (l *Set) file(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(l.dir, hex.EncodeToString(sum[:8])+".json")
}

// load is the workdir's ledger as the last run left it, or a new one.
// A file that cannot be believed is set aside, loudly: only who changed
// what before now is lost, and a restore of an older snapshot then says
// so (WHOSE_UNKNOWN) instead of guessing. Called with l.mu held.
func (l *Set) load(key string) *attribution.Ledger {
	fresh := func() *attribution.Ledger {
		o := l.options()
		o.Since = time.Now()
		return attribution.New(o)
	}
	if l.dir == "" {
		return fresh()
	}
	path := l.file(key)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		l.journalAside(key, path+journalExt, "orphan", "the attribution ledger's journal has no ledger file beside it; it is set aside")
		return fresh()
	}
	var lg *attribution.Ledger
	var gen uint64
	if err == nil {
		lg, gen, err = l.decodeKept(raw, key, path+journalExt)
	}
	if err != nil {
		aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().Unix())
		rerr := os.Rename(path, aside)
		l.log.Warn("the attribution ledger cannot be believed; starting a new one (who changed what before now is not known: a restore of an older snapshot needs --path or --all)",
			"workdir", key, "file", path, "set_aside_as", aside, "err", err, "rename_err", rerr)
		l.journalAside(key, path+journalExt, "damaged", "the attribution ledger's journal goes aside with its ledger file")
		return fresh()
	}
	if l.saved == nil {
		l.saved = map[string]uint64{}
	}
	if l.genBase == nil {
		l.genBase = map[string]uint64{}
	}
	l.saved[key], l.genBase[key] = lg.Generation(), gen
	return lg
}

// journalAside renames a journal a new ledger must not read (a new
// ledger's generations start again: its records would be taken for the
// new one's) to NAME.journal.WHAT-TIME, with a warning, if there is one.
func (l *Set) journalAside(key, journal, what, why string) {
	if _, err := os.Lstat(journal); err != nil {
		return
	}
	aside := fmt.Sprintf("%s.%s-%d", journal, what, time.Now().Unix())
	rerr := os.Rename(journal, aside)
	l.log.Warn(why, "workdir", key, "file", journal, "set_aside_as", aside, "rename_err", rerr)
}

// decodeKept is the ledger a kept file and its journal hold, and the
// generation they bring it to. The journal's records past the file's
// generation are applied in order; a line that does not decode ends them,
// loudly: the last one was cut short by a crash (its changes belong to
// nobody), one before it means the journal is damaged, and it is set
// aside (as NAME.journal.damaged-TIME) with what followed it.
func (l *Set) decodeKept(raw []byte, workdir, journal string) (*attribution.Ledger, uint64, error) {
	var k keptLedger
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, 0, err
	}
	if k.Workdir != workdir {
		return nil, 0, fmt.Errorf("it is the ledger of workdir %q", k.Workdir)
	}
	gen := k.Gen
	var deltas []attribution.Delta
	jraw, err := os.ReadFile(journal)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("the attribution ledger's journal cannot be read; the ledger is as last written whole", "workdir", workdir, "file", journal, "err", err)
	}
	for n, rest := 1, jraw; len(rest) > 0; n++ {
		line, after, complete := bytes.Cut(rest, []byte("\n"))
		var rec journalRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			if !complete {
				l.log.Warn("the attribution ledger's journal ends with a write cut short (a crash); the changes in it belong to nobody", "workdir", workdir, "file", journal, "line", n)
				break
			}
			aside := fmt.Sprintf("%s.damaged-%d", journal, time.Now().Unix())
			rerr := os.Rename(journal, aside)
			l.log.Warn("the attribution ledger's journal is damaged; the ledger is taken up to the line before, the changes after it belong to nobody",
				"workdir", workdir, "file", journal, "line", n, "set_aside_as", aside, "err", err, "rename_err", rerr)
			break
		}
		if rec.Gen > gen {
			deltas = append(deltas, rec.Delta)
			gen = rec.Gen
		}
		rest = after
	}
	k.State.Apply(deltas...)
	lg, err := attribution.Restore(l.options(), k.State)
	return lg, gen, err
}

// Save writes every ledger that changed since it was last written: what
// changed, appended to its journal, or the whole ledger (see journalExt).
func (l *Set) Save() {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	if l.dir == "" {
		l.mu.Unlock()
		return
	}
	type job struct {
		key  string
		lg   *attribution.Ledger
		base uint64
		file *atomicfile.Slot
	}
	var jobs []job
	for key, lg := range l.m {
		if g := lg.Generation(); g != l.saved[key] {
			if l.files == nil {
				l.files = map[string]*atomicfile.Slot{}
			}
			if l.files[key] == nil {
				l.files[key] = atomicfile.NewSlot(l.file(key), 0o600, true)
			}
			jobs = append(jobs, job{key, lg, l.genBase[key], l.files[key]})
		}
	}
	l.mu.Unlock()
	for _, j := range jobs {
		gen, err := l.saveOne(j.key, j.lg, j.base, j.file)
		if err != nil {
			delete(l.journals, j.key) // the next write is whole
			l.log.Warn("cannot keep the attribution ledger; it is kept in memory and tried again", "workdir", j.key, "file", l.file(j.key), "err", err)
			continue
		}
		l.mu.Lock()
		if l.saved == nil {
			l.saved = map[string]uint64{}
		}
		l.saved[j.key] = gen
		l.mu.Unlock()
	}
}

// saveOne writes workdir key's ledger (generations kept as base plus the
// ledger's own), and returns the ledger's generation it wrote. Called
// with saveMu held.
func (l *Set) saveOne(key string, lg *attribution.Ledger, base uint64, file *atomicfile.Slot) (uint64, error) {
	journal := l.file(key) + journalExt
	if jn := l.journals[key]; jn != nil && jn.appended <= max(minJournal, jn.whole) {
		d, gen := lg.TakeDelta()
		if d.Empty() {
			return gen, nil
		}
		line, err := json.Marshal(journalRecord{Gen: base + gen, Delta: d})
		if err == nil {
			err = appendSynced(journal, append(line, '\n'))
		}
		jn.appended += int64(len(line) + 1)
		return gen, err
	}
	st, gen := lg.TakeState()
	raw, err := json.Marshal(keptLedger{Workdir: key, Gen: base + gen, State: st})
	if err == nil {
		if err = os.MkdirAll(l.dir, 0o700); err == nil {
			err = file.Write(raw)
		}
	}
	if err != nil {
		return gen, err
	}
	// Emptied, not synced: a journal left whole by a crash holds only
	// generations the file has.
	if err := os.Truncate(journal, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return gen, err
	}
	if l.journals == nil {
		l.journals = map[string]*ledgerJournal{}
	}
	l.journals[key] = &ledgerJournal{whole: int64(len(raw))}
	return gen, nil
}

// appendSynced appends b to the file at path (made if need be, with its
// directory synced then) and syncs it.
func appendSynced(path string, b []byte) error {
	made := false
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		made = true
	}
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = atomicfile.SyncData(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && made {
		err = atomicfile.SyncDir(filepath.Dir(path))
	}
	return err
}

// SaveLoop writes the changed ledgers, at most once per saveLedgersEvery
// (a change after a quiet interval at once), until ctx ends; the last
// write is the caller's (after the agents stopped).
func (l *Set) SaveLoop(ctx context.Context) {
	pacer.Run(ctx, l.changed, cmp.Or(l.saveEvery, saveLedgersEvery), l.Save)
}
