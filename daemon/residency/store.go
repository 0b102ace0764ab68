// Package residency keeps one agent's continuity state durably on local
// disk, in a bbolt file under the agent's state directory.
//
// Every write goes through one writer goroutine that group-commits: it takes
// every write waiting at that moment, applies them in order to a copy of the
// state, commits them in one bbolt transaction (one fsync round), publishes
// the copy and only then answers each caller. A write that is answered
// without error is therefore on disk. Reads are served from the published
// copy and never touch the disk.
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
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/continuityd/continuityd/capsule"
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
)

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
	// OnCommit, when set, is called by the writer goroutine after each commit
	// with what it did. It must not block.
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
}

// Store is one agent's durable residency. It is safe for concurrent use.
type Store struct {
	agent    string
	db       *bolt.DB
	maxPend  int
	now      func() time.Time
	onCommit func([]Event)

	ops     chan *op
	quit    chan struct{}
	stopped chan struct{}

	closeMu sync.RWMutex // held for reading while submitting; Close takes it for writing
	closed  bool

	mu      sync.RWMutex // guards the published state below
	cur     *doc         // immutable once published
	capsule *capsule.CapsuleRecord
	heads   map[string]uint64 // upstream → acknowledged seq, as published
	logHead uint64            // highest logged seq
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.OpenTimeout,
		// The freelist is rebuilt on open instead of being written on every
		// commit: fewer pages per fsync on the hot path.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("agent %s: %s is locked by another process (is another continuityd running with the same state_dir?)", opts.Agent, path)
		}
		return nil, fmt.Errorf("agent %s: open %s: %w", opts.Agent, path, err)
	}
	s := &Store{
		agent:    opts.Agent,
		db:       db,
		maxPend:  opts.MaxPending,
		now:      opts.Now,
		onCommit: opts.OnCommit,
		ops:      make(chan *op, 1024),
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
		heads:    map[string]uint64{},
	}
	if err := s.load(opts.Upstreams); err != nil {
		db.Close()
		return nil, fmt.Errorf("agent %s: %w", opts.Agent, err)
	}
	go s.run()
	return s, nil
}

// load reads (or initialises) the state and the upstream cursors.
func (s *Store) load(upstreams []string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketState, bucketLog, bucketCursors, bucketDone, bucketDead} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
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
		if k, _ := tx.Bucket(bucketLog).Cursor().Last(); k != nil {
			s.logHead = binary.BigEndian.Uint64(k)
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
	return s.db.Close()
}

// Agent is the agent's name.
func (s *Store) Agent() string { return s.agent }

// lazyDelay is how long a batch holding only lazy ops (acknowledgements,
// visit resets) waits for a real write to ride along with, before it commits
// on its own. Losing a lazy op in a crash only repeats a delivery (under the
// same Idempotency-Key) or shows the same news twice.
const lazyDelay = 200 * time.Millisecond

// op is one unit of work for the writer goroutine.
type op struct {
	// apply validates first and mutates only when it will succeed: a refused
	// op must leave the batch's working copy exactly as it found it.
	apply func(*txn) (uint64, error)
	done  chan result // nil for fire-and-forget ops
	lazy  bool        // may wait up to lazyDelay for company
}

type result struct {
	seq uint64
	err error
}

// txn is what an op sees: the bbolt transaction, the working copy of the
// state and the batch's clock.
type txn struct {
	tx             *bolt.Tx
	d              *doc
	now            time.Time
	capsule        *capsule.CapsuleRecord
	capsuleChanged bool
	events         []Event
	acked          map[string]uint64
	logHead        uint64
	maxPending     int
}

// nextSeq assigns the next sequence number.
func (t *txn) nextSeq() uint64 {
	t.d.Seq++
	return t.d.Seq
}

// submit hands an op to the writer and waits for its commit.
func (s *Store) submit(ctx context.Context, apply func(*txn) (uint64, error)) (uint64, error) {
	o := &op{apply: apply, done: make(chan result, 1)}
	if err := s.enqueue(ctx, o); err != nil {
		return 0, err
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

// run is the writer goroutine: it group-commits whatever is waiting.
func (s *Store) run() {
	defer close(s.stopped)
	batch := make([]*op, 0, maxBatch)
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.quit:
			// Drain what was submitted before Close.
			for {
				select {
				case o := <-s.ops:
					batch = append(batch[:0], o)
					s.fill(&batch)
					s.commit(batch)
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		s.fill(&batch)
		if allLazy(batch) {
			t := time.NewTimer(lazyDelay)
			select {
			case o := <-s.ops:
				batch = append(batch, o)
				s.fill(&batch)
			case <-t.C:
			case <-s.quit:
			}
			t.Stop()
		}
		s.commit(batch)
	}
}

func allLazy(batch []*op) bool {
	for _, o := range batch {
		if !o.lazy {
			return false
		}
	}
	return true
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

// commit applies a batch in one transaction and answers every op in it.
func (s *Store) commit(batch []*op) {
	s.mu.RLock()
	work, capRec, logHead := s.cur.clone(), s.capsule, s.logHead
	s.mu.RUnlock()

	results := make([]result, len(batch))
	t := &txn{d: work, now: s.now().UTC(), capsule: capRec, acked: map[string]uint64{}, logHead: logHead, maxPending: s.maxPend}
	var newBytes []byte
	err := s.db.Update(func(tx *bolt.Tx) error {
		t.tx = tx
		for i, o := range batch {
			results[i].seq, results[i].err = o.apply(t)
		}
		var err error
		if newBytes, err = json.Marshal(work); err != nil {
			return err
		}
		st := tx.Bucket(bucketState)
		if err := st.Put(keyDoc, newBytes); err != nil {
			return err
		}
		if t.capsuleChanged {
			raw, err := json.Marshal(t.capsule)
			if err != nil {
				return err
			}
			if err := st.Put(keyCapsule, raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ierr := capsule.RefuseStatus(http.StatusInternalServerError, capsule.CodeInternal, "",
			"the write could not be stored: %v; nothing was saved", err)
		for i := range results {
			if results[i].err == nil {
				results[i] = result{err: ierr}
			}
		}
	} else {
		s.mu.Lock()
		s.cur, s.capsule, s.logHead = work, t.capsule, t.logHead
		for u, seq := range t.acked {
			if seq > s.heads[u] {
				s.heads[u] = seq
			}
		}
		s.mu.Unlock()
		if s.onCommit != nil && len(t.events) > 0 {
			s.onCommit(t.events)
		}
	}
	for i, o := range batch {
		if o.done != nil {
			o.done <- results[i]
		}
	}
}

// logWrite appends w to the log under its sequence number.
func (t *txn) logWrite(w *capsule.Write) error {
	w.IdempotencyKey = idempotencyPrefix + t.d.ResidencyID + "-" + fmt.Sprint(w.Seq)
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketLog).Put(u64(w.Seq), raw); err != nil {
		return err
	}
	t.logHead = w.Seq
	t.d.LogCount++
	return nil
}

// spoolFull reports whether the outbox is at its bound.
func (t *txn) spoolFull() bool {
	return t.maxPending > 0 && t.d.LogCount >= t.maxPending
}

func spoolFullError(max int) error {
	return capsule.RefuseStatus(http.StatusInsufficientStorage, capsule.CodeSpoolFull, "",
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
