// Package residency keeps one agent's continuity state durably on local
// disk, in a bbolt file under the agent's state directory. It is the
// domain's rules applied to one document (the commitment limit, the
// since-last-visit bookkeeping, the dead letter, the outbox's log); the
// storage engine under them (group commit, the write-ahead log, recovery,
// damage checks) is package storage.
//
// Each write is an op on a txn: a copy of the published document and the
// batch's view of bbolt (kv). The engine group-commits the ops waiting,
// and only once the batch is on disk is the copy published and each
// caller answered: a write answered without error is on disk. Reads of
// the state are served from the published copy and never touch the disk;
// reads of the log and the dead letter go through the engine, which alone
// sees the open transaction.
//
// Writes that must travel upstream are also appended, in the same
// transaction, to an ordered log keyed by the agent's sequence number; the
// outbox reads the log from a per-upstream cursor and acknowledges what each
// upstream has taken.
package residency

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
var ErrClosed = storage.ErrClosed

var (
	bucketState   = []byte("state")       // doc, capsule
	bucketLog     = []byte("log")         // seq → Write (what the outbox ships)
	bucketCursors = []byte("cursors")     // upstream → last acknowledged seq
	bucketDone    = []byte("commitments") // closed and dropped commitments, by id
	keyDoc        = []byte("doc")
	keyCapsule    = []byte("capsule")
	// The engine's keys in the state bucket (see package storage).
	keyWALApplied  = storage.KeyApplied
	keyClean       = storage.KeyClean
	keySeqReserved = storage.KeySeqReserved
)

// startRecord is the payload of a new residency's first log record: it
// notes in the state bucket that the log has started.
var startRecord = storage.AppendPut(nil, bucketState, []byte("wal_started"), []byte{1})

// seqReserve is how far past the current seq each bbolt commit reserves.
const seqReserve = storage.SeqReserve

// Event is something a committed write did, for the agent's wait callers and
// the outbox.
type Event struct {
	Seq     uint64            `json:"seq"`
	Kind    string            `json:"kind"` // checkpoint, capsule, capsule_seal, signal, activity, commit, receipt, head
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

	// flushDelay, lazyDelay and walSize override the defaults (tests).
	flushDelay time.Duration
	lazyDelay  time.Duration
	walSize    int64
}

// Store is one agent's durable residency. It is safe for concurrent use.
type Store struct {
	agent    string
	dir      string
	maxPend  int
	now      func() time.Time
	onCommit func([]Event)
	eng      *storage.Engine[*txn]

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
	answer    atomic.Pointer[ResumeAnswer] // the resume answer of a published state; see VisitAnswer
	// answerRead: a resume read an answer since the last commit encoded
	// one ahead (endBatch encodes the next only then).
	answerRead atomic.Bool
	encoding   sync.WaitGroup // the answer encodings commits started; Close waits
	// The last encodings' lengths: the next one's buffer is made to fit.
	docLen, stateLen atomic.Int64
}

// CommitStats counts what the store's group commit has done since Open.
type CommitStats = storage.CommitStats

// CommitStats returns the group commit's counters.
func (s *Store) CommitStats() CommitStats { return s.eng.Stats() }

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
		agent:    opts.Agent,
		dir:      opts.Dir,
		maxPend:  opts.MaxPending,
		now:      opts.Now,
		onCommit: opts.OnCommit,
		heads:    map[string]uint64{},
	}
	hooks := storage.Hooks[*txn]{Begin: s.beginBatch, End: s.endBatch, Publish: s.publish,
		Failed: func(err error) error { return commitError(s.dir, err) }}
	eopts := storage.EngineOptions{Dir: opts.Dir, LogSize: opts.walSize, FlushDelay: opts.flushDelay, LazyDelay: opts.lazyDelay,
		Buckets: [][]byte{bucketState, bucketLog, bucketCursors, bucketDone, bucketDead}, Meta: bucketState,
		StartRecord: startRecord}
	err = storage.GuardBolt(path, func() error {
		var err error
		s.eng, err = storage.OpenEngine(db, eopts, hooks, func(tx *bolt.Tx) (uint64, error) { return s.load(tx, opts.Upstreams) })
		return err
	})
	if err != nil {
		db.Close()
		if diskFull(err) {
			err = fmt.Errorf("%w: the disk holding %s is full; free space on it and start continuityd again (the log's records are kept and replayed then)", err, opts.Dir)
		}
		return nil, fmt.Errorf("agent %s: %w", opts.Agent, storage.WithAgent(err, opts.Agent))
	}
	s.eng.Start()
	return s, nil
}

// load reads (or initialises) the state and the upstream cursors.
// It returns the stored state's seq.
func (s *Store) load(tx *bolt.Tx, upstreams []string) (uint64, error) {
	err := func() error {
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
	}()
	if err != nil {
		return 0, err
	}
	return s.cur.Seq, nil
}

// Close stops the writer after the writes already submitted, and closes the
// files. Writes submitted later fail with ErrClosed.
func (s *Store) Close() error {
	err := s.eng.Close()
	s.encoding.Wait()
	return err
}

