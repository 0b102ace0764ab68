// Package residency keeps one agent's continuity state durably on local
// disk, in a bbolt file under the agent's state directory. It is the
// domain's rules applied to one document (the commitment limit, the
// since-last-visit bookkeeping, the dead letter, the outbox's log) over
// the storage engine of package storage (the write-ahead log's format,
// replay into bbolt, damage checks), joined by the group commit below.
//
// Writes are group-committed: whoever commits (the writer goroutine, or a
// caller that finds no commit in progress and so skips the hand-off) takes
// every write waiting at that moment, applies them in order to a copy of the
// state and to the open bbolt transaction, appends what they changed to the
// write-ahead log with one fdatasync (package storage), publishes the copy and only
// then answers each caller. A write that is answered without error is
// therefore on disk. bbolt itself is committed at flushes (flushToBolt), off the
// answer path. Reads of the state are served from the published copy and
// never touch the disk; reads of the log and the dead letter go through the
// writer, which alone sees the open transaction.
//
// Writes that must travel upstream are also appended, in the same
// transaction, to an ordered log keyed by the agent's sequence number; the
// outbox reads the log from a per-upstream cursor and acknowledges what each
// upstream has taken.
package residency

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency/storage"
)

// File is the name of the bbolt file inside an agent's state directory.
const File = "residency.db"

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = errors.New("residency store is closed")

var (
	bucketState   = []byte("state")       // doc, capsule
	bucketLog     = []byte("log")         // seq → Write (what the outbox ships)
	bucketCursors = []byte("cursors")     // upstream → last acknowledged seq
	bucketDone    = []byte("commitments") // closed and dropped commitments, by id
	keyDoc        = []byte("doc")
	keyCapsule    = []byte("capsule")
	// keyWALApplied holds the id of the last write-ahead log record bbolt
	// holds; records after it are replayed on open.
	keyWALApplied = []byte("wal_applied")
	// keyClean is 1 when the last process closed the store (bbolt then
	// holds every record of the log), 0 while a process has it open.
	keyClean = []byte("clean")
	// keySeqReserved is the highest sequence number the log may hold
	// beyond what bbolt holds: a write whose seq is above it is committed
	// through bbolt, which raises it. After a loss of the log an operator
	// accepted, numbering goes on past it, so no seq (and so no
	// Idempotency-Key) an upstream may hold is used again.
	keySeqReserved = []byte("seq_reserved")
)

// startRecord is the payload of a new residency's first log record: it
// notes in the state bucket that the log has started.
var startRecord = storage.AppendPut(nil, bucketState, []byte("wal_started"), []byte{1})

// seqReserve is how far past the current seq each bbolt commit reserves;
// a flush to bbolt every 250 ms keeps a busy agent well inside it.
const seqReserve = 10_000

// boltFlushDelay is how long bbolt may lag behind the write-ahead log: the
// open transaction is committed this long after its first batch (or sooner
// when the log is half full, or on Close). It bounds the work a restart
// replays, not durability.
const boltFlushDelay = 250 * time.Millisecond

// maxBatch bounds one group commit so a flood of writers cannot make one
// transaction arbitrarily large.
const maxBatch = 256

// Event is something a committed write did, for the agent's wait callers and
// the outbox.
type Event struct {
	Seq     uint64            `json:"seq"`
	Kind    string            `json:"kind"` // checkpoint, capsule, capsule_seal, signal, activity, commit
	Origin  capsule.Origin    `json:"origin,omitempty"`
	Summary string            `json:"summary"`
	Logged  bool              `json:"-"` // appended to the log: the outbox has work
	Signal  *capsule.Signal   `json:"signal,omitempty"`
	Write   capsule.WriteKind `json:"-"`
}

