package storage

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The engine's own keys, in the meta bucket its user names.
var (
	// KeyApplied holds the id of the last log record bbolt holds; records
	// after it are replayed on open.
	KeyApplied = []byte("wal_applied")
	// KeyClean is 1 when the last process closed the engine (bbolt then
	// holds every record of the log), 0 while a process has it open.
	KeyClean = []byte("clean")
	// KeySeqReserved is the highest sequence number the log may hold
	// beyond what bbolt holds: a batch whose seq is above it is committed
	// through bbolt, which raises it. After a loss of the log an operator
	// accepted, numbering goes on past it, so no seq is used again.
	KeySeqReserved = []byte("seq_reserved")
)

// SeqReserve is how far past the current seq each bbolt commit reserves;
// a flush every few seconds keeps a busy agent inside it (past it, the
// batch is made durable by a bbolt commit, which reserves more).
const SeqReserve = 10_000

// DefaultFlushDelay is how long bbolt may lag behind the log: the open
// transaction is committed this long after its first batch (or sooner
// when the log is half full, or on Close). It bounds the work a restart
// replays, not durability. Five seconds let the writes of several bursts
// of work (an active agent's automatic records come min_interval apart, a
// second at least; the activity and the upstream's ack ride on them or on
// the flush: see Lazy) share one bbolt commit, whose two syncs cost more
// than the batches' own.
const DefaultFlushDelay = 5 * time.Second

// maxBatch bounds one group commit so a flood of writers cannot make one
// transaction arbitrarily large.
const maxBatch = 256

// Op is one unit of work for a group commit.
type Op[T any] struct {
	// Apply validates first and mutates only when it will succeed: a
	// refused op must leave the batch's work exactly as it found it.
	Apply func(T) (uint64, error)
	// View, set instead of Apply, reads bbolt as of the batch's commit.
	View func(*bolt.Tx) error
	// Answer marks a write whose caller answers with the new state: the
	// batch's End is told, to prepare that answer while the log syncs.
	Answer bool
	done   chan result // nil for fire-and-forget (lazy) ops
}

type result struct {
	seq uint64
	err error
}

// Hooks are what the engine's user does at each step of a batch.
type Hooks[T any] struct {
	// Begin starts a batch's work; changes go through rec, which the log
	// records.
	Begin func(rec *Recorder) T
	// End stores the batch's final state through rec, after its ops (answer:
	// one of them answers with it), and returns the highest seq it used.
	End func(work T, answer bool) (seq uint64, err error)
	// Publish makes the batch's state the visible one, once it is durable.
	Publish func(work T)
	// Failed turns an error of a batch's commit into what its writers are
	// told.
	Failed func(err error) error
}

// Recovery is what OpenEngine did with the write-ahead log it found.
type Recovery struct {
	// Replayed is the records replayed into bbolt: the batches answered
	// but not yet flushed to bbolt when the last process stopped without
	// closing the store (a crash or a kill).
	Replayed int
	// Foreign is the records set aside because the bbolt file is new (it
	// was removed or replaced) and they belong to the state it replaced.
	Foreign int
	// TornTail describes the record a crash tore while it was being
	// written (it was never acknowledged); "" when there was none.
	TornTail string
	// Recreated is set when the log was missing after a clean stop (bbolt
	// held all of it) and a new one was made.
	Recreated bool
}

// CommitStats counts what the group commit has done since open.
type CommitStats struct {
	// Commits is the batches of writes committed: one log sync each (or,
	// for a batch too large for the log, a bbolt commit).
	Commits uint64
	// Writes is the writes those batches held; Writes/Commits is the mean
	// batch.
	Writes uint64
	// Busy is the time spent committing them, syncs included.
	Busy time.Duration
	// Flushes is the bbolt commits that caught up with the log.
	Flushes uint64
}