// Recovery is what Open did with the write-ahead log it found.
type Recovery = storage.Recovery

// Recovery reports what Open did with the write-ahead log.
func (s *Store) Recovery() Recovery { return s.eng.Recovery() }

// Agent is the agent's name.
func (s *Store) Agent() string { return s.agent }

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
	encoded        *encodedState // the answer's encoding, when one answers with the state
	resume         *ResumeAnswer // the state's resume answer, made with encoded
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

// nextSeq assigns the next sequence number. Every numbered write (a
// checkpoint, a capsule, a signal, a work record, a session end) is a
// write: LastWriteAt moves with the number, so status never shows a seq
// above zero with no last write.
func (t *txn) nextSeq() uint64 {
	t.d.Seq++
	now := t.now
	t.d.LastWriteAt = &now
	return t.d.Seq
}

// submit commits an op and waits for its commit.
func (s *Store) submit(ctx context.Context, apply func(*txn) (uint64, error)) (uint64, error) {
	return s.eng.Submit(ctx, apply, false)
}

// view runs fn on bbolt as the writers see it (every answered write
// included). fn must copy what it keeps.
func (s *Store) view(fn func(*bolt.Tx) error) error { return s.eng.View(fn) }

// lazy queues an op whose outcome nobody waits for; it commits with the
// next write, or with the next flush to bbolt (acknowledgements, visit
// resets, activity: losing one in a crash only repeats a delivery under
// the same Idempotency-Key, shows the same news twice, or leaves out
// paths the next snapshot holds). Dropped silently after Close.
func (s *Store) lazy(apply func(*txn) (uint64, error)) { s.eng.Lazy(apply) }

// beginBatch starts a batch on a copy of the published state.
func (s *Store) beginBatch(rec *storage.Recorder) *txn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &txn{kv: rec, d: s.cur.clone(), now: s.now().UTC(), capsule: s.capsule, acked: map[string]uint64{},
		logHead: s.logHead, logged: s.logged, maxPending: s.maxPend}
}

// endBatch stores the batch's state in the transaction. The new state is
// final from here on and only read: when a caller answers with it, its
// answer is encoded while the log syncs (the disk, not the CPU, is busy
// then). The callers wait for it in StateJSON; the commit does not.
func (s *Store) endBatch(t *txn, answer bool) (uint64, error) {
	if answer {
		// The writer's answer first; the resume answer after it, for the
		// resume that so often follows a write, but only when the last
		// one was read: a flood of writes with no resume between them
		// spends no CPU on answers nobody asks for (the first resume
		// after it encodes its own, in VisitAnswer).
		t.encoded = newEncodedState(t.d, t.capsule)
		if s.answerRead.Swap(false) {
			t.resume = newResumeAnswer(s.agent, t.d, t.capsule)
		}
		s.encoding.Go(func() {
			t.encoded.encode(s.agent, &s.stateLen)
			if t.resume != nil {
				t.resume.encode(int(s.stateLen.Load()))
			}
		})
	}
	raw, err := encodeDoc(t.d, make([]byte, 0, s.docLen.Load()+512))
	if err != nil {
		return 0, err
	}
	s.docLen.Store(int64(len(raw)))
	if err := t.put(bucketState, keyDoc, raw); err != nil {
		return 0, err
	}
	if t.capsuleChanged {
		raw, err := json.Marshal(t.capsule)
		if err != nil {
			return 0, err
		}
		if err := t.put(bucketState, keyCapsule, raw); err != nil {
			return 0, err
		}
	}
	return t.d.Seq, nil
}

// publish makes a durable batch's state the one readers see.
func (s *Store) publish(t *txn) {
	s.mu.Lock()
	s.cur, s.capsule, s.logHead, s.logged = t.d, t.capsule, t.logHead, t.logged
	for u, seq := range t.acked {
		if seq > s.heads[u] {
			s.heads[u] = seq
		}
	}
	if t.encoded != nil {
		s.stateJSON.Store(t.encoded) // before anyone can read the state it encodes
		if t.resume != nil {
			s.answer.Store(t.resume)
		}
	}
	s.mu.Unlock()
	if s.onCommit != nil && len(t.events) > 0 {
		s.onCommit(t.events)
	}
}

// logWrite appends w to the log under its sequence number.
func (t *txn) logWrite(w *capsule.Write) error {
	return t.logWriteEncoded(w, nil)
}

// logWriteEncoded is logWrite for a checkpoint write whose checkpoint its
// caller encoded already (cpJSON, json.Marshal of w.Checkpoint), outside
// the commit: only the small envelope is encoded here, by hand, while every
// other writer waits. nil cpJSON encodes all of w.
func (t *txn) logWriteEncoded(w *capsule.Write, cpJSON []byte) error {
	w.IdempotencyKey = idempotencyPrefix + t.d.ResidencyID + "-" + strconv.FormatUint(w.Seq, 10)
	raw, ok, err := encodeWriteRecord(w, cpJSON)
	if !ok {
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