// Options configures Open.
type Options struct {
	Agent string
	// Dir is the agent's state directory; created (0700) when missing.
	Dir string
	// Upstreams are the agent's upstream names. A cursor is created for each
	// one not seen before, starting at the current head of the log (a new
	// upstream receives writes from now on).
	Upstreams []string
	// OnCommit, when set, is called after each commit, before its writes
	// are answered, with what it did, by whichever goroutine committed
	// (holding the commit lock). It must not block or call the store.
	OnCommit func([]Event)
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// OpenTimeout bounds waiting for the file lock another process holds.
	OpenTimeout time.Duration
	// MaxPending bounds the outbox: once the log holds this many writes no
	// upstream has taken, explicit writes are refused with 507 SPOOL_FULL and
	// automatic ones are stored and coalesced into one later write. 0: no
	// bound.
	MaxPending int

	// flushDelay and walSize override the defaults (tests).
	flushDelay time.Duration
	walSize    int64
}

// Store is one agent's durable residency. It is safe for concurrent use.
type Store struct {
	agent    string
	db       *bolt.DB
	maxPend  int
	now      func() time.Time
	onCommit func([]Event)

	ops     chan *op
	flush   chan struct{} // buffered 1: lazy ops have waited long enough
	quit    chan struct{}
	stopped chan struct{}

	lazyMu    sync.Mutex
	lazyOps   []*op       // ride on the next commit; see lazy
	lazyTimer *time.Timer // armed while lazyOps is not empty

	// commitMu is held by whoever commits or reads through the open
	// transaction; it owns the fields below (Open owns them before the
	// writer starts).
	commitMu   sync.Mutex
	wal        *storage.Log
	wtx        *bolt.Tx // the open transaction; nil right after a flush to bbolt
	unapplied  [][]byte // payloads logged since the last flush to bbolt
	flushDelay time.Duration
	flushTimer *time.Timer
	broken     error    // set when bbolt and the log could not be brought back in step
	reserved   uint64   // keySeqReserved as bbolt holds it
	recovery   Recovery // what Open did with the write-ahead log
	crashClose bool     // tests: Close leaves bbolt behind the log, as a crash would

	closeMu sync.RWMutex // held for reading while submitting; Close takes it for writing
	closed  bool

	mu      sync.RWMutex // guards the published state below
	cur     *doc         // immutable once published
	capsule *capsule.CapsuleRecord
	heads   map[string]uint64 // upstream → acknowledged seq, as published
	logHead uint64            // highest logged seq
	// logged is every seq in the log, ascending, so pending counts and the
	// outbox bound need no walk of the log. A batch appends to it past the published length
	// (readers never look there) and publishes the longer slice.
	logged []uint64

	stateJSON atomic.Pointer[encodedState] // see StateJSON
	encoding  sync.WaitGroup               // the answer encodings commits started; Close waits

	stats struct{ commits, writes, busyNs, flushes atomic.Uint64 } // see CommitStats
}

// CommitStats counts what the store's group commit has done since Open.
type CommitStats struct {
	// Commits is the batches of writes committed: one log sync each (or,
	// for a batch too large for the log, a bbolt commit).
	Commits uint64
	// Writes is the writes those batches held, acknowledgements and other
	// background updates included; Writes/Commits is the mean batch.
	Writes uint64
	// Busy is the time spent committing them, syncs included.
	Busy time.Duration
	// Flushes is the bbolt commits that caught up with the log.
	Flushes uint64
}

// CommitStats returns the group commit's counters.
func (s *Store) CommitStats() CommitStats {
	return CommitStats{
		Commits: s.stats.commits.Load(),
		Writes:  s.stats.writes.Load(),
		Busy:    time.Duration(s.stats.busyNs.Load()),
		Flushes: s.stats.flushes.Load(),
	}
}