// EngineOptions configures OpenEngine.
type EngineOptions struct {
	Dir     string // holds the log
	LogSize int64  // 0: DefaultLogSize
	// FlushDelay: 0 is DefaultFlushDelay.
	FlushDelay time.Duration
	// LazyDelay bounds how long a lazy op waits for a write or a flush
	// to ride on; 0 is FlushDelay.
	LazyDelay time.Duration
	// Buckets are created when missing; Meta (one of them) holds the
	// engine's keys.
	Buckets [][]byte
	Meta    []byte
	// StartRecord is the payload of a new store's first log record: a
	// change bbolt holds too, so that a log found missing or zeroed after
	// a crash is known for damage.
	StartRecord []byte
}

// Engine group-commits batches of ops: whoever commits (the writer
// goroutine, or a caller that finds no commit in progress and so skips the
// hand-off) takes every op waiting at that moment, applies them in order to
// the open bbolt transaction through a Recorder, appends what they changed
// to the log with one fdatasync, publishes the batch's state and only then
// answers each caller. bbolt itself is committed at flushes (flushToBolt),
// off the answer path.
type Engine[T any] struct {
	db    *bolt.DB
	meta  []byte
	hooks Hooks[T]

	ops     chan *Op[T]
	flush   chan struct{} // buffered 1: lazy ops have waited the lazy delay
	quit    chan struct{}
	stopped chan struct{}

	lazyMu    sync.Mutex
	lazyOps   []*Op[T]    // ride on the next commit; see Lazy
	lazyTimer *time.Timer // the lazy delay running, nil when none (its end commits what lazy ops wait then)

	// commitMu is held by whoever commits or reads through the open
	// transaction; it owns the fields below (OpenEngine owns them before
	// the writer starts).
	commitMu   sync.Mutex
	log        *Log
	wtx        *bolt.Tx // the open transaction; nil right after a flush to bbolt
	unapplied  [][]byte // payloads logged since the last flush to bbolt
	flushDelay time.Duration
	lazyDelay  time.Duration
	flushTimer *time.Timer
	broken     error  // set when bbolt and the log could not be brought back in step
	reserved   uint64 // KeySeqReserved as bbolt holds it
	lastSeq    uint64 // the seq of the last batch published (a flush reserves past it)
	// lastPayload is the last batch's payload length: the next one's
	// buffer is made that size (and a quarter) at once.
	lastPayload int
	// lastWrites is how many callers' writes the last batch with a write
	// carried (lazy ops not counted): more than one, and writers are
	// arriving together (gather).
	lastWrites int
	// yield lets other goroutines run (runtime.Gosched; tests count it).
	yield      func()
	recovery   Recovery
	crashClose bool // Crash: Close leaves bbolt behind the log, as a crash would

	closeMu sync.RWMutex // held for reading while submitting; Close takes it for writing
	closed  bool

	stats struct{ commits, writes, busyNs, flushes atomic.Uint64 }
}

// ErrClosed is returned for ops submitted after Close.
var ErrClosed = errors.New("residency store is closed")

// OpenEngine checks the log in opts.Dir against db (CheckLog), replays
// into bbolt the records it does not hold yet, and calls load in the same
// transaction, which returns the highest seq the stored state used. The
// writer does not run until Start.
func OpenEngine[T any](db *bolt.DB, opts EngineOptions, hooks Hooks[T], load func(*bolt.Tx) (uint64, error)) (*Engine[T], error) {
	e := &Engine[T]{
		db:         db,
		meta:       opts.Meta,
		hooks:      hooks,
		ops:        make(chan *Op[T], 1024),
		flush:      make(chan struct{}, 1),
		quit:       make(chan struct{}),
		stopped:    make(chan struct{}),
		flushDelay: cmp.Or(opts.FlushDelay, DefaultFlushDelay),
		lazyDelay:  cmp.Or(opts.LazyDelay, opts.FlushDelay, DefaultFlushDelay),
		yield:      runtime.Gosched,
	}
	if err := e.recover(opts); err != nil {
		return nil, err
	}
	err := db.Update(func(tx *bolt.Tx) error {
		seq, err := load(tx)
		if err != nil {
			return err
		}
		e.lastSeq = seq
		st := tx.Bucket(e.meta)
		if v := st.Get(KeySeqReserved); len(v) == 8 {
			e.reserved = binary.BigEndian.Uint64(v)
		}
		if e.reserved < seq+SeqReserve/2 {
			e.reserved = seq + SeqReserve
			return st.Put(KeySeqReserved, u64(e.reserved))
		}
		return nil
	})
	if err != nil {
		e.log.Close()
		return nil, err
	}
	e.flushTimer = time.NewTimer(time.Hour)
	e.flushTimer.Stop()
	return e, nil
}

