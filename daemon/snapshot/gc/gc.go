// Package gc applies a snapshot store's retention and collects its
// garbage, in the background as soon as the store passes its bounds.
package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
)

// Result says what a GC did.
type Result struct {
	Dropped   int           // snapshots removed by retention
	Kept      int           // snapshots left
	Bytes     int64         // the store's size on disk afterwards
	Took      time.Duration //
	OverBytes bool          // the newest snapshot alone is over KeepBytes
}

// gcEvery is how many new snapshots make a GC due even under the bounds
// (each leaves loose objects or a small pack; git's own gc.autoPackLimit
// is 50 packs too).
const gcEvery = 50

// Collector runs the store's GC in the background: each new snapshot
// (Take, a restore's safety snapshot) asks it to look, and it runs a GC
// when the store has passed KeepBytes, holds more than KeepCount
// snapshots, or gcEvery were taken since the last. A Take never waits for
// it: a GC holds the writer lock only to read and delete refs.
type Collector struct {
	repo      *repo.Repo
	lock      *repo.WriteLock
	keepCount int
	keepBytes int64
	log       *slog.Logger

	// Under the writer lock: the snapshots held, and those made since the
	// last GC.
	count, since int
	holds        atomic.Int32 // Hold callers: GC keeps unreferenced objects
	// CompactHook, when set (by tests), runs as a GC starts to pack: it
	// holds a GC there.
	CompactHook func()
	// BeforeCompact, when set, runs as a GC starts to pack, before the
	// refs are read: the version journal points its ref at the blobs it
	// keeps. A failure fails the GC (the journal's blobs would go).
	BeforeCompact func(ctx context.Context) error

	kick   chan struct{} // buffered 1: a snapshot was made
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has ended

	mu      sync.Mutex
	queued  bool   // kicked, not yet looked at
	running bool   // a look (and maybe a GC) is under way
	floor   int64  // the store's size after the last GC when it was over KeepBytes
	failure string // why the last GC failed; "" after one that worked
	// measured is the store's size at the last count, and unmeasured at
	// most what the snapshots since added (the bytes of the files they
	// read, plus slack); known is false when that bound is not known (a
	// full Take, a GC, Open), and the size is counted again.
	measured, unmeasured int64
	known                bool
	// lastCut is the cut of the last GC's compaction (zero before one
	// since Open): the loose objects older than it are those that GC kept
	// for Takes beside it, unreachable then (heldBytes).
	lastCut time.Time
	run     sync.Mutex
}

// Start starts the background GC of r, which holds count snapshots, to
// the bounds keepCount and keepBytes; Stop stops it. lock is the store's
// writer lock.
func Start(r *repo.Repo, lock *repo.WriteLock, count, keepCount int, keepBytes int64, log *slog.Logger) *Collector {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Collector{repo: r, lock: lock, count: count, keepCount: keepCount, keepBytes: keepBytes, log: log,
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.collect(ctx)
	return c
}

// Stop cancels a GC under way (git is killed: what it leaves is deleted
// by the next) and waits for the loop to end.
func (c *Collector) Stop() {
	c.cancel()
	<-c.done
}

// Made tells the collector a snapshot was made that added at most added
// bytes to the store (negative: not known). The caller holds the writer
// lock. It never blocks.
func (c *Collector) Made(added int64) {
	c.count++
	c.since++
	c.Kick(added)
}

// Kick has the collector look whether a GC is due, the store having grown
// by at most added bytes since it last looked (negative: not known). It
// never blocks.
func (c *Collector) Kick(added int64) {
	c.mu.Lock()
	c.queued = true
	if added < 0 {
		c.known = false
	} else {
		c.unmeasured += added + snapshotSlack
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Idle reports whether the collector has nothing to do and is doing
// nothing.
func (c *Collector) Idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.queued && !c.running
}

// Hold keeps GC from deleting objects no ref reaches yet (an import's,
// written before Import names them) until release is called.
func (c *Collector) Hold() (release func()) {
	c.holds.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.holds.Add(-1) }) }
}

