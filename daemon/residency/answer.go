package residency

import (
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/daemonside/jsonappend"
)

// ResumeAnswer is the resume answer of one published state, encoded once:
// by the commit that publishes the state (while its log syncs, when a
// resume read the answer before it), or by the first resume that finds
// none. What the rest of the daemon knows (the
// work snapshot, the paths others changed, the upstreams' delivery, what
// is degraded, the conflicts) changes without a commit, so it is left as
// slots that Append fills on every read. A published state is never
// changed, and the answer is kept with the state it encodes, so a resume
// never shows a state older than the one published when it read: every
// acknowledged write.
type ResumeAnswer struct {
	agent string
	d     *doc
	c     *capsule.CapsuleRecord
	done  chan struct{}
	raw   []byte // the encoding, the slots' values empty
	slots slots
	err   error
}

// The values of a resume the agent fills at read time.
const (
	slotSnapshot = iota
	slotByOthers
	slotUpstreams
	slotDegraded
	slotConflicts
	numSlots
)

// slots are where each value the agent fills is in an encoding: the bytes
// [start, end) of its value; nil records nothing.
type slots [numSlots][2]int

func (sl *slots) begin(i int, w *jsonappend.Writer) {
	if sl != nil {
		sl[i][0] = len(w.B)
	}
}

func (sl *slots) end(i int, w *jsonappend.Writer) {
	if sl != nil {
		sl[i][1] = len(w.B)
	}
}

// newResumeAnswer returns the answer of a state, to be made by whoever
// calls encode; readers wait on done until then.
func newResumeAnswer(agent string, d *doc, rec *capsule.CapsuleRecord) *ResumeAnswer {
	return &ResumeAnswer{agent: agent, d: d, c: rec, done: make(chan struct{})}
}

// encode encodes the residency's part of the resume of the state.
func (a *ResumeAnswer) encode(sizeHint int) {
	r := a.Resume()
	a.encodeFrom(&r, sizeHint)
}

// encodeFrom encodes r, recording its slots, and closes done.
func (a *ResumeAnswer) encodeFrom(r *capsule.Resume, sizeHint int) {
	defer close(a.done)
	w := jsonappend.Writer{B: make([]byte, 0, sizeHint+512)}
	writeResume(&w, r, true, &a.slots)
	w.EndObject()
	w.B = append(w.B, '\n')
	a.raw, a.err = w.B, w.Err()
}

// Resume is the residency's part of the resume document of the state the
// answer encodes, as Store.Resume gives it.
func (a *ResumeAnswer) Resume() capsule.Resume { return resumeOf(a.agent, a.d, a.c) }

// LocalParts are the values of a resume that the agent fills at read time
// from the rest of the daemon (see capsule.Resume for each).
type LocalParts struct {
	Snapshot  *capsule.SnapshotRef
	ByOthers  []capsule.ByOther
	Upstreams []capsule.UpstreamState
	Degraded  []string
	Conflicts []capsule.PathConflict
}

// Append appends to buf the whole answer, with p's values in their slots:
// exactly what EncodeResume writes for the residency's resume with p's
// values set in it.
func (a *ResumeAnswer) Append(buf []byte, p *LocalParts) ([]byte, error) {
	<-a.done
	if a.err != nil {
		return nil, a.err
	}
	w := jsonappend.Writer{B: buf}
	from := 0
	for i := range numSlots {
		w.B = append(w.B, a.raw[from:a.slots[i][0]]...)
		switch i {
		case slotSnapshot:
			writeSnapshotRef(&w, p.Snapshot)
		case slotByOthers:
			writeList(&w, p.ByOthers, writeByOther)
		case slotUpstreams:
			writeList(&w, p.Upstreams, writeUpstreamState)
		case slotDegraded:
			w.Strings(p.Degraded)
		case slotConflicts:
			writeConflicts(&w, p.Conflicts)
		}
		from = a.slots[i][1]
	}
	w.B = append(w.B, a.raw[from:]...)
	return w.B, w.Err()
}

// VisitAnswer is Visit with the answer of the state it read instead of
// the document: the one its commit made, or made now (and kept for the
// next reader of the same state).
func (s *Store) VisitAnswer() (*ResumeAnswer, Visit) {
	s.mu.RLock()
	d, rec := s.cur, s.capsule
	s.mu.RUnlock()
	v := Visit{mark: markVisit(d), at: time.Now()}
	s.answerRead.Store(true)
	old := s.answer.Load()
	if old != nil && old.d == d && old.c == rec {
		return old, v
	}
	a := newResumeAnswer(s.agent, d, rec)
	a.encode(int(s.stateLen.Load()))
	if a.err == nil {
		s.answer.CompareAndSwap(old, a) // a commit may have published since: then its answer stays
	}
	return a, v
}