// Open opens (creating when missing) the residency of one agent.
func Open(opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OpenTimeout == 0 {
		opts.OpenTimeout = 2 * time.Second
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent %s: create state directory: %w", opts.Agent, err)
	}
	path := filepath.Join(opts.Dir, File)
	db, err := storage.OpenBolt(path, opts.OpenTimeout, false)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", opts.Agent, storage.WithAgent(err, opts.Agent))
	}
	s := &Store{
		agent:      opts.Agent,
		db:         db,
		maxPend:    opts.MaxPending,
		now:        opts.Now,
		onCommit:   opts.OnCommit,
		ops:        make(chan *op, 1024),
		flush:      make(chan struct{}, 1),
		quit:       make(chan struct{}),
		stopped:    make(chan struct{}),
		heads:      map[string]uint64{},
		flushDelay: cmp.Or(opts.flushDelay, boltFlushDelay),
	}
	err = storage.GuardBolt(path, func() error {
		if err := s.recover(opts.Dir, cmp.Or(opts.walSize, storage.DefaultLogSize)); err != nil {
			return err
		}
		if err := s.load(opts.Upstreams); err != nil {
			s.wal.Close()
			return err
		}
		return nil
	})
	if err != nil {
		db.Close()
		if diskFull(err) {
			err = fmt.Errorf("%w: the disk holding %s is full; free space on it and start continuityd again (the log's records are kept and replayed then)", err, opts.Dir)
		}
		return nil, fmt.Errorf("agent %s: %w", opts.Agent, storage.WithAgent(err, opts.Agent))
	}
	s.flushTimer = time.NewTimer(time.Hour)
	s.flushTimer.Stop()
	go s.run()
	return s, nil
}

// recover opens the write-ahead log, checks it against what bbolt says
// was written (storage.CheckLog), and replays into bbolt, in one synced
// transaction, the records bbolt does not hold yet: the batches answered
// before a crash and not flushed to bbolt. The store is marked open (not
// clean) in the same transaction.
func (s *Store) recover(dir string, size int64) error {
	found, err := storage.ReadLog(dir, size)
	if err != nil {
		return err
	}
	recs := found.Recs
	var w *storage.Log
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketState, bucketLog, bucketCursors, bucketDone, bucketDead} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		st := tx.Bucket(bucketState)
		var applied uint64
		if v := st.Get(keyWALApplied); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
			clean := len(st.Get(keyClean)) == 1 && st.Get(keyClean)[0] == 1
			torn, err := storage.CheckLog(found, applied, clean)
			if err != nil {
				return err
			}
			s.recovery.TornTail = torn
			s.recovery.Recreated = clean && !found.Existed
		} else if len(recs) > 0 {
			// A new residency.db (the old one was removed) beside an old
			// log: its records change a state this file never held. They
			// are set aside, and the log goes on past their ids.
			applied = recs[len(recs)-1].ID
			s.recovery.Foreign = len(recs)
		}
		var err error
		if w, err = storage.OpenLog(found); err != nil {
			return err
		}
		if applied == 0 && len(recs) == 0 {
			// A new residency: its log starts with a record bbolt holds
			// too, so from now on bbolt knows the log was written and a
			// log found missing or zeroed after a crash is damage, not a
			// new log (storage.CheckLog).
			if err := w.Append(startRecord); err != nil {
				return fmt.Errorf("%s: %w", found.Path, err)
			}
			if err := storage.Replay(tx, startRecord); err != nil {
				return err
			}
			applied = 1
		}
		last := applied
		for _, r := range recs {
			if r.ID <= applied {
				continue
			}
			if r.ID != last+1 {
				return &DamageError{Path: found.Path,
					Found: fmt.Sprintf("its first record past what residency.db holds (id %d) is %d: records are missing, so the log does not continue this %s (restored from an older copy?)", last, r.ID, File),
					Lost:  "the writes of the missing records are lost"}
			}
			if err := storage.Replay(tx, r.Payload); err != nil {
				return &DamageError{Path: found.Path,
					Found: fmt.Sprintf("record %d at offset %d has a valid checksum but cannot be replayed (%v)", r.ID, r.Off, err),
					Lost:  "the writes from that record on cannot be replayed"}
			}
			last = r.ID
			s.recovery.Replayed++
		}
		w.ContinueAfter(last)
		if err := st.Put(keyClean, []byte{0}); err != nil {
			return err
		}
		return st.Put(keyWALApplied, u64(last))
	})
	if err != nil {
		if w != nil {
			w.Close()
		}
		return err
	}
	s.wal = w
	return nil
}