// Start starts the writer goroutine; Close stops it.
func (e *Engine[T]) Start() { go e.run() }

// recover opens the write-ahead log, checks it against what bbolt says
// was written (CheckLog), and replays into bbolt, in one synced
// transaction, the records bbolt does not hold yet: the batches answered
// before a crash and not flushed. The store is marked open (not clean) in
// the same transaction.
func (e *Engine[T]) recover(opts EngineOptions) error {
	found, err := ReadLog(opts.Dir, cmp.Or(opts.LogSize, DefaultLogSize))
	if err != nil {
		return err
	}
	recs := found.Recs
	var w *Log
	err = e.db.Update(func(tx *bolt.Tx) error {
		for _, b := range opts.Buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		st := tx.Bucket(e.meta)
		var applied uint64
		if v := st.Get(KeyApplied); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
			clean := len(st.Get(KeyClean)) == 1 && st.Get(KeyClean)[0] == 1
			torn, err := CheckLog(found, applied, clean)
			if err != nil {
				return err
			}
			e.recovery.TornTail = torn
			e.recovery.Recreated = clean && !found.Existed
		} else if len(recs) > 0 {
			// A new bbolt file (the old one was removed) beside an old
			// log: its records change a state this file never held. They
			// are set aside, and the log goes on past their ids.
			applied = recs[len(recs)-1].ID
			e.recovery.Foreign = len(recs)
		}
		var err error
		if w, err = OpenLog(found); err != nil {
			return err
		}
		if applied == 0 && len(recs) == 0 {
			// A new store: its log starts with a record bbolt holds too,
			// so from now on bbolt knows the log was written and a log
			// found missing or zeroed after a crash is damage, not a new
			// log (CheckLog).
			if err := w.Append(opts.StartRecord); err != nil {
				return fmt.Errorf("%s: %w", found.Path, err)
			}
			if err := Replay(tx, opts.StartRecord); err != nil {
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
					Found: fmt.Sprintf("its first record past what residency.db holds (id %d) is %d: records are missing, so the log does not continue this residency.db (restored from an older copy?)", last, r.ID),
					Lost:  "the writes of the missing records are lost"}
			}
			if err := Replay(tx, r.Payload); err != nil {
				return &DamageError{Path: found.Path,
					Found: fmt.Sprintf("record %d at offset %d has a valid checksum but cannot be replayed (%v)", r.ID, r.Off, err),
					Lost:  "the writes from that record on cannot be replayed"}
			}
			last = r.ID
			e.recovery.Replayed++
		}
		w.ContinueAfter(last)
		if err := st.Put(KeyClean, []byte{0}); err != nil {
			return err
		}
		return st.Put(KeyApplied, u64(last))
	})
	if err != nil {
		if w != nil {
			w.Close()
		}
		return err
	}
	e.log = w
	return nil
}

// Recovery reports what OpenEngine did with the write-ahead log.
func (e *Engine[T]) Recovery() Recovery { return e.recovery }

// Stats returns the group commit's counters.
func (e *Engine[T]) Stats() CommitStats {
	return CommitStats{
		Commits: e.stats.commits.Load(),
		Writes:  e.stats.writes.Load(),
		Busy:    time.Duration(e.stats.busyNs.Load()),
		Flushes: e.stats.flushes.Load(),
	}
}

// Close stops the writer after the ops already submitted, flushes to
// bbolt and closes the log and bbolt. Ops submitted later fail with
// ErrClosed.
func (e *Engine[T]) Close() error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()
	close(e.quit)
	<-e.stopped
	e.lazyMu.Lock()
	if e.lazyTimer != nil {
		e.lazyTimer.Stop()
		e.lazyTimer = nil
	}
	e.lazyMu.Unlock()
	return errors.Join(e.log.Close(), e.db.Close())
}