func (c *Collector) collect(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		c.mu.Lock()
		c.queued, c.running = false, true
		c.mu.Unlock()
		if due, err := c.due(ctx); err != nil {
			c.failed(ctx, err)
		} else if due {
			res, err := c.GC(ctx)
			if err != nil {
				c.failed(ctx, err)
			} else {
				c.log.Debug("snapshot store: collected", "dropped", res.Dropped, "kept", res.Kept, "bytes", res.Bytes, "took", res.Took)
			}
		}
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}
}

func (c *Collector) failed(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, repo.ErrClosed) {
		return
	}
	c.mu.Lock()
	first := c.failure == ""
	c.failure = "garbage collection of the snapshot store failed: " + err.Error()
	c.mu.Unlock()
	viewstamp.Changed() // resume names the snapshots degraded
	if first {
		c.log.Warn("snapshot store: garbage collection failed; the agent shows degraded [\"snapshots\"] until one works, tried again after the next snapshot", "err", err)
	}
}

// Problem says why the store's last garbage collection failed, or ""
// when it worked (or none ran yet): a store that cannot collect grows
// without bound, so the agent shows it as degraded.
func (c *Collector) Problem() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

// due says whether a GC is due: the store passed KeepBytes (measured
// with git count-objects, which lists the object directories and reads no
// object), holds more than KeepCount snapshots, or gcEvery snapshots were
// made since the last GC. When the newest snapshot alone is over
// KeepBytes, the store must grow by KeepBytes again first.
func (c *Collector) due(ctx context.Context) (bool, error) {
	c.lock.Lock()
	count, since := c.count, c.since
	c.lock.Unlock()
	if count > c.keepCount || since >= gcEvery {
		return true, nil
	}
	c.mu.Lock()
	floor := c.floor
	bound, known := c.measured+c.unmeasured, c.known
	c.mu.Unlock()
	if known && bound <= c.keepBytes+floor {
		// The snapshots since the last count cannot have passed the bound:
		// no count (git count-objects stats every loose object, which
		// after a first snapshot of a large tree is every file).
		return false, nil
	}
	n, err := c.objectBytes(ctx)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.measured, c.unmeasured, c.known = n, 0, true
	c.mu.Unlock()
	return n > c.keepBytes+floor, nil
}

// snapshotSlack is what a snapshot adds to the store beside its files'
// contents, at most: its commit and the trees on the changed paths.
const snapshotSlack = 64 << 10

// objectBytes is the disk space of the store's objects, loose and packed,
// as git count-objects -v says.
func (c *Collector) objectBytes(ctx context.Context) (int64, error) {
	loose, packed, err := c.objectSizes(ctx)
	return loose + packed, err
}

// objectSizes is the disk space of the store's loose objects (and the
// garbage git counts beside them) and of its packs, as git count-objects
// -v says (in KiB).
func (c *Collector) objectSizes(ctx context.Context) (loose, packed int64, err error) {
	out, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"count-objects", "-v"}})
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot store %s: %w", c.repo.Dir(), err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k != "size" && k != "size-pack" && k != "size-garbage" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("snapshot store %s: count-objects said %q", c.repo.Dir(), line)
		}
		if k == "size-pack" {
			packed += n << 10
		} else {
			loose += n << 10
		}
	}
	return loose, packed, nil
}

// heldBytes is what the snapshots take, as well as it is known before
// packing: the packs (what the last GC found reachable, the snapshots
// dropped since still in them, and the packs of the Takes from what
// changed since), and the loose objects written since the last GC's cut
// (the full Takes since: one writes, or rewrites, every object it needs
// that is not packed). The loose objects from
// before that cut are those the last GC kept for Takes beside it,
// unreachable, and this GC deletes them: counted, they would drop
// snapshots that fit. Before a GC since Open, every loose object counts.
func (c *Collector) heldBytes(ctx context.Context) (int64, error) {
	loose, packed, err := c.objectSizes(ctx)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	since := c.lastCut
	c.mu.Unlock()
	if since.IsZero() {
		return loose + packed, nil
	}
	young, err := looseSince(filepath.Join(c.repo.Dir(), "objects"), since)
	if err != nil {
		return 0, fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
	}
	return packed + young, nil
}