// load reads (or initialises) the state and the upstream cursors.
func (s *Store) load(upstreams []string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketState)
		d := &doc{}
		if raw := st.Get(keyDoc); raw != nil {
			if err := json.Unmarshal(raw, d); err != nil {
				return fmt.Errorf("decode stored state: %w", err)
			}
		} else {
			var id [8]byte
			rand.Read(id[:])
			d.ResidencyID = hex.EncodeToString(id[:])
			d.Since.At = s.now().UTC()
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if err := st.Put(keyDoc, raw); err != nil {
			return err
		}
		s.cur = d
		s.reserved = 0
		if v := st.Get(keySeqReserved); len(v) == 8 {
			s.reserved = binary.BigEndian.Uint64(v)
		}
		if s.reserved < d.Seq+seqReserve/2 {
			s.reserved = d.Seq + seqReserve
			if err := st.Put(keySeqReserved, u64(s.reserved)); err != nil {
				return err
			}
		}
		if c := st.Get(keyCapsule); c != nil {
			rec := &capsule.CapsuleRecord{}
			if err := json.Unmarshal(c, rec); err != nil {
				return fmt.Errorf("decode stored capsule: %w", err)
			}
			s.capsule = rec
		}
		c := tx.Bucket(bucketLog).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			s.logged = append(s.logged, binary.BigEndian.Uint64(k))
		}
		if n := len(s.logged); n > 0 {
			s.logHead = s.logged[n-1]
		}
		cur := tx.Bucket(bucketCursors)
		for _, u := range upstreams {
			v := cur.Get([]byte(u))
			if v == nil {
				// A new upstream starts at the head: it is not sent the past.
				// On a fresh residency the head is 0, so it gets everything.
				v = u64(s.logHead)
				if err := cur.Put([]byte(u), v); err != nil {
					return err
				}
			}
			s.heads[u] = binary.BigEndian.Uint64(v)
		}
		return nil
	})
}

// Close stops the writer after the writes already submitted, and closes the
// file. Writes submitted later fail with ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	close(s.quit)
	<-s.stopped
	s.encoding.Wait()
	return errors.Join(s.wal.Close(), s.db.Close())
}

// Recovery is what Open did with the write-ahead log it found.
type Recovery struct {
	// Replayed is the records replayed into bbolt: the batches answered
	// but not yet flushed to bbolt when the last process stopped without
	// closing the store (a crash or a kill).
	Replayed int
	// Foreign is the records set aside because residency.db is new (it was
	// removed or replaced) and they belong to the state it replaced.
	Foreign int
	// TornTail describes the record a crash tore while it was being
	// written (it was never acknowledged); "" when there was none.
	TornTail string
	// Recreated is set when the log was missing after a clean stop (bbolt
	// held all of it) and a new one was made.
	Recreated bool
}

// Recovery reports what Open did with the write-ahead log.
func (s *Store) Recovery() Recovery { return s.recovery }

// Agent is the agent's name.
func (s *Store) Agent() string { return s.agent }

// lazyDelay is how long lazy ops (acknowledgements, visit resets) wait for
// a real write to ride along with, before they commit on their own. Losing
// a lazy op in a crash only repeats a delivery (under the same
// Idempotency-Key) or shows the same news twice.
const lazyDelay = 200 * time.Millisecond

// op is one unit of work for a commit.
type op struct {
	// apply validates first and mutates only when it will succeed: a refused
	// op must leave the batch's working copy exactly as it found it.
	apply func(*txn) (uint64, error)
	// view, set instead of apply, reads bbolt as of the batch's commit.
	view func(*bolt.Tx) error
	done chan result // nil for fire-and-forget (lazy) ops
	// answer marks a write whose caller answers with the new state
	// (StateJSON): the committer encodes it while the log syncs.
	answer bool
}

type result struct {
	seq uint64
	err error
}

// txn is what an op sees: the batch's store (reads, and changes that the
// write-ahead log records), the working copy of the state and the batch's
// clock. The domain's rules (the commitment limit in checkpoint.go, the
// since-last-visit bookkeeping in doc.go, the dead letter in deadletter.go)
// work on a txn only, so they run as well on an in-memory store
// (rules_test.go).
type txn struct {
	kv             kv
	d              *doc
	now            time.Time
	capsule        *capsule.CapsuleRecord
	capsuleChanged bool
	events         []Event
	acked          map[string]uint64
	logHead        uint64
	logged         []uint64 // see Store.logged
	maxPending     int
}

