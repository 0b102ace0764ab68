package residency

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/daemonside/jsonappend/jsonappendtest"
)

// TestEncodersMatchEncodingJSON holds the hand-written encoders to
// encoding/json, byte for byte, on values whose every field is filled at
// random (a field added to a type and not to its encoder fails here).
func TestEncodersMatchEncodingJSON(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (shown on failure: rand.NewPCG(23, seed) fills the same values)", seed)
	rng := rand.New(rand.NewPCG(23, seed))
	for i := range rounds {
		var d doc
		jsonappendtest.Fill(&d, rng)
		want, wantErr := json.Marshal(&d)
		got, err := encodeDoc(&d, nil)
		if !sameEncoding(got, err, want, wantErr) {
			t.Fatalf("round %d, the state document:\nencodeDoc    %s (%v)\njson.Marshal %s (%v)", i, got, err, want, wantErr)
		}

		var st savedState
		jsonappendtest.Fill(&st, rng)
		want, wantErr = stdEncodeNoEscape(&st)
		got, err = encodeSavedState(&st, nil)
		if !sameEncoding(got, err, want, wantErr) {
			t.Fatalf("round %d, the saved state:\nencodeSavedState %s (%v)\nencoding/json    %s (%v)", i, got, err, want, wantErr)
		}

		var r capsule.Resume
		jsonappendtest.Fill(&r, rng)
		want, wantErr = stdEncodeNoEscape(&r)
		got, err = EncodeResume(&r, nil)
		if !sameEncoding(got, err, append(want, '\n'), wantErr) {
			t.Fatalf("round %d, the resume:\nEncodeResume  %s (%v)\nencoding/json %s (%v)", i, got, err, want, wantErr)
		}

		var w capsule.Write
		jsonappendtest.Fill(&w, rng)
		if rng.IntN(2) == 0 { // the common record: a checkpoint and nothing else
			w.Capsule, w.Work, w.CoveredFrom, w.SessionID, w.Reason = nil, nil, 0, "", ""
		}
		var cpJSON []byte
		if w.Checkpoint != nil {
			want, wantErr := json.Marshal(w.Checkpoint)
			if cpJSON, err = encodeCheckpoint(w.Checkpoint); !sameEncoding(cpJSON, err, want, wantErr) {
				t.Fatalf("round %d, the checkpoint:\nencodeCheckpoint %s (%v)\njson.Marshal     %s (%v)", i, cpJSON, err, want, wantErr)
			}
		}
		want, wantErr = json.Marshal(&w)
		got, ok, err := encodeWriteRecord(&w, cpJSON)
		if ok && !sameEncoding(got, err, want, wantErr) {
			t.Fatalf("round %d, the write record:\nencodeWriteRecord %s (%v)\njson.Marshal      %s (%v)", i, got, err, want, wantErr)
		}
	}
}

// TestEncodersOnAStoredState checks the encoders on a state the store made
// itself, and that a time RFC 3339 cannot write fails as encoding/json
// fails.
func TestEncodersOnAStoredState(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	focus, next := "ship <the> parser & fix", "run the fuzzers"
	if _, err := s.Checkpoint(t.Context(), &capsule.Checkpoint{Focus: &focus, WorkingState: &capsule.WorkingState{NextAction: &next},
		Decide: &capsule.Decision{Chosen: "retry with backoff", Because: "the upstream drops bursts over sixty a minute"}}, capsule.OriginExplicit); err != nil {
		t.Fatal(err)
	}
	d := s.cur
	want, _ := json.Marshal(d)
	got, err := encodeDoc(d, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encodeDoc:\n%s (%v)\nwant\n%s", got, err, want)
	}
	raw, err := s.StateJSON()
	if err != nil || !bytes.Contains(raw, []byte(`"focus":"ship <the> parser & fix"`)) {
		t.Fatalf("the state answered is not unescaped JSON of the focus: %s (%v)", raw, err)
	}

	bad := *d
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	bad.LastWriteAt = &far
	_, wantErr := json.Marshal(&bad)
	if _, err := encodeDoc(&bad, nil); err == nil || wantErr == nil {
		t.Fatalf("a year past 9999: encodeDoc error %v, json.Marshal error %v; want both to fail", err, wantErr)
	}
}

// sameEncoding reports whether two encodings agree: the same bytes, or
// both failed.
func sameEncoding(got []byte, err error, want []byte, wantErr error) bool {
	if err != nil || wantErr != nil {
		return err != nil && wantErr != nil
	}
	return bytes.Equal(got, want)
}

func stdEncodeNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// TestResumeAnswerMatchesEncodeResume: the answer kept ready, with the
// agent's values put in its slots, is byte for byte the encoding of the
// whole resume with those values set, whatever the state and the values.
func TestResumeAnswerMatchesEncodeResume(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(29, seed))
	for i := range rounds {
		var r capsule.Resume
		jsonappendtest.Fill(&r, rng)
		a := newResumeAnswer("", nil, nil)
		a.encodeFrom(&r, 0)
		var p LocalParts
		jsonappendtest.Fill(&p, rng)
		r.Snapshot, r.SinceLastVisit.ByOthers, r.Upstreams, r.Degraded, r.Conflicts = p.Snapshot, p.ByOthers, p.Upstreams, p.Degraded, p.Conflicts
		want, wantErr := EncodeResume(&r, nil)
		got, err := a.Append(nil, &p)
		if !sameEncoding(got, err, want, wantErr) {
			t.Fatalf("round %d:\nAppend       %s (%v)\nEncodeResume %s (%v)", i, got, err, want, wantErr)
		}
	}
}