// looseSince is the size of the loose objects under objects changed
// after t.
func looseSince(objects string, t time.Time) (int64, error) {
	fans, err := os.ReadDir(objects)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, fan := range fans {
		if len(fan.Name()) != 2 || !fan.IsDir() {
			continue // pack/, info/
		}
		ents, err := os.ReadDir(filepath.Join(objects, fan.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned while listed
		}
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, err
			}
			if fi.Mode().IsRegular() && fi.ModTime().After(t) {
				n += fi.Size()
			}
		}
	}
	return n, nil
}

// GC applies retention and compacts the store: it drops the oldest
// snapshots beyond KeepCount, then more of the oldest while the store is
// over KeepBytes (the newest is always kept), packs what is left and
// deletes the rest. The store runs it itself when one is due; a Take
// waits for it only while it reads or deletes refs, never while git packs
// or prunes.
func (c *Collector) GC(ctx context.Context) (Result, error) {
	c.run.Lock() // one GC at a time
	defer c.run.Unlock()
	start := time.Now()
	var res Result
	keep, cut, err := c.dropOldest(ctx, func(n int) int { return min(n, c.keepCount) }, &res)
	if err != nil {
		return res, err
	}
	c.lock.Lock()
	_, err = c.dropImported(ctx) // the snapshots fetched from elsewhere keep to KeepCount too
	c.lock.Unlock()
	if err != nil {
		return res, err
	}
	// Packing is the costly part: the objects are measured first (git
	// count-objects, less the last GC's leftovers), and the snapshots
	// that cannot fit dropped before they are packed.
	size, err := c.heldBytes(ctx)
	if err != nil {
		return res, err
	}
	if size > c.keepBytes && keep > 1 {
		if keep, cut, err = c.dropOldest(ctx, fitting(c.keepBytes, size), &res); err != nil {
			return res, err
		}
	}
	for round := 1; ; round++ {
		if err := c.compact(ctx, cut); err != nil {
			return res, err
		}
		if res.Bytes, err = DirBytes(c.repo.Dir()); err != nil {
			return res, fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
		}
		// What the kept snapshots take is the pack just made: the loose
		// objects left are the next GC's (those kept for Takes beside
		// this one, and what those Takes wrote), so a GC packs twice at
		// most.
		_, packed, err := c.objectSizes(ctx)
		if err != nil {
			return res, err
		}
		if packed <= c.keepBytes || keep <= 1 || round == 2 {
			res.OverBytes = packed > c.keepBytes && keep <= 1
			break
		}
		// Still over the byte budget (the snapshots differ in size):
		// drop more of the oldest and measure again.
		if keep, cut, err = c.dropOldest(ctx, fitting(c.keepBytes, packed), &res); err != nil {
			return res, err
		}
	}
	res.Kept = keep
	c.mu.Lock()
	if c.failure != "" {
		c.log.Info("snapshot store: garbage collection works again")
		viewstamp.Changed() // the lock is held: a resume after it reads the failure gone
	}
	c.failure = ""
	c.known = false // counted again at the next look
	c.lastCut = cut
	c.floor = 0
	if res.OverBytes {
		c.floor = res.Bytes
	}
	c.mu.Unlock()
	res.Took = time.Since(start)
	if res.Dropped > 0 || res.OverBytes {
		c.log.Info("snapshot store: retention", "dropped", res.Dropped, "kept", res.Kept, "bytes", res.Bytes,
			"keep_count", c.keepCount, "keep_bytes", c.keepBytes, "over_bytes", res.OverBytes)
	}
	if res.OverBytes {
		c.log.Warn("snapshot store: the newest snapshot alone is over snapshots.keep_bytes; raise it or ignore more of the workdir", "bytes", res.Bytes)
	}
	return res, nil
}