// kv is what a batch sees of the storage: storage.Recorder on bbolt's
// open transaction, or a map in the rules' tests.
type kv interface {
	// Get reads a value as the batch sees it; valid until the batch ends.
	Get(bucket, key []byte) []byte
	// Keys lists, in order, the keys of bucket starting with prefix while
	// while holds (nil: all).
	Keys(bucket, prefix []byte, while func(k []byte) bool) [][]byte
	Put(bucket, key, value []byte) error
	Delete(bucket, key []byte) error
}

func (t *txn) put(bucket, key, value []byte) error { return t.kv.Put(bucket, key, value) }

func (t *txn) delete(bucket, key []byte) error { return t.kv.Delete(bucket, key) }

// nextSeq assigns the next sequence number.
func (t *txn) nextSeq() uint64 {
	t.d.Seq++
	return t.d.Seq
}

// submit commits an op and waits for its commit.
func (s *Store) submit(ctx context.Context, apply func(*txn) (uint64, error)) (uint64, error) {
	return s.submitOp(ctx, &op{apply: apply, done: make(chan result, 1)})
}

// submitOp commits o itself when no commit is in progress (with whatever
// else is waiting: a lone writer pays no goroutine hand-offs), and
// otherwise hands it to the writer goroutine, which group-commits what
// piles up meanwhile.
func (s *Store) submitOp(ctx context.Context, o *op) (uint64, error) {
	if done, err := s.commitNow(o); err != nil {
		return 0, err
	} else if !done {
		if err := s.enqueue(ctx, o); err != nil {
			return 0, err
		}
	}
	select {
	case r := <-o.done:
		return r.seq, r.err
	case <-ctx.Done():
		// The write may still commit; the caller was not told it did, which
		// the at-least-once contract allows.
		return 0, ctx.Err()
	}
}

// commitNow commits o in the calling goroutine if no commit is in
// progress; done reports whether it did (o.done then holds the result).
func (s *Store) commitNow(o *op) (done bool, err error) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return false, ErrClosed
	}
	if !s.commitMu.TryLock() {
		return false, nil
	}
	defer s.commitMu.Unlock()
	batch := []*op{o}
	s.fill(&batch)
	s.commit(batch)
	return true, nil
}

// view runs fn on bbolt as the writers see it (every answered write
// included). fn must copy what it keeps.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	_, err := s.submitOp(context.Background(), &op{view: fn, done: make(chan result, 1)})
	return err
}

func (s *Store) enqueue(ctx context.Context, o *op) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the writer goroutine: it group-commits what callers hand it, the
// lazy ops once they have waited lazyDelay, and flushes to bbolt when the
// open transaction is due.
func (s *Store) run() {
	defer close(s.stopped)
	defer s.flushTimer.Stop()
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-s.ops:
			s.commitMu.Lock()
			batch = append(batch[:0], o)
			s.fill(&batch)
			s.commit(batch)
			s.commitMu.Unlock()
		case <-s.flush:
			s.commitMu.Lock()
			batch = batch[:0]
			s.fill(&batch)
			s.commit(batch)
			s.commitMu.Unlock()
		case <-s.flushTimer.C:
			s.commitMu.Lock()
			s.flushToBolt()
			s.commitMu.Unlock()
		case <-s.quit:
			// Commit what was submitted before Close, then flush to bbolt.
			s.commitMu.Lock()
			defer s.commitMu.Unlock()
			for {
				batch = batch[:0]
				s.fill(&batch)
				if len(batch) == 0 {
					break
				}
				s.commit(batch)
			}
			s.commit(nil) // the lazy ops left
			if !s.crashClose {
				s.closeClean()
			} else if s.wtx != nil {
				s.wtx.Rollback()
			}
			return
		}
	}
}

