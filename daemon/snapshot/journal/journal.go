package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/daemon/snapshot/workdir"
	"github.com/continuityd/continuityd/internal/daemonside/beneath"
)

// File is the journal's index in the store's directory.
const File = "journal.db"

// Defaults of Options.
const (
	// DefaultGather is how long the journal waits after a first settled
	// path for others, so that one group shares its fsyncs.
	DefaultGather = 150 * time.Millisecond
	// DurableWithin is the bound the documentation states: a settled
	// version is durable at most this long after it settled (Gather, the
	// group's reads, its writes and fsyncs on an ordinary disk).
	DurableWithin = time.Second
	// DefaultKeepAll keeps every version this long.
	DefaultKeepAll = 24 * time.Hour
	// DefaultKeepHourly keeps the newest version of each hour this long,
	// then the newest of each day.
	DefaultKeepHourly = 7 * 24 * time.Hour
	// maxPending bounds the settled paths waiting for the journal; past it
	// the newest are dropped and said (Problem).
	maxPending = 100_000
)

// Options configure a Journal.
type Options struct {
	Repo    *repo.Repo       // the store: its object database
	Workdir *workdir.Workdir // the tree the versions are read from
	// MaxFileBytes: a larger file's version is noted, not kept. <= 0: no limit.
	MaxFileBytes int64
	Gather       time.Duration // 0: DefaultGather
	KeepAll      time.Duration // 0: DefaultKeepAll
	KeepHourly   time.Duration // 0: DefaultKeepHourly
	// MaxBytes bounds the bytes of the blobs the versions hold (their
	// contents, before compression). 0: no bound but the thinning.
	MaxBytes int64
	// Grew, when set, is told the bytes each group wrote into the object
	// database: the store's garbage collection counts them against
	// keep_bytes, which the journal shares with the snapshots.
	Grew func(bytes int64)
	// Skew, when set, is how far the journal's clock (its versions'
	// times and the age retention reads) runs ahead of Now: a test hook
	// (ClockEnv) that lets a test live a day of edits in a minute.
	Skew func() time.Duration
	Log  *slog.Logger
	Now  func() time.Time
}

// Who says who changed path at at: the agent's name ("" for outside), and
// its session and the beginning of its turn when known.
type Who = func(path string, at time.Time) (by, session string, turn time.Time)

// Journal keeps the versions of one workdir's files (see the package's
// comment). Its methods are safe for concurrent use.
type Journal struct {
	o    Options
	db   *bolt.DB
	path string
	log  *slog.Logger
	now  func() time.Time
	who  atomic.Pointer[Who]

	mu      sync.Mutex
	pending map[string]time.Time // settled, not yet handled: path → its last write
	dropped int                  // settled paths dropped past maxPending since the last report
	problem string               // damage found: a journal set aside, an entry that does not check
	flushed uint64               // groups committed
	lastErr string               // why the last group failed, "" after one that worked
	cond    *sync.Cond           // broadcast after each group

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	lat latencies
	// held is what the kept versions' blobs take, as the last retention
	// counted it plus what groups wrote since: over MaxBytes, retention
	// runs after the group, so the bound holds after every group, not
	// only every retainEvery.
	held atomic.Int64
	// retaining makes one Retain at a time: the run loop's and the
	// garbage collection's (KeepRef) would otherwise both drop a version
	// they read, counting it thinned twice.
	retaining sync.Mutex
}

// retainEvery is how often retention runs by the journal's clock while
// versions come (besides when they pass MaxBytes).
const retainEvery = 10 * time.Minute

