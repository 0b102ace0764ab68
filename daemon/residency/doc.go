package residency

import (
	"maps"
	"slices"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

// How much history the state document keeps; older entries leave the
// document (closed commitments move to their own bucket) so that every
// commit logs a few kilobytes, not the agent's whole past.
const (
	keepDecisions     = 20
	keepReceipts      = capsule.CapsuleReceipts
	keepDoneCommits   = 20 // closed or dropped commitments shown in resume
	keepSincePaths    = 100
	keepSinceCommits  = 50
	keepSinceSignals  = 50
	keepSinceHead     = 20
	keepRefusals      = 10
	idempotencyPrefix = "cd-"
)

// doc is the agent's residency as stored under state/doc. It is the one
// mutable value of the store: a commit applies a batch to a copy and
// publishes the copy only after the batch is on disk.
type doc struct {
	ResidencyID    string                      `json:"residency_id"`
	Seq            uint64                      `json:"seq"`
	Focus          string                      `json:"focus"`
	FocusUpdatedAt *time.Time                  `json:"focus_updated_at"`
	FocusOrigin    capsule.Origin              `json:"focus_origin,omitempty"`
	WorkingState   *capsule.WorkingStateRecord `json:"working_state"`
	Commitments    []capsule.Commitment        `json:"commitments"`
	NextCommitment uint64                      `json:"next_commitment"`
	Decisions      []capsule.DecisionRecord    `json:"decisions"`
	PublicStatus   *capsule.PublicStatusRecord `json:"public_status"`
	Stopped        *capsule.StopRecord         `json:"stopped"`
	Receipts       []string                    `json:"receipts"`
	Plan           []capsule.PlanStep          `json:"plan,omitempty"`
	PlanAt         *time.Time                  `json:"plan_at,omitempty"`
	Since          since                       `json:"since"`
	Context        capsule.ContextState        `json:"context"`
	LastCompaction string                      `json:"last_compaction,omitempty"`
	LastWriteAt    *time.Time                  `json:"last_write_at"`
	Refused        []capsule.Refusal           `json:"refused"`
	CapsuleSeq     uint64                      `json:"capsule_seq"`
	// Unshipped is set when automatic writes were stored but not logged
	// because the outbox was full; one checkpoint of the latest state is
	// logged for them once there is room (they are coalesced).
	Unshipped        bool `json:"unshipped,omitempty"`
	UnshippedCapsule bool `json:"unshipped_capsule,omitempty"`
	// DeadLetters counts each upstream's dead letter.
	DeadLetters map[string]int `json:"dead_letters"`
}

// since holds the since-last-visit accumulators. Every listed entry carries
// the sequence number that produced it, and the counters are running totals
// with the base shown at the last visit, so that a reset clears exactly what
// the agent was shown and nothing that landed a moment later.
type since struct {
	At          time.Time   `json:"at"`
	WritesTotal int         `json:"writes_total"`
	WritesBase  int         `json:"writes_base"`
	PathsTotal  int         `json:"paths_total"`
	PathsBase   int         `json:"paths_base"`
	Paths       []seqPath   `json:"paths"`
	Commits     []seqString `json:"commits"`
	Signals     []seqSignal `json:"signals"`
	Head        []seqHead   `json:"head,omitempty"`
}

type seqHead struct {
	Seq  uint64           `json:"seq"`
	Move capsule.HeadMove `json:"move"`
}

type seqString struct {
	Seq uint64 `json:"seq"`
	V   string `json:"v"`
}

// seqPath is a changed path since the last visit, listed once: Seq is the
// change that touched it last, N how many changes touched it (a stored
// entry without n counts one), First the change that listed it first, which
// tells the entry a visit was shown from one listed again after eviction.
type seqPath struct {
	Seq   uint64 `json:"seq"`
	V     string `json:"v"`
	N     int    `json:"n,omitempty"`
	First uint64 `json:"first,omitempty"`
}

func (p seqPath) count() int { return max(p.N, 1) }

type seqSignal struct {
	Seq  uint64             `json:"seq"`
	Note capsule.SignalNote `json:"note"`
}

// visitMark is what a visit saw: the last sequence number, the running
// totals and the changed paths with their counts at that moment (shown is
// the published document's slice: never written).
type visitMark struct {
	seq           uint64
	writes, paths int
	shown         []seqPath
}

// resetTo clears what the visit m was shown. A path changed again after the
// visit stays, counting only the changes since.
func (s *since) resetTo(m visitMark, at time.Time) {
	s.At = at
	s.WritesBase, s.PathsBase = m.writes, m.paths
	shown := make(map[string]seqPath, len(m.shown))
	for _, p := range m.shown {
		if q, dup := shown[p.V]; dup { // a document stored before paths were listed once
			p.N, p.First = p.count()+q.count(), min(p.First, q.First)
		}
		shown[p.V] = p
	}
	s.Paths = keepAfter(s.Paths, func(v seqPath) bool { return v.Seq > m.seq })
	for i, p := range s.Paths {
		if q, ok := shown[p.V]; ok && q.First == p.First {
			s.Paths[i].N = max(p.count()-q.count(), 1) // changed since m.seq: at least once
		}
	}
	s.Commits = keepAfter(s.Commits, func(v seqString) bool { return v.Seq > m.seq })
	s.Signals = keepAfter(s.Signals, func(v seqSignal) bool { return v.Seq > m.seq })
	s.Head = keepAfter(s.Head, func(v seqHead) bool { return v.Seq > m.seq })
}

// keepAfter returns the entries to keep in a new slice: published documents
// share backing arrays with the working copy and must never be written.
func keepAfter[T any](xs []T, keep func(T) bool) []T {
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// clone copies d deeply enough that the writer can change the copy while
// readers hold d: every slice is copied, and commitments with their history.
// Pointers to records (working state, public status, stop) are replaced by
// ops, never written through.
func (d *doc) clone() *doc {
	c := *d
	c.Commitments = make([]capsule.Commitment, len(d.Commitments))
	for i, cm := range d.Commitments {
		cm.History = slices.Clone(cm.History)
		c.Commitments[i] = cm
	}
	c.Decisions = slices.Clone(d.Decisions)
	c.Receipts = slices.Clone(d.Receipts)
	c.Plan = slices.Clone(d.Plan)
	c.Refused = slices.Clone(d.Refused)
	c.Since.Paths = slices.Clone(d.Since.Paths)
	c.Since.Commits = slices.Clone(d.Since.Commits)
	c.Since.Signals = slices.Clone(d.Since.Signals)
	c.Since.Head = slices.Clone(d.Since.Head)
	c.DeadLetters = maps.Clone(d.DeadLetters)
	if c.DeadLetters == nil {
		c.DeadLetters = map[string]int{}
	}
	return &c
}

// notePaths lists the paths changed by change seq, each path once: one
// changed again moves to the end (the most recent) and counts one more
// change; past keepSincePaths the paths changed longest ago leave the list.
// paths are most recent first, as the watcher reports them.
func (s *since) notePaths(seq uint64, paths []string) {
	if len(paths) == 0 {
		return
	}
	touched := make(map[string]seqPath, len(paths))
	for _, p := range paths {
		e, ok := touched[p]
		if !ok {
			e = seqPath{Seq: seq, V: p, First: seq}
		}
		e.N++
		touched[p] = e
	}
	// A new slice: the published document shares the old one.
	out := make([]seqPath, 0, min(len(s.Paths)+len(touched), keepSincePaths+len(touched)))
	for _, x := range s.Paths {
		if e, ok := touched[x.V]; ok {
			e.N += x.count()
			e.First = x.First
			touched[x.V] = e
			continue
		}
		out = append(out, x)
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if e, ok := touched[paths[i]]; ok {
			out = append(out, e)
			delete(touched, paths[i])
		}
	}
	if len(out) > keepSincePaths {
		out = out[len(out)-keepSincePaths:]
	}
	s.Paths = out
}

// appendBounded appends v and drops the oldest entries beyond limit; a
// list that reaches it is copied once into a new array of its own.
func appendBounded[T any](xs []T, limit int, v ...T) []T {
	drop := len(xs) + len(v) - limit
	if drop <= 0 {
		return append(xs, v...)
	}
	out := make([]T, 0, limit)
	if drop < len(xs) {
		out = append(out, xs[drop:]...)
	} else {
		v = v[drop-len(xs):]
	}
	return append(out, v...)
}

func (s *since) wire() capsule.SinceLastVisit {
	out := capsule.SinceLastVisit{
		Since:      s.At,
		Writes:     s.WritesTotal - s.WritesBase,
		PathCount:  s.PathsTotal - s.PathsBase,
		PathCounts: map[string]int{},
		Paths:      []string{},
		Commits:    []string{},
		Signals:    []capsule.SignalNote{},
		Head:       []capsule.HeadMove{},
	}
	for _, p := range s.Paths {
		if n, dup := out.PathCounts[p.V]; dup { // a document stored before paths were listed once
			out.Paths = slices.DeleteFunc(out.Paths, func(v string) bool { return v == p.V })
			p.N = p.count() + n
		}
		out.Paths = append(out.Paths, p.V)
		out.PathCounts[p.V] = p.count()
	}
	for _, c := range s.Commits {
		out.Commits = append(out.Commits, c.V)
	}
	for _, n := range s.Signals {
		out.Signals = append(out.Signals, n.Note)
	}
	for _, h := range s.Head {
		out.Head = append(out.Head, h.Move)
	}
	return out
}