func (s *Store) fill(batch *[]*op) {
	for len(*batch) < maxBatch {
		select {
		case o := <-s.ops:
			*batch = append(*batch, o)
		default:
			return
		}
	}
}

// commit applies a batch, and the lazy ops waiting, to the open
// transaction, makes it durable with one write-ahead log record and answers
// every op in it. The caller holds commitMu.
func (s *Store) commit(batch []*op) {
	// Lazy ops ride on writes (and on the flush, which commits an empty
	// batch), never on reads: a read must not pay for a sync.
	if len(batch) == 0 || slices.ContainsFunc(batch, func(o *op) bool { return o.view == nil }) {
		batch = append(batch, s.takeLazy()...)
	}
	if len(batch) == 0 {
		return
	}
	results := make([]result, len(batch))
	if err := s.commitWrites(batch, results); err != nil {
		ierr := commitError(s.wal.Dir(), err)
		for i, o := range batch {
			if o.view == nil && results[i].err == nil {
				results[i] = result{err: ierr}
			}
		}
	}
	for i, o := range batch {
		if o.view != nil {
			results[i].err = s.runView(o.view)
		}
	}
	for i, o := range batch {
		if o.done != nil {
			o.done <- results[i]
		}
	}
	if s.wal.HalfFull() {
		s.flushToBolt()
	}
}

// commitWrites applies the batch's writes and logs them. On error nothing
// of the batch is kept (bbolt is brought back to the last logged batch) and
// results hold what each op said before the failure.
func (s *Store) commitWrites(batch []*op, results []result) error {
	if s.broken != nil {
		return s.broken
	}
	writes := false
	for _, o := range batch {
		writes = writes || o.view == nil
	}
	if !writes {
		return nil
	}
	start := time.Now()
	defer func() {
		s.stats.commits.Add(1)
		s.stats.writes.Add(uint64(len(batch)))
		s.stats.busyNs.Add(uint64(time.Since(start)))
	}()
	if err := s.begin(); err != nil {
		return err
	}
	s.mu.RLock()
	work, capRec, logHead, logged := s.cur.clone(), s.capsule, s.logHead, s.logged
	s.mu.RUnlock()

	rec := storage.NewRecorder(s.wtx)
	t := &txn{kv: rec, d: work, now: s.now().UTC(), capsule: capRec, acked: map[string]uint64{}, logHead: logHead, logged: logged, maxPending: s.maxPend}
	answer := false
	for i, o := range batch {
		if o.view == nil {
			results[i].seq, results[i].err = o.apply(t)
			answer = answer || (o.answer && results[i].err == nil)
		}
	}
	// The new state is final from here on and only read: encode the
	// answer's copy of it while the log syncs (the disk, not the CPU, is
	// busy then). The callers wait for it in StateJSON; the commit does not.
	var e *encodedState
	if answer {
		e = newEncodedState(work, t.capsule)
		s.encoding.Go(func() { e.encode(s.agent) })
	}
	err := s.logBatch(t, rec.Payload)
	if err != nil {
		s.rewind()
		return err
	}
	s.mu.Lock()
	s.cur, s.capsule, s.logHead, s.logged = work, t.capsule, t.logHead, t.logged
	for u, seq := range t.acked {
		if seq > s.heads[u] {
			s.heads[u] = seq
		}
	}
	if e != nil {
		s.stateJSON.Store(e) // before anyone can read the state it encodes
	}
	s.mu.Unlock()
	if s.onCommit != nil && len(t.events) > 0 {
		s.onCommit(t.events)
	}
	return nil
}

