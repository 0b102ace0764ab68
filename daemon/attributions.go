package daemon

import (
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/continuityd/continuityd/daemon/attribution"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/pacer"
)

// workdirLedgers holds one attribution ledger per workdir: every agent of
// the daemon that shares a workdir shares its ledger, so a change is
// credited once and each agent sees the others' claims. A ledger lives as
// long as the daemon (a reload that keeps the workdir keeps what it
// learnt). It also knows who to tell of a conflict: each agent on the
// workdir registers where its conflicts go (listen).
type workdirLedgers struct {
	mu        sync.Mutex
	m         map[string]*attribution.Ledger
	listeners map[string]map[string]func(attribution.Conflict) // workdir → agent → its feed
	// conflicts counts the conflicts found (a metric; nil in tests).
	conflicts prometheus.Counter
	// dir keeps each ledger across runs (keepIn; "" : in memory only),
	// saved is the ledger generation last written per workdir.
	dir   string
	log   *slog.Logger
	saved map[string]uint64
	// changed (buffered 1, made by keepIn) tells saveLoop that a ledger
	// changed; saveEvery is how often at most it saves (0:
	// saveLedgersEvery; tests set it).
	changed   chan struct{}
	saveEvery time.Duration
	files     map[string]*atomicfile.Slot // workdir → its ledger's file, once saved
}

func workdirKey(workdir string) string { return filepath.Clean(workdir) }

// For is the ledger of workdir ("" : none, the agent has no workdir).
func (l *workdirLedgers) For(workdir string) *attribution.Ledger {
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

// listen registers where agent's conflicts on workdir go (its wait feed),
// in place of what it registered before (a reopened agent); tell nil
// forgets it (a stopped one).
func (l *workdirLedgers) listen(workdir, agent string, tell func(attribution.Conflict)) {
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

// teller is what an agent's capture on workdir calls with the conflicts
// it finds: every agent the conflict names is told, once, whichever
// agent's event revealed it.
func (l *workdirLedgers) teller(workdir string) func(attribution.Conflict) {
	key := workdirKey(workdir)
	return func(c attribution.Conflict) {
		if l.conflicts != nil {
			l.conflicts.Inc()
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
// DefaultFlushDelay): a write (a file and its directory synced, in a
// wake-up of its own when it trails a change) cost about 1 ms of CPU in
// every other 5-file burst at 2 s (docs/PERFORMANCE.md, session 16).
const saveLedgersEvery = 5 * time.Second

// keptLedger is a ledger's file: the workdir it belongs to, and its state.
type keptLedger struct {
	Workdir string            `json:"workdir"`
	State   attribution.State `json:"state"`
}

// keepIn makes the ledgers last across runs, in stateDir/attribution: a
// restart keeps who changed what (by_others, conflicts, and a restore of
// an agent's own paths from a snapshot taken before it). Called before
// the first For.
func (l *workdirLedgers) keepIn(stateDir string, log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dir, l.log = filepath.Join(stateDir, ledgersDir), log
	l.changed = make(chan struct{}, 1)
}

// options are what each ledger is made with: its changes kick saveLoop.
// Changed is called with the ledger's lock held: it never blocks.
func (l *workdirLedgers) options() attribution.Options {
	changed := l.changed
	return attribution.Options{Changed: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
}

// file is where workdir's ledger is kept (one file per workdir, named by
// a hash of its path).
func (l *workdirLedgers) file(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(l.dir, hex.EncodeToString(sum[:8])+".json")
}

// load is the workdir's ledger as the last run left it, or a new one.
// A file that cannot be believed is set aside, loudly: only who changed
// what before now is lost, and a restore of an older snapshot then says
// so (WHOSE_UNKNOWN) instead of guessing. Called with l.mu held.
func (l *workdirLedgers) load(key string) *attribution.Ledger {
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
		return fresh()
	}
	var lg *attribution.Ledger
	if err == nil {
		lg, err = decodeLedger(raw, key, l.options())
	}
	if err != nil {
		aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().Unix())
		rerr := os.Rename(path, aside)
		l.log.Warn("the attribution ledger cannot be believed; starting a new one (who changed what before now is not known: a restore of an older snapshot needs --path or --all)",
			"workdir", key, "file", path, "set_aside_as", aside, "err", err, "rename_err", rerr)
		return fresh()
	}
	if l.saved == nil {
		l.saved = map[string]uint64{}
	}
	l.saved[key] = lg.Generation()
	return lg
}

// decodeLedger is the ledger a kept file holds, checked: it must be
// workdir's, and its state passes attribution.Restore's checks.
func decodeLedger(raw []byte, workdir string, o attribution.Options) (*attribution.Ledger, error) {
	var k keptLedger
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	if k.Workdir != workdir {
		return nil, fmt.Errorf("it is the ledger of workdir %q", k.Workdir)
	}
	return attribution.Restore(o, k.State)
}

// save writes every ledger that changed since it was last written.
func (l *workdirLedgers) save() {
	l.mu.Lock()
	if l.dir == "" {
		l.mu.Unlock()
		return
	}
	type job struct {
		key  string
		lg   *attribution.Ledger
		gen  uint64
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
			jobs = append(jobs, job{key, lg, g, l.files[key]})
		}
	}
	l.mu.Unlock()
	for _, j := range jobs {
		raw, err := json.Marshal(keptLedger{Workdir: j.key, State: j.lg.State()})
		if err == nil {
			if err = os.MkdirAll(l.dir, 0o700); err == nil {
				err = j.file.Write(raw)
			}
		}
		if err != nil {
			l.log.Warn("cannot keep the attribution ledger; it is kept in memory and tried again", "workdir", j.key, "file", l.file(j.key), "err", err)
			continue
		}
		l.mu.Lock()
		if l.saved == nil {
			l.saved = map[string]uint64{}
		}
		l.saved[j.key] = j.gen
		l.mu.Unlock()
	}
}

// saveLoop writes the changed ledgers, at most once per saveLedgersEvery
// (a change after a quiet interval at once), until ctx ends; the last
// write is the caller's (after the agents stopped).
func (l *workdirLedgers) saveLoop(ctx context.Context) {
	pacer.Run(ctx, l.changed, cmp.Or(l.saveEvery, saveLedgersEvery), l.save)
}
