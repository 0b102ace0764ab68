package guard

import (
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// placement is one free-text field a guard checks, with a body that puts a
// value there and is otherwise valid. The control-character test and the
// secret corpus test run every value through every placement, so a field
// a decoder forgets to check shows up as a failure naming it.
type placement struct {
	field string // the path a refusal must name
	kind  string // "checkpoint", "capsule" or "signal"
	code  string // the field's own code (length, control characters)
	limit int    // characters; 0: no limit of its own
	// noSpace: the field takes no white space (a route template), so
	// values with white space are not run there.
	noSpace bool
	public  bool // the public status: credentials are INVALID_PUBLIC_STATUS
	// pre and post wrap the value where the field needs more than it
	// (decide.because needs 24 characters, a drop reason 8).
	pre, post string
	body      func(v string) string
}

// value is what a placement stores for v.
func (p placement) value(v string) string { return p.pre + v + p.post }

// fits reports whether v, wrapped, is within the placement's length limit.
func (p placement) fits(v string) bool {
	return p.limit <= 0 || runeLen(p.value(v)) <= p.limit
}

// placements lists every free-text field of a checkpoint, a public
// status, a capsule and a signal. Enumerated and structured fields (phase,
// until, experiment, kind, event, version) are left out: they admit no
// free text, so their own rules refuse anything else first.
func placements() []placement {
	const because = "the old client is not idempotent under retries"
	var ps []placement
	cp := func(field, code string, limit int, pre, post string, body func(string) string) {
		ps = append(ps, placement{field: field, kind: "checkpoint", code: code, limit: limit, pre: pre, post: post,
			body: func(v string) string { return body(pre + v + post) }})
	}
	cp("focus", capsule.CodeInvalidFocus, MaxFocus, "", "", func(v string) string { return `{"focus":` + js(v) + `}` })
	for _, f := range []string{"next_action", "last_result", "result_ref", "waiting_for"} {
		limit := MaxWorkingStateField
		if f == "result_ref" {
			limit = MaxResultRef
		}
		cp("working_state."+f, capsule.CodeInvalidWorkingState, limit, "", "", func(v string) string {
			return `{"working_state":{"` + f + `":` + js(v) + `}}`
		})
	}
	cp("decide.chosen", capsule.CodeInvalidDecision, MaxDecisionField, "", "", func(v string) string {
		return `{"decide":{"chosen":` + js(v) + `,"because":` + js(because) + `}}`
	})
	cp("decide.because", capsule.CodeInvalidDecision, MaxDecisionField, "we chose it because ", "", func(v string) string {
		return `{"decide":{"chosen":"the new client","because":` + js(v) + `}}`
	})
	cp("decide.passed_over", capsule.CodeInvalidDecision, MaxDecisionField, "", "", func(v string) string {
		return `{"decide":{"chosen":"the new client","because":` + js(because) + `,"passed_over":` + js(v) + `}}`
	})
	cp("commitments.open[0].title", capsule.CodeInvalidCommitment, MaxCommitmentTitle, "", "", func(v string) string {
		return `{"commitments":{"open":[{"title":` + js(v) + `}]}}`
	})
	cp("commitments.close[0].id", capsule.CodeInvalidCommitment, MaxCommitmentID, "", "", func(v string) string {
		return `{"commitments":{"close":[{"id":` + js(v) + `,"evidence":"post:` + goodUUID + `"}]}}`
	})
	cp("commitments.drop[0].id", capsule.CodeInvalidCommitment, MaxCommitmentID, "", "", func(v string) string {
		return `{"commitments":{"drop":[{"id":` + js(v) + `,"reason":"superseded by the new plan"}]}}`
	})
	cp("commitments.drop[0].reason", capsule.CodeInvalidCommitment, MaxDropReason, "dropped: ", "", func(v string) string {
		return `{"commitments":{"drop":[{"id":"c_1","reason":` + js(v) + `}]}}`
	})
	cp("stop.reason", capsule.CodeInvalidStop, MaxStopReason, "", "", func(v string) string {
		return `{"stop":{"reason":` + js(v) + `}}`
	})

	for _, f := range []struct {
		name  string
		limit int
	}{{"next_action", MaxStatusNextAction}, {"reason", MaxStatusReason}, {"tool", MaxStatusTool}, {"route", MaxStatusRoute}} {
		p := placement{field: "public_status." + f.name, kind: "checkpoint", code: capsule.CodeInvalidPublicStatus,
			limit: f.limit, public: true}
		if f.name == "route" {
			p.pre, p.noSpace = "/r/", true
		}
		pre := p.pre
		p.body = func(v string) string {
			v = pre + v
			if f.name == "next_action" {
				return `{"public_status":{"phase":"acting","next_action":` + js(v) + `}}`
			}
			return `{"public_status":{"phase":"acting","next_action":"fixing the parser","` + f.name + `":` + js(v) + `}}`
		}
		ps = append(ps, p)
	}

	for _, f := range []struct {
		name  string
		limit int
	}{
		{"goal", capsule.CapsuleFieldMax}, {"done", capsule.CapsuleFieldMax}, {"next", capsule.CapsuleFieldMax},
		{"blockers", capsule.CapsuleFieldMax}, {"do_not", capsule.CapsuleFieldMax}, {"refuted", capsule.CapsuleFieldMax},
		{"receipts[0]", capsule.CapsuleReceiptMax}, {"written_by", capsule.CapsuleNameMax}, {"written_at", 0},
		{"ttl_days", 0}, {"handoff_to", capsule.CapsuleNameMax},
	} {
		ps = append(ps, placement{field: f.name, kind: "capsule", code: capsule.CodeInvalidCapsule, limit: f.limit,
			body: func(v string) string {
				if f.name == "receipts[0]" {
					return `{"version":"1","receipts":[` + js(v) + `]}`
				}
				return `{"version":"1","` + f.name + `":` + js(v) + `}`
			}})
	}

	for _, f := range []string{"reason", "source", "session_id", "transcript_path", "via"} {
		ps = append(ps, placement{field: f, kind: "signal", code: capsule.CodeInvalidSignal, limit: MaxSignalString,
			body: func(v string) string { return `{"kind":"activity","event":"tool","` + f + `":` + js(v) + `}` }})
	}
	return ps
}

// decode runs the guard that serves placement p on body.
func (p placement) decode(g *Guard, body string) error {
	switch p.kind {
	case "checkpoint":
		_, err := g.DecodeCheckpoint([]byte(body))
		return err
	case "capsule":
		_, err := g.DecodeCapsule([]byte(body))
		return err
	case "signal":
		_, err := g.DecodeSignal([]byte(body))
		return err
	}
	panic("unknown placement kind " + p.kind)
}

// TestPlacementsAcceptPlainText: every placement's body is valid with an
// ordinary value, so a refusal in the tests that use them is the value's.
func TestPlacementsAcceptPlainText(t *testing.T) {
	g := testGuard(t)
	ps := placements()
	if len(ps) < 30 {
		t.Fatalf("only %d placements", len(ps))
	}
	for _, p := range ps {
		v := "swap the callsites in checkout"
		if p.noSpace {
			v = strings.ReplaceAll(v, " ", "-")
		}
		if err := p.decode(g, p.body(v)); err != nil {
			t.Errorf("%s: %v", p.field, err)
		}
	}
}