// logBatch stores the working copy of the state in the transaction and
// makes the batch durable: one log record, or a flush to bbolt when the record
// does not fit in what is left of the log.
func (s *Store) logBatch(t *txn, changes func() []byte) error {
	raw, err := json.Marshal(t.d)
	if err != nil {
		return err
	}
	if err := t.put(bucketState, keyDoc, raw); err != nil {
		return err
	}
	if t.capsuleChanged {
		raw, err := json.Marshal(t.capsule)
		if err != nil {
			return err
		}
		if err := t.put(bucketState, keyCapsule, raw); err != nil {
			return err
		}
	}
	payload := changes()
	if !s.wal.Fits(len(payload)) || t.d.Seq > s.reserved {
		// Too big for what is left of the log, or past the seqs reserved:
		// bbolt's own commit makes the batch durable (and reserves more),
		// and the log starts a new lap. No record id is used: bbolt saying
		// it holds record N means record N was once written to the log
		// (storage.CheckLog relies on it).
		return s.commitTx(s.wal.LastID(), t.d.Seq, false)
	}
	if err := s.wal.Append(payload); err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	s.unapplied = append(s.unapplied, payload)
	if len(s.unapplied) == 1 {
		s.flushTimer.Reset(s.flushDelay)
	}
	return nil
}