// Open opens (or begins) the journal in the store opt.Repo and starts its
// goroutine; Close stops it.
func Open(opt Options) (*Journal, error) {
	if opt.Gather <= 0 {
		opt.Gather = DefaultGather
	}
	if opt.KeepAll <= 0 {
		opt.KeepAll = DefaultKeepAll
	}
	if opt.KeepHourly <= 0 {
		opt.KeepHourly = DefaultKeepHourly
	}
	j := &Journal{o: opt, path: filepath.Join(opt.Repo.Dir(), File), log: opt.Log, now: opt.Now,
		pending: map[string]time.Time{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if j.log == nil {
		j.log = slog.Default()
	}
	if j.now == nil {
		j.now = time.Now
	}
	if skew := opt.Skew; skew != nil {
		base := j.now
		j.now = func() time.Time { return base().Add(skew()) }
	}
	j.cond = sync.NewCond(&j.mu)
	j.held.Store(math.MaxInt64 / 2) // not counted yet: the first group's retention counts it
	db, err := j.openDB()
	if err != nil {
		return nil, err
	}
	j.db = db
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	go j.run(ctx)
	return j, nil
}

const formatTag = "continuityd-journal 1"

var (
	bucketMeta     = []byte("meta")
	bucketVersions = []byte("v")
	bucketPaths    = []byte("p")
	bucketBlobs    = []byte("b")
	bucketThinned  = []byte("t")
)

// openDB opens journal.db; one that does not open or check is set aside
// (named in the log and by Problem) and a new one begun.
func (j *Journal) openDB() (*bolt.DB, error) {
	db, err := j.tryOpen()
	if err == nil {
		return db, nil
	}
	aside := fmt.Sprintf("%s.damaged-%s", j.path, j.now().UTC().Format("20060102T150405Z"))
	if rerr := os.Rename(j.path, aside); rerr != nil {
		return nil, fmt.Errorf("version journal %s: %v, and it cannot be set aside: %w", j.path, err, rerr)
	}
	j.problem = fmt.Sprintf("the version journal did not check (%v): it was set aside as %s and a new one begun; the versions it held are not listed", err, aside)
	j.log.Warn("version journal: "+j.problem, "journal", j.path)
	return j.tryOpen()
}

func (j *Journal) tryOpen() (*bolt.DB, error) {
	db, err := bolt.Open(j.path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true,
		FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch f := meta.Get([]byte("format")); {
		case f == nil:
			if tx.Bucket(bucketVersions) != nil {
				return errors.New("its format mark is missing")
			}
			if err := meta.Put([]byte("format"), []byte(formatTag)); err != nil {
				return err
			}
		case string(f) != formatTag:
			return fmt.Errorf("its format is %q, not %q", f, formatTag)
		}
		for _, b := range [][]byte{bucketVersions, bucketPaths, bucketBlobs, bucketThinned} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// SetWho sets who the versions are credited to (the attribution).
func (j *Journal) SetWho(w Who) { j.who.Store(&w) }

// Close stops the journal after the group under way; paths still
// pending are written first (bounded by a few seconds).
func (j *Journal) Close() error {
	j.cancel()
	<-j.done
	return j.db.Close()
}

// Settled tells the journal that path (relative to the workdir) settled:
// its last write was at last. It never blocks.
func (j *Journal) Settled(path string, last time.Time) {
	if j.o.Skew != nil {
		last = last.Add(j.o.Skew())
	}
	j.mu.Lock()
	if _, ok := j.pending[path]; ok || len(j.pending) < maxPending {
		j.pending[path] = last
	} else {
		j.dropped++
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Problem says what damage the journal met, or why it failed to keep
// versions lately; "" when none.
func (j *Journal) Problem() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.problem != "":
		return j.problem
	case j.lastErr != "":
		return j.lastErr
	}
	return ""
}

// Sync waits until every path settled before the call is durable (or
// ctx ends): for tests and the benchmarks.
func (j *Journal) Sync(ctx context.Context) error {
	j.mu.Lock()
	want := j.flushed + 1
	if len(j.pending) == 0 {
		want = j.flushed
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	stop := context.AfterFunc(ctx, func() {
		j.mu.Lock()
		j.cond.Broadcast()
		j.mu.Unlock()
	})
	defer stop()
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.flushed < want || len(j.pending) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		j.cond.Wait()
	}
	return nil
}

func (j *Journal) run(ctx context.Context) {
	defer close(j.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	lastRetain := j.now()
	for {
		select {
		case <-ctx.Done():
			j.group(context.Background())
			return
		case <-j.wake:
		}
		// Wait a little for the rest of the burst: one group, one fsync.
		timer.Reset(j.o.Gather)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		j.group(ctx)
		if j.now().Sub(lastRetain) > retainEvery || j.o.MaxBytes > 0 && j.held.Load() > j.o.MaxBytes {
			lastRetain = j.now()
			if _, err := j.Retain(); err != nil {
				j.log.Warn("version journal: retention failed", "err", err)
			}
		}
	}
}

// group handles the paths settled so far: reads, stores, fsyncs, commits.
func (j *Journal) group(ctx context.Context) {
	j.mu.Lock()
	batch := j.pending
	dropped := j.dropped
	j.pending, j.dropped = map[string]time.Time{}, 0
	j.mu.Unlock()
	if dropped > 0 {
		j.log.Warn("version journal: too many files settled at once; some versions were not kept", "dropped", dropped)
	}
	var err error
	if len(batch) > 0 {
		err = j.write(ctx, batch)
	}
	j.mu.Lock()
	j.flushed++
	if err != nil {
		if j.lastErr == "" {
			j.log.Warn("version journal: versions could not be kept", "err", err)
		}
		j.lastErr = "the version journal could not keep versions: " + err.Error()
	} else {
		j.lastErr = ""
	}
	j.cond.Broadcast()
	j.mu.Unlock()
}

// version is one settled path read.
type version struct {
	e     Entry
	data  []byte
	isNew bool // its blob is not in the store yet
}

// write reads the settled paths and commits their versions in one
// transaction, after the new blobs are on disk.
func (j *Journal) write(ctx context.Context, batch map[string]time.Time) error {
	paths := make([]string, 0, len(batch))
	for p := range batch {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	top, err := j.o.Workdir.OpenDir()
	if err != nil {
		return err
	}
	defer top.Close()
	var who Who
	if w := j.who.Load(); w != nil {
		who = *w
	}
	var vs []version
	nested := map[string]bool{}
	for _, p := range paths {
		if ctx.Err() != nil && len(vs) > 0 {
			break
		}
		v, ok := j.read(top, p, batch[p], nested)
		if !ok {
			continue
		}
		if who != nil {
			v.e.By, v.e.Session, v.e.Turn = who(p, v.e.At)
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil
	}
	// What is new against each file's newest version; blobs not held yet.
	err = j.db.View(func(tx *bolt.Tx) error {
		blobs := tx.Bucket(bucketBlobs)
		keep := vs[:0]
		for _, v := range vs {
			if last, ok := newestOf(tx, v.e.Path); ok && last.Blob == v.e.Blob && last.Mode == v.e.Mode && last.Flags == v.e.Flags {
				continue // the same version again (a touch, a write of the same bytes)
			} else if !ok && v.e.Flags&FlagGone != 0 {
				continue // a file the journal never held went away
			}
			v.isNew = v.e.Kept() && blobs.Get(v.e.Blob[:]) == nil
			keep = append(keep, v)
		}
		vs = keep
		return nil
	})
	if err != nil || len(vs) == 0 {
		return err
	}
	wrote, err := j.storeBlobs(vs)
	if err != nil {
		return err
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		bv, bp, bb := tx.Bucket(bucketVersions), tx.Bucket(bucketPaths), tx.Bucket(bucketBlobs)
		for i := range vs {
			e := &vs[i].e
			seq, err := bv.NextSequence()
			if err != nil {
				return err
			}
			e.Seq = seq
			if err := bv.Put(seqKey(seq), e.encode()); err != nil {
				return err
			}
			if err := bp.Put(pathKey(e.Path, seq), nil); err != nil {
				return err
			}
			if e.Kept() {
				_, refs := readBlobVal(bb.Get(e.Blob[:]))
				if err := bb.Put(e.Blob[:], blobVal(e.Size, refs+1)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.held.Add(wrote)
	if wrote > 0 && j.o.Grew != nil {
		j.o.Grew(wrote)
	}
	// Elapsed time, by the real clock: the settle time came from it.
	var skew time.Duration
	if j.o.Skew != nil {
		skew = j.o.Skew()
	}
	for _, v := range vs {
		j.lat.add(time.Since(v.e.At.Add(-skew)))
	}
	return nil
}

// storeBlobs writes the new blobs into the object database and fsyncs
// them and their directories: the entries naming them are committed
// after. It returns the bytes of the contents written.
func (j *Journal) storeBlobs(vs []version) (int64, error) {
	var zw repo.Compressors
	var wrote int64
	dirs := map[string]bool{}
	done := map[[20]byte]bool{}
	for _, v := range vs {
		if !v.isNew || done[v.e.Blob] {
			continue
		}
		id, err := j.o.Repo.WriteLoose("blob", v.data, &zw)
		if err != nil {
			return wrote, err
		}
		done[v.e.Blob] = true
		wrote += int64(len(v.data))
		p := j.o.Repo.ObjectPath(id)
		if err := syncPath(p); err != nil {
			return wrote, err
		}
		dirs[filepath.Dir(p)] = true
	}
	if len(dirs) > 0 {
		dirs[filepath.Join(j.o.Repo.Dir(), "objects")] = true
	}
	for d := range dirs {
		if err := syncPath(d); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// read reads path's version as it stands; ok is false when there is
// nothing to note (a directory, a path that cannot be opened beneath the
// workdir).
func (j *Journal) read(top *beneath.Dir, p string, last time.Time, nested map[string]bool) (version, bool) {
	v := version{e: Entry{Path: p, At: last}}
	dir, name := path.Split(p)
	dir = path.Clean(dir)
	if name == "" || repo.IsDotGit(name) {
		return v, false
	}
	if j.inNested(top, dir, nested) {
		v.e.Flags = FlagNestedRep
		return v, true
	}
	d := top
	if dir != "." {
		var err error
		if d, err = top.OpenDir(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				v.e.Flags = FlagGone
				return v, true
			}
			return v, false // through a link, or unreadable: not the tree's file
		}
		defer d.Close()
	}
	fi, err := d.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.e.Flags = FlagGone
		return v, true
	case err != nil:
		return v, false
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := d.Readlink(name)
		if err != nil {
			return v, false
		}
		v.data = []byte(target)
		v.e.Mode = 0o120000
	case fi.Mode().IsRegular():
		v.e.Mode = 0o100644
		if fi.Mode()&0o111 != 0 {
			v.e.Mode = 0o100755
		}
		if max := j.o.MaxFileBytes; max > 0 && fi.Size() > max {
			v.e.Flags, v.e.Size = FlagTooLarge, fi.Size()
			return v, true
		}
		f, err := d.OpenRead(name)
		if err != nil {
			return v, false
		}
		defer f.Close()
		limit := j.o.MaxFileBytes
		if limit <= 0 {
			limit = 1 << 40
		}
		data, err := io.ReadAll(io.LimitReader(f, limit+1))
		if err != nil {
			return v, false
		}
		if int64(len(data)) > limit {
			v.e.Flags, v.e.Size = FlagTooLarge, int64(len(data))
			return v, true
		}
		v.data = data
	default:
		return v, false // a directory, a FIFO, a socket: no version
	}
	v.e.Size = int64(len(v.data))
	v.e.Blob = repo.HashObject("blob", v.data)
	v.e.Lines = countLines(v.data)
	return v, true
}

// inNested reports whether dir (relative, "." for the top) lies in a
// nested repository: a directory below the top holding .git.
func (j *Journal) inNested(top *beneath.Dir, dir string, cache map[string]bool) bool {
	if dir == "." || dir == "" {
		return false
	}
	if n, ok := cache[dir]; ok {
		return n
	}
	n := j.inNested(top, path.Dir(dir), cache)
	if !n {
		if d, err := top.OpenDir(dir); err == nil {
			_, err := d.Lstat(".git")
			n = err == nil
			d.Close()
		}
	}
	cache[dir] = n
	return n
}

func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// newestOf is path's newest entry.
func newestOf(tx *bolt.Tx, p string) (Entry, bool) {
	c := tx.Bucket(bucketPaths).Cursor()
	prefix := append([]byte(p), 0)
	k, _ := c.Seek(pathKey(p, ^uint64(0)))
	if k == nil {
		k, _ = c.Last()
	} else if !bytes.Equal(k, pathKey(p, ^uint64(0))) {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 {
		return Entry{}, false
	}
	seq := k[len(prefix):]
	e, err := decodeEntry(beUint64(seq), tx.Bucket(bucketVersions).Get(seq))
	return e, err == nil
}