// Crash makes Close leave bbolt behind the log, as a crash would (tests).
func (e *Engine[T]) Crash() {
	e.commitMu.Lock()
	e.crashClose = true
	e.commitMu.Unlock()
}

// Log is the write-ahead log, for whoever holds the commit (a View's fn:
// tests).
func (e *Engine[T]) Log() *Log { return e.log }

// Submit commits an op that applies apply and waits for its commit.
func (e *Engine[T]) Submit(ctx context.Context, apply func(T) (uint64, error), answer bool) (uint64, error) {
	return e.submitOp(ctx, &Op[T]{Apply: apply, Answer: answer, done: make(chan result, 1)})
}

// View runs fn on bbolt as the writers see it (every answered write
// included). fn must copy what it keeps.
func (e *Engine[T]) View(fn func(*bolt.Tx) error) error {
	_, err := e.submitOp(context.Background(), &Op[T]{View: fn, done: make(chan result, 1)})
	return err
}

// submitOp commits o itself when no commit is in progress (with whatever
// else is waiting: a lone writer pays no goroutine hand-offs), and
// otherwise hands it to the writer goroutine, which group-commits what
// piles up meanwhile.
func (e *Engine[T]) submitOp(ctx context.Context, o *Op[T]) (uint64, error) {
	if done, err := e.commitNow(o); err != nil {
		return 0, err
	} else if !done {
		if err := e.enqueue(ctx, o); err != nil {
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
func (e *Engine[T]) commitNow(o *Op[T]) (done bool, err error) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return false, ErrClosed
	}
	if !e.commitMu.TryLock() {
		return false, nil
	}
	defer e.commitMu.Unlock()
	batch := []*Op[T]{o}
	e.gather()
	e.fill(&batch)
	e.commit(batch)
	return true, nil
}

func (e *Engine[T]) enqueue(ctx context.Context, o *Op[T]) error {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	select {
	case e.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the writer goroutine: it group-commits what callers hand it (and
// the lazy ops, on a write, on the flush, or once they waited the lazy
// delay), and flushes to bbolt when the open transaction is due.
func (e *Engine[T]) run() {
	defer close(e.stopped)
	defer e.flushTimer.Stop()
	batch := make([]*Op[T], 0, maxBatch)
	for {
		select {
		case o := <-e.ops:
			e.commitMu.Lock()
			batch = append(batch[:0], o)
			e.gather()
			e.fill(&batch)
			e.commit(batch)
			e.commitMu.Unlock()
		case <-e.flush:
			// The lazy ops waited the lazy delay: they commit now, even
			// when the batch filled with reads only (which take no lazy
			// op), or they would wait for the next write, the timer
			// spent. Nobody waits on them: their record is not synced,
			// unless a write waiting to be answered came with them.
			e.commitMu.Lock()
			batch = batch[:0]
			e.fill(&batch)
			d := logUnsynced
			if slices.ContainsFunc(batch, func(o *Op[T]) bool { return o.View == nil }) {
				d = logSynced
			}
			e.commitBatch(append(e.takeLazy(), batch...), d)
			e.commitMu.Unlock()
		case <-e.flushTimer.C:
			e.commitMu.Lock()
			if lazy := e.takeLazy(); len(lazy) > 0 {
				e.commitThroughBolt(lazy) // the flush, with them in it
			} else {
				e.flushToBolt()
			}
			e.commitMu.Unlock()
		case <-e.quit:
			// Commit what was submitted before Close, then flush to bbolt.
			e.commitMu.Lock()
			defer e.commitMu.Unlock()
			for {
				batch = batch[:0]
				e.fill(&batch)
				if len(batch) == 0 {
					break
				}
				e.commit(batch)
			}
			e.commit(nil) // the lazy ops left
			if !e.crashClose {
				e.closeClean()
			} else if e.wtx != nil {
				e.wtx.Rollback()
			}
			return
		}
	}
}

// commit applies a batch, and the lazy ops waiting, to the open
// transaction, makes it durable with one log record and answers every op
// in it. The caller holds commitMu.
func (e *Engine[T]) commit(batch []*Op[T]) {
	// Lazy ops ride on writes (and on Close's last commit, of an empty
	// batch), never on reads: a read must not pay for a sync. They were
	// queued before the batch's writes, so they go first.
	if len(batch) == 0 || slices.ContainsFunc(batch, func(o *Op[T]) bool { return o.View == nil }) {
		batch = append(e.takeLazy(), batch...)
	}
	e.commitBatch(batch, logSynced)
}

// How commitBatch makes a batch durable.
type durability int

const (
	logSynced   durability = iota // a log record, synced: the writers are answered once it is durable
	logUnsynced                   // a log record the next sync or flush makes durable (lazy ops only)
	throughBolt                   // no log record: bbolt's commit of the open transaction (a flush)
)

// commitThroughBolt commits batch with the open transaction as a flush to
// bbolt: bbolt's commit makes it durable, no log record is written.
func (e *Engine[T]) commitThroughBolt(batch []*Op[T]) {
	e.commitBatch(batch, throughBolt)
	e.flushToBolt() // when the batch held no write
}

// commitBatch is commit without the lazy ops, made durable as d says.
func (e *Engine[T]) commitBatch(batch []*Op[T], d durability) {
	if len(batch) == 0 {
		return
	}
	results := make([]result, len(batch))
	if err := e.commitWrites(batch, results, d); err != nil {
		ferr := e.hooks.Failed(err)
		for i, o := range batch {
			if o.View == nil && results[i].err == nil {
				results[i] = result{err: ferr}
			}
		}
	}
	for i, o := range batch {
		if o.View != nil {
			results[i].err = e.runView(o.View)
		}
	}
	for i, o := range batch {
		if o.done != nil {
			o.done <- results[i]
		}
	}
	if e.log.HalfFull() {
		e.flushToBolt()
	}
}

// commitWrites applies the batch's writes and logs them. On error nothing
// of the batch is kept (bbolt is brought back to the last logged batch) and
// results hold what each op said before the failure.
func (e *Engine[T]) commitWrites(batch []*Op[T], results []result, d durability) error {
	if e.broken != nil {
		return e.broken
	}
	writes := false
	for _, o := range batch {
		writes = writes || o.View == nil
	}
	if !writes {
		return nil
	}
	start := time.Now()
	defer func() {
		e.stats.commits.Add(1)
		e.stats.writes.Add(uint64(len(batch)))
		e.stats.busyNs.Add(uint64(time.Since(start)))
	}()
	if err := e.begin(); err != nil {
		return err
	}
	rec := NewRecorder(e.wtx, e.lastPayload+e.lastPayload/4)
	work := e.hooks.Begin(rec)
	answer := false
	for i, o := range batch {
		if o.View == nil {
			results[i].seq, results[i].err = o.Apply(work)
			answer = answer || (o.Answer && results[i].err == nil)
		}
	}
	seq, err := e.hooks.End(work, answer)
	if err == nil {
		err = e.logBatch(rec.Payload(), seq, d)
	}
	if err != nil {
		e.rewind()
		return err
	}
	e.hooks.Publish(work)
	e.lastSeq = seq
	e.lastPayload = len(rec.Payload())
	e.lastWrites = 0
	for _, o := range batch {
		if o.View == nil && o.done != nil { // a caller's write, not a lazy op
			e.lastWrites++
		}
	}
	return nil
}

// logBatch makes the batch durable as d says: one log record, or a flush
// to bbolt (asked for, or when the record does not fit in what is left of
// the log).
func (e *Engine[T]) logBatch(payload []byte, seq uint64, d durability) error {
	if d == throughBolt {
		e.flushTimer.Stop()
		if err := e.commitTx(e.log.LastID(), seq, false); err != nil {
			return err
		}
		e.stats.flushes.Add(1)
		return nil
	}
	if !e.log.Fits(len(payload)) || seq > e.reserved {
		// Too big for what is left of the log, or past the seqs reserved:
		// bbolt's own commit makes the batch durable (and reserves more),
		// and the log starts a new lap. No record id is used: bbolt saying
		// it holds record N means record N was once written to the log
		// (CheckLog relies on it).
		return e.commitTx(e.log.LastID(), seq, false)
	}
	appendRecord := e.log.Append
	if d == logUnsynced {
		appendRecord = e.log.AppendUnsynced
	}
	if err := appendRecord(payload); err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	e.unapplied = append(e.unapplied, payload)
	if len(e.unapplied) == 1 {
		e.flushTimer.Reset(e.flushDelay)
	}
	return nil
}

// begin opens the transaction batches accumulate in until a flush.
func (e *Engine[T]) begin() error {
	if e.wtx != nil {
		return nil
	}
	tx, err := e.db.Begin(true)
	if err != nil {
		return err
	}
	e.wtx = tx
	return nil
}

// flushToBolt commits the open transaction with bbolt's own syncs, so the
// log can start a new lap (named apart from Checkpoint, the agent's
// write: this is the storage catching up with its log). A failure leaves
// the transaction as it was (rebuilt from the log); the next batch or
// flush tries again.
func (e *Engine[T]) flushToBolt() {
	e.flushTimer.Stop()
	if e.wtx == nil || e.broken != nil {
		return
	}
	if err := e.commitTx(e.log.LastID(), e.lastSeq, false); err != nil {
		e.rewind()
		return
	}
	e.stats.flushes.Add(1)
}

// closeClean flushes to bbolt for the last time and marks the store
// clean: bbolt holds every record, so a log found missing or zeroed at the
// next open has lost nothing.
func (e *Engine[T]) closeClean() {
	e.flushTimer.Stop()
	if e.broken == nil && e.begin() == nil && e.commitTx(e.log.LastID(), e.lastSeq, true) == nil {
		return
	}
	// Not flushed (a full disk, say): the log holds every answered batch
	// and the next open replays it. An open transaction would make bbolt's
	// Close wait for ever.
	if e.wtx != nil {
		e.wtx.Rollback()
		e.wtx = nil
	}
}

// commitTx records applied as the last log record bbolt holds, reserves
// the seqs past seq the log may use, and commits; clean marks a store
// being closed.
func (e *Engine[T]) commitTx(applied, seq uint64, clean bool) error {
	st := e.wtx.Bucket(e.meta)
	if err := st.Put(KeyApplied, u64(applied)); err != nil {
		return err
	}
	reserved := max(e.reserved, seq+SeqReserve)
	if reserved != e.reserved {
		if err := st.Put(KeySeqReserved, u64(reserved)); err != nil {
			return err
		}
	}
	if clean {
		if err := st.Put(KeyClean, []byte{1}); err != nil {
			return err
		}
	}
	tx := e.wtx
	e.wtx = nil
	if err := tx.Commit(); err != nil {
		return err
	}
	e.reserved = reserved
	e.unapplied = e.unapplied[:0]
	e.log.Restart()
	return nil
}

// rewind drops the open transaction, with whatever a failed batch did to
// it, and rebuilds it from the batches logged since the last flush to
// bbolt. If even that fails, bbolt and the log can no longer be kept in
// step in this process: every later write is refused until a restart,
// which replays the log.
func (e *Engine[T]) rewind() {
	if e.wtx != nil {
		e.wtx.Rollback()
		e.wtx = nil
	}
	err := e.begin()
	for _, p := range e.unapplied {
		if err != nil {
			break
		}
		err = Replay(e.wtx, p)
	}
	if err != nil {
		e.broken = fmt.Errorf("the residency store could not recover from a failed write (%v); restart continuityd", err)
	}
}

// runView runs a read in the open transaction (or a fresh read-only one).
func (e *Engine[T]) runView(fn func(*bolt.Tx) error) error {
	if e.wtx != nil {
		return fn(e.wtx)
	}
	tx, err := e.db.Begin(false)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}