// fitting is how many of n snapshots taking size bytes fit in budget, as
// if each took as much (with a tenth to spare), and at least one fewer
// than n: retention's guess, checked by measuring after packing.
func fitting(budget, size int64) func(n int) int {
	return func(n int) int {
		return min(n-1, int(float64(n)*float64(budget)/float64(size)*0.9))
	}
}

// dropOldest deletes, under the writer lock, the refs of the oldest
// snapshots so that keep(n) of the n held are left (at least one), and
// returns how many are left (res.Dropped counts those dropped) and the
// moment the refs were deleted: every object a Take writes from then on is
// kept by compact.
func (c *Collector) dropOldest(ctx context.Context, keep func(n int) int, res *Result) (int, time.Time, error) {
	if err := c.lock.LockOpen(); err != nil {
		return 0, time.Time{}, err
	}
	defer c.lock.Unlock()
	all, err := c.repo.List(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
	}
	k := max(1, keep(len(all)))
	if k < len(all) {
		if err := c.drop(ctx, all[k:]); err != nil {
			return 0, time.Time{}, err
		}
		res.Dropped += len(all) - k
	} else {
		k = len(all)
	}
	c.count = k
	c.since = 0
	return k, time.Now(), nil
}

// drop deletes the refs of snapshots, in one transaction.
func (c *Collector) drop(ctx context.Context, snaps []repo.Snapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	var b strings.Builder
	for _, snap := range snaps {
		fmt.Fprintf(&b, "delete %s %s\n", repo.RefName(snap.N), snap.ID)
	}
	_, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"update-ref", "--stdin"}, Stdin: strings.NewReader(b.String())})
	c.repo.ForgetList()
	if err != nil {
		return fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
	}
	return nil
}

// compact packs the objects the refs and the private index reach and
// deletes the other objects older than cut (see dropOldest): those of dropped snapshots, of dry runs, of Takes
// killed mid-way. It runs beside Takes, as git gc runs beside git
// commands: an object a Take writes after cut is newer, and one a Take
// finds already stored is freshened by git (its file's time set to now),
// so neither is deleted. A second is taken off cut for the file system's
// coarser clock.
func (c *Collector) compact(ctx context.Context, cut time.Time) error {
	if c.CompactHook != nil {
		c.CompactHook()
	}
	if c.BeforeCompact != nil {
		if err := c.BeforeCompact(ctx); err != nil {
			return fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
		}
	}
	expire := cut.Add(-time.Second)
	if c.holds.Load() > 0 {
		// An import is writing objects no ref reaches yet (Hold).
		if hour := time.Now().Add(-time.Hour); hour.Before(expire) {
			expire = hour
		}
	}
	c.removeLeftovers()
	err := c.repack(ctx, expire)
	if err != nil {
		c.removeLeftovers()
		// An import made before imports were checked whole may name a
		// missing object, on which every repack fails: drop it and retry.
		c.lock.Lock()
		n, derr := c.dropBrokenImports(ctx)
		c.lock.Unlock()
		if derr == nil && n > 0 {
			err = c.repack(ctx, expire)
			c.removeLeftovers()
		}
	}
	if err != nil {
		return fmt.Errorf("snapshot store %s: gc: %w", c.repo.Dir(), err)
	}
	return nil
}

// repack packs what the refs and the private index reach and deletes the
// unreachable objects older than expire.
func (c *Collector) repack(ctx context.Context, expire time.Time) error {
	at := fmt.Sprintf("--unpack-unreachable=@%d", expire.Unix())
	if _, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"repack", "-d", "-l", "-A", "-q", at}}); err != nil {
		return err
	}
	_, err := c.repo.Git().Run(ctx, repo.Call{Args: []string{"prune", fmt.Sprintf("--expire=@%d", expire.Unix())}})
	return err
}

// DirBytes is the disk space of the files under dir (their sizes).
func DirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a file git removed while it was listed
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