// begin opens the transaction batches accumulate in until a flush to bbolt.
func (s *Store) begin() error {
	if s.wtx != nil {
		return nil
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	s.wtx = tx
	return nil
}

// flushToBolt commits the open transaction (named apart from Checkpoint,
// the agent's write: this is the storage catching up with its log) with bbolt's own syncs, so the
// log can start a new lap. A failure leaves the transaction as it was
// (rebuilt from the log); the next batch or flush tries again.
func (s *Store) flushToBolt() {
	s.flushTimer.Stop()
	if s.wtx == nil || s.broken != nil {
		return
	}
	if err := s.commitTx(s.wal.LastID(), s.cur.Seq, false); err != nil {
		s.rewind()
		return
	}
	s.stats.flushes.Add(1)
}

// closeClean flushes to bbolt for the last time and marks the store clean: bbolt
// holds every record, so a log found missing or zeroed at the next open
// has lost nothing.
func (s *Store) closeClean() {
	s.flushTimer.Stop()
	if s.broken == nil && s.begin() == nil && s.commitTx(s.wal.LastID(), s.cur.Seq, true) == nil {
		return
	}
	// Not flushed (a full disk, say): the log holds every answered
	// batch and the next open replays it. An open transaction would make
	// bbolt's Close wait for ever.
	if s.wtx != nil {
		s.wtx.Rollback()
		s.wtx = nil
	}
}

// commitTx records applied as the last log record bbolt holds, reserves
// the seqs past seq the log may use, and commits; clean marks a store
// being closed.
func (s *Store) commitTx(applied, seq uint64, clean bool) error {
	st := s.wtx.Bucket(bucketState)
	if err := st.Put(keyWALApplied, u64(applied)); err != nil {
		return err
	}
	reserved := max(s.reserved, seq+seqReserve)
	if reserved != s.reserved {
		if err := st.Put(keySeqReserved, u64(reserved)); err != nil {
			return err
		}
	}
	if clean {
		if err := st.Put(keyClean, []byte{1}); err != nil {
			return err
		}
	}
	tx := s.wtx
	s.wtx = nil
	if err := tx.Commit(); err != nil {
		return err
	}
	s.reserved = reserved
	s.unapplied = s.unapplied[:0]
	s.wal.Restart()
	return nil
}

// rewind drops the open transaction, with whatever a failed batch did to
// it, and rebuilds it from the batches logged since the last flush to bbolt.
// If even that fails, bbolt and the log can no longer be kept in step in
// this process: every later write is refused until a restart, which
// replays the log.
func (s *Store) rewind() {
	if s.wtx != nil {
		s.wtx.Rollback()
		s.wtx = nil
	}
	err := s.begin()
	for _, p := range s.unapplied {
		if err != nil {
			break
		}
		err = storage.Replay(s.wtx, p)
	}
	if err != nil {
		s.broken = fmt.Errorf("the residency store could not recover from a failed write (%v); restart continuityd", err)
	}
}

// runView runs a read in the open transaction (or a fresh read-only one).
func (s *Store) runView(fn func(*bolt.Tx) error) error {
	if s.wtx != nil {
		return fn(s.wtx)
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// logWrite appends w to the log under its sequence number.
func (t *txn) logWrite(w *capsule.Write) error {
	return t.logWriteEncoded(w, nil)
}

// logWriteEncoded is logWrite for a checkpoint write whose checkpoint its
// caller encoded already (cpJSON, json.Marshal of w.Checkpoint), outside
// the commit: only the small envelope is encoded here, while every other
// writer waits. nil cpJSON encodes all of w.
func (t *txn) logWriteEncoded(w *capsule.Write, cpJSON []byte) error {
	w.IdempotencyKey = idempotencyPrefix + t.d.ResidencyID + "-" + strconv.FormatUint(w.Seq, 10)
	var raw []byte
	var err error
	if cpJSON != nil && w.Checkpoint != nil && w.Capsule == nil && w.CoveredFrom == 0 && w.SessionID == "" && w.Reason == "" {
		// The checkpoint is the last field encoded: every field after it
		// is empty and omitted.
		env := *w
		env.Checkpoint = nil
		if raw, err = json.Marshal(&env); err == nil {
			raw = append(append(append(raw[:len(raw)-1:len(raw)-1], `,"checkpoint":`...), cpJSON...), '}')
		}
	} else {
		raw, err = json.Marshal(w)
	}
	if err != nil {
		return err
	}
	if err := t.put(bucketLog, u64(w.Seq), raw); err != nil {
		return err
	}
	t.logHead = w.Seq
	t.logged = append(t.logged, w.Seq)
	return nil
}

// spoolFull reports whether the outbox is at its bound.
func (t *txn) spoolFull() bool {
	return t.maxPending > 0 && len(t.logged) >= t.maxPending
}

func spoolFullError(max int) error {
	return capsule.Refuse(capsule.CodeSpoolFull, "",
		"the outbox holds %d writes no upstream has taken yet (its bound); nothing was saved. The upstreams are behind or down: see `continuityd status`; retry later", max)
}

// shipUnshipped logs one write for automatic content stored while the
// outbox was full, once there is room: the latest state as one checkpoint,
// and the latest capsule.
func (t *txn) shipUnshipped() error {
	if t.spoolFull() {
		return nil
	}
	d := t.d
	if d.Unshipped {
		cp := &capsule.Checkpoint{}
		if d.FocusUpdatedAt != nil {
			f := d.Focus
			cp.Focus = &f
		}
		if ws := d.WorkingState; ws != nil {
			na, lr := ws.NextAction, ws.LastResult
			cp.WorkingState = &capsule.WorkingState{NextAction: &na, LastResult: &lr,
				ResultRef: nullable(ws.ResultRef), WaitingFor: nullable(ws.WaitingFor)}
		}
		if ps := d.PublicStatus; ps != nil {
			p := ps.PublicStatus
			cp.PublicStatus = &p
		}
		d.Unshipped = false
		if !cp.IsEmpty() {
			seq := t.nextSeq()
			if err := t.logWrite(&capsule.Write{Seq: seq, Kind: capsule.WriteCheckpoint, Origin: capsule.OriginAutomatic, At: t.now, Checkpoint: cp}); err != nil {
				return err
			}
			t.events = append(t.events, Event{Seq: seq, Kind: string(capsule.WriteCheckpoint), Origin: capsule.OriginAutomatic,
				Summary: "coalesced automatic state (the outbox had been full)", Logged: true, Write: capsule.WriteCheckpoint})
		}
	}
	if d.UnshippedCapsule && t.capsule != nil && !t.spoolFull() {
		d.UnshippedCapsule = false
		seq := t.nextSeq()
		kind := capsule.WriteCapsule
		if t.capsule.Sealed {
			kind = capsule.WriteSeal
		}
		c := t.capsule.Capsule
		if err := t.logWrite(&capsule.Write{Seq: seq, Kind: kind, Origin: capsule.OriginAutomatic, At: t.now, Capsule: &c}); err != nil {
			return err
		}
		t.events = append(t.events, Event{Seq: seq, Kind: string(kind), Origin: capsule.OriginAutomatic, Summary: "capsule (the outbox had been full)", Logged: true, Write: kind})
	}
	return nil
}

func nullable(p *string) capsule.NullableString {
	if p == nil {
		return capsule.NullableString{Set: true}
	}
	return capsule.NullableString{Set: true, Valid: true, Value: *p}
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}
