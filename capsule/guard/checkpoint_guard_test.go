package guard

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// js JSON-encodes v, for building bodies.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// rep repeats s to n characters (s is one character).
func rep(s string, n int) string { return strings.Repeat(s, n) }

// bodyCase is one body for a decoder: code "" means accepted.
type bodyCase struct {
	name  string
	body  string
	code  string
	field string
}

const goodUUID = "6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7b"

func runCheckpointCases(t *testing.T, cases []bodyCase) {
	t.Helper()
	g := testGuard(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := g.DecodeCheckpoint([]byte(tc.body))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cp == nil {
					t.Fatal("nil checkpoint without an error")
				}
				return
			}
			if cp != nil {
				t.Fatalf("returned a checkpoint with an error")
			}
			e := wantRefusal(t, err, tc.code, tc.field)
			checkGuardError(t, err)
			_ = e
		})
	}
}

func TestDecodeCheckpointBody(t *testing.T) {
	deep := rep(`{"a":`, 40) + "1" + rep("}", 40)
	runCheckpointCases(t, []bodyCase{
		{"invalid utf8", "{\"focus\":\"\xff\"}", capsule.CodeInvalidUTF8, ""},
		{"invalid utf8 outside strings", "{\"focus\":\"ok\"}\xc3", capsule.CodeInvalidUTF8, ""},
		{"lone high surrogate", `{"focus":"\ud800"}`, capsule.CodeInvalidUTF8, ""},
		{"lone low surrogate", `{"focus":"x\udc00y"}`, capsule.CodeInvalidUTF8, ""},
		{"high surrogate then text", `{"focus":"\ud83dx"}`, capsule.CodeInvalidUTF8, ""},
		{"surrogate pair", `{"focus":"\ud83d\ude00 ok"}`, "", ""},
		{"escaped backslash then u", `{"focus":"\\ud800"}`, "", ""},
		{"empty body", "", capsule.CodeInvalidJSON, ""},
		{"blank body", "  \n", capsule.CodeInvalidJSON, ""},
		{"null", "null", capsule.CodeInvalidJSON, ""},
		{"array", `[{"focus":"x"}]`, capsule.CodeInvalidJSON, ""},
		{"string", `"focus"`, capsule.CodeInvalidJSON, ""},
		{"number", `3`, capsule.CodeInvalidJSON, ""},
		{"truncated", `{"focus":"a"`, capsule.CodeInvalidJSON, ""},
		{"trailing comma", `{"focus":"a",}`, capsule.CodeInvalidJSON, ""},
		{"trailing object", `{"focus":"a"} {}`, capsule.CodeInvalidJSON, ""},
		{"trailing garbage", `{"focus":"a"}x`, capsule.CodeInvalidJSON, ""},
		{"trailing whitespace is fine", "{\"focus\":\"a\"}\n\t ", "", ""},
		{"single quotes", `{'focus':'a'}`, capsule.CodeInvalidJSON, ""},
		{"duplicate key", `{"focus":"a","focus":"b"}`, capsule.CodeInvalidJSON, "focus"},
		{"nested duplicate key", `{"working_state":{"next_action":"a","next_action":"b"}}`, capsule.CodeInvalidJSON, "working_state.next_action"},
		{"duplicate key in an array element", `{"commitments":{"open":[{"title":"abc"},{"title":"abc","title":"def"}]}}`, capsule.CodeInvalidJSON, "commitments.open[1].title"},
		{"too deep", `{"x":` + deep + `}`, capsule.CodeInvalidJSON, ""},
		{"unknown field", `{"focus":"a","mood":"fine"}`, capsule.CodeUnknownField, "mood"},
		{"field names are case-sensitive", `{"Focus":"a"}`, capsule.CodeUnknownField, "Focus"},
		{"unknown field before a bad one", `{"mood":1,"focus":3}`, capsule.CodeUnknownField, "mood"},
		{"focus wrong type", `{"focus":3}`, capsule.CodeInvalidField, "focus"},
		{"focus null", `{"focus":null}`, capsule.CodeInvalidField, "focus"},
		{"focus object", `{"focus":{"text":"a"}}`, capsule.CodeInvalidField, "focus"},
		{"resume_residency wrong type", `{"resume_residency":"yes"}`, capsule.CodeInvalidField, "resume_residency"},
		{"resume_residency alone", `{"resume_residency":true}`, "", ""},
		{"empty object", `{}`, capsule.CodeEmptyCheckpoint, ""},
		{"empty working_state", `{"working_state":{}}`, capsule.CodeEmptyCheckpoint, ""},
		{"empty commitments", `{"commitments":{}}`, capsule.CodeEmptyCheckpoint, ""},
		{"empty commitment lists", `{"commitments":{"open":[],"close":[],"drop":[]}}`, capsule.CodeEmptyCheckpoint, ""},
		{"resume_residency false", `{"resume_residency":false}`, capsule.CodeEmptyCheckpoint, ""},
		{"empty focus is a value", `{"focus":""}`, "", ""},
	})
}

func TestDecodeCheckpointBodyTooLarge(t *testing.T) {
	g := testGuard(t)
	pad := MaxBodyBytes - len(`{"focus":""}`)
	at := `{"focus":"` + rep("a", pad) + `"}`
	if len(at) != MaxBodyBytes {
		t.Fatalf("len %d", len(at))
	}
	// At the limit the body is read; the focus is then too long.
	_, err := g.DecodeCheckpoint([]byte(at))
	wantRefusal(t, err, capsule.CodeInvalidFocus, "focus")
	_, err = g.DecodeCheckpoint([]byte(at + " "))
	e := wantRefusal(t, err, capsule.CodeBodyTooLarge, "")
	if e.Status != 413 {
		t.Fatalf("status %d", e.Status)
	}
}

func TestDecodeCheckpointUnsafeNamesAreNotEchoed(t *testing.T) {
	g := testGuard(t)
	tok := "ghp_" + fake(300, alnum, 36)
	for _, body := range []string{
		`{"` + tok + `":1}`,
		`{"working_state":{"` + tok + `":"x"}}`,
		`{"focus":"a","` + tok + `":1,"` + tok + `":2}`,
	} {
		_, err := g.DecodeCheckpoint([]byte(body))
		e := checkGuardError(t, err)
		if strings.Contains(e.Error(), tok) || strings.Contains(e.Error(), "ghp_") {
			t.Errorf("refusal echoes a credential-shaped name: %v", e)
		}
	}
}

func TestDecodeCheckpointFocus(t *testing.T) {
	runCheckpointCases(t, []bodyCase{
		{"3999 runes", `{"focus":` + js(rep("é", MaxFocus-1)) + `}`, "", ""},
		{"4000 runes (8000 bytes)", `{"focus":` + js(rep("é", MaxFocus)) + `}`, "", ""},
		{"4001 runes", `{"focus":` + js(rep("é", MaxFocus+1)) + `}`, capsule.CodeInvalidFocus, "focus"},
		{"4001 ascii", `{"focus":` + js(rep("a", MaxFocus+1)) + `}`, capsule.CodeInvalidFocus, "focus"},
		{"control character", `{"focus":"a\u0007b"}`, capsule.CodeInvalidFocus, "focus"},
		{"newline tab cr", `{"focus":"a\n\tb\r\n"}`, "", ""},
		{"secret", `{"focus":` + js("fixing "+"ghp_"+fake(301, alnum, 36)) + `}`, capsule.CodeSecretDetected, "focus"},
	})
}

func TestDecodeCheckpointWorkingState(t *testing.T) {
	ws := func(inner string) string { return `{"working_state":{` + inner + `}}` }
	runCheckpointCases(t, []bodyCase{
		{"all fields", ws(`"next_action":"a","last_result":"b","result_ref":"c","waiting_for":"d"`), "", ""},
		{"nulls clear", ws(`"result_ref":null,"waiting_for":null`), "", ""},
		{"not an object", `{"working_state":"busy"}`, capsule.CodeInvalidWorkingState, "working_state"},
		{"array", `{"working_state":[]}`, capsule.CodeInvalidWorkingState, "working_state"},
		{"null section", `{"working_state":null}`, capsule.CodeInvalidWorkingState, "working_state"},
		{"unknown field", ws(`"next_action":"a","mood":"ok"`), capsule.CodeInvalidWorkingState, "working_state.mood"},
		{"next_action number", ws(`"next_action":5`), capsule.CodeInvalidWorkingState, "working_state.next_action"},
		{"next_action null", ws(`"next_action":null`), capsule.CodeInvalidWorkingState, "working_state.next_action"},
		{"last_result bool", ws(`"last_result":true`), capsule.CodeInvalidWorkingState, "working_state.last_result"},
		{"result_ref number", ws(`"result_ref":7`), capsule.CodeInvalidWorkingState, "working_state.result_ref"},
		{"next_action 3999", ws(`"next_action":` + js(rep("日", MaxWorkingStateField-1))), "", ""},
		{"next_action 4000", ws(`"next_action":` + js(rep("日", MaxWorkingStateField))), "", ""},
		{"next_action 4001", ws(`"next_action":` + js(rep("日", MaxWorkingStateField+1))), capsule.CodeInvalidWorkingState, "working_state.next_action"},
		{"last_result 4000", ws(`"last_result":` + js(rep("é", MaxWorkingStateField))), "", ""},
		{"last_result 4001", ws(`"last_result":` + js(rep("é", MaxWorkingStateField+1))), capsule.CodeInvalidWorkingState, "working_state.last_result"},
		{"waiting_for 4000", ws(`"waiting_for":` + js(rep("a", MaxWorkingStateField))), "", ""},
		{"waiting_for 4001", ws(`"waiting_for":` + js(rep("a", MaxWorkingStateField+1))), capsule.CodeInvalidWorkingState, "working_state.waiting_for"},
		{"result_ref 499", ws(`"result_ref":` + js(rep("é", MaxResultRef-1))), "", ""},
		{"result_ref 500", ws(`"result_ref":` + js(rep("é", MaxResultRef))), "", ""},
		{"result_ref 501", ws(`"result_ref":` + js(rep("é", MaxResultRef+1))), capsule.CodeInvalidWorkingState, "working_state.result_ref"},
		{"nul byte", ws(`"last_result":"ok\u0000"`), capsule.CodeInvalidWorkingState, "working_state.last_result"},
		{"escape character", ws(`"next_action":"\u001b[31mred"`), capsule.CodeInvalidWorkingState, "working_state.next_action"},
		{"tabs and newlines", ws(`"last_result":"line 1\n\tline 2\r\n"`), "", ""},
		{"secret in last_result", ws(`"last_result":` + js("ran with password="+fake(302, alnum, 12))), capsule.CodeSecretDetected, "working_state.last_result"},
		{"secret in result_ref", ws(`"result_ref":` + js("https://hooks.slack.com/services/T"+fake(303, upperAlnum, 8)+"/B"+fake(304, upperAlnum, 8)+"/"+fake(305, alnum, 24))), capsule.CodeSecretDetected, "working_state.result_ref"},
	})
}

func TestDecodeCheckpointDecision(t *testing.T) {
	because := "the upstream drops bursts over sixty a minute"
	d := func(inner string) string { return `{"decide":{` + inner + `}}` }
	runCheckpointCases(t, []bodyCase{
		{"full", d(`"chosen":"retry with backoff","because":` + js(because) + `,"passed_over":"a bigger burst"`), "", ""},
		{"not an object", `{"decide":"retry"}`, capsule.CodeInvalidDecision, "decide"},
		{"unknown field", d(`"chosen":"a","because":` + js(because) + `,"why":"x"`), capsule.CodeInvalidDecision, "decide.why"},
		{"chosen missing", d(`"because":` + js(because)), capsule.CodeInvalidDecision, "decide.chosen"},
		{"chosen blank", d(`"chosen":"   ","because":` + js(because)), capsule.CodeInvalidDecision, "decide.chosen"},
		{"chosen wrong type", d(`"chosen":1,"because":` + js(because)), capsule.CodeInvalidDecision, "decide.chosen"},
		{"because missing", d(`"chosen":"a"`), capsule.CodeMotiveRequired, "decide.because"},
		{"because 23", d(`"chosen":"a","because":` + js(rep("é", MinBecause-1))), capsule.CodeMotiveRequired, "decide.because"},
		{"because 24", d(`"chosen":"a","because":` + js(rep("é", MinBecause))), "", ""},
		{"because 25", d(`"chosen":"a","because":` + js(rep("日", MinBecause+1))), "", ""},
		{"because 23 padded with spaces", d(`"chosen":"a","because":` + js("      "+rep("a", MinBecause-1)+"      ")), capsule.CodeMotiveRequired, "decide.because"},
		{"chosen 2000", d(`"chosen":` + js(rep("é", MaxDecisionField)) + `,"because":` + js(because)), "", ""},
		{"chosen 2001", d(`"chosen":` + js(rep("é", MaxDecisionField+1)) + `,"because":` + js(because)), capsule.CodeInvalidDecision, "decide.chosen"},
		{"because 1999", d(`"chosen":"a","because":` + js(rep("b", MaxDecisionField-1))), "", ""},
		{"because 2001", d(`"chosen":"a","because":` + js(rep("b", MaxDecisionField+1))), capsule.CodeInvalidDecision, "decide.because"},
		{"passed_over 2000", d(`"chosen":"a","because":` + js(because) + `,"passed_over":` + js(rep("日", MaxDecisionField))), "", ""},
		{"passed_over 2001", d(`"chosen":"a","because":` + js(because) + `,"passed_over":` + js(rep("日", MaxDecisionField+1))), capsule.CodeInvalidDecision, "decide.passed_over"},
		{"control character", d(`"chosen":"a\u0000","because":` + js(because)), capsule.CodeInvalidDecision, "decide.chosen"},
		{"secret", d(`"chosen":"a","because":` + js(because+" and token: "+fake(306, lowerAlnum, 24))), capsule.CodeSecretDetected, "decide.because"},
	})
}

func TestDecodeCheckpointCommitments(t *testing.T) {
	c := func(inner string) string { return `{"commitments":{` + inner + `}}` }
	opens := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"title":"commitment %d"}`, i))
		}
		return `"open":[` + strings.Join(parts, ",") + `]`
	}
	ev := "post:" + goodUUID
	runCheckpointCases(t, []bodyCase{
		{"open close drop", c(`"open":[{"title":"ship the parser fix"}],"close":[{"id":"c_1","evidence":"` + ev + `"}],"drop":[{"id":"c_2","reason":"superseded by the v2 plan"}]`), "", ""},
		{"not an object", `{"commitments":[]}`, capsule.CodeInvalidCommitment, "commitments"},
		{"unknown operation", c(`"finish":[]`), capsule.CodeInvalidCommitment, "commitments.finish"},
		{"open not an array", c(`"open":{"title":"abc"}`), capsule.CodeInvalidCommitment, "commitments.open"},
		{"open item not an object", c(`"open":["abc"]`), capsule.CodeInvalidCommitment, "commitments.open[0]"},
		{"open item unknown field", c(`"open":[{"title":"abc","done":true}]`), capsule.CodeInvalidCommitment, "commitments.open[0].done"},
		{"title wrong type", c(`"open":[{"title":3}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"11 opens", c(opens(MaxOpenCommitments - 1)), "", ""},
		{"12 opens", c(opens(MaxOpenCommitments)), "", ""},
		{"13 opens", c(opens(MaxOpenCommitments + 1)), capsule.CodeTooManyOpenLoops, "commitments.open"},
		{"title missing", c(`"open":[{}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"title 2 runes", c(`"open":[{"title":"ab"}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"title 2 runes padded", c(`"open":[{"title":"   ab   "}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"title 3 runes", c(`"open":[{"title":"abc"}]`), "", ""},
		{"title 4 runes", c(`"open":[{"title":"abcd"}]`), "", ""},
		{"title 3 multibyte runes", c(`"open":[{"title":"日本語"}]`), "", ""},
		{"title 2 multibyte runes (6 bytes)", c(`"open":[{"title":"日本"}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"title 199", c(`"open":[{"title":` + js(rep("é", MaxCommitmentTitle-1)) + `}]`), "", ""},
		{"title 200", c(`"open":[{"title":` + js(rep("é", MaxCommitmentTitle)) + `}]`), "", ""},
		{"title 201", c(`"open":[{"title":"abc"},{"title":` + js(rep("é", MaxCommitmentTitle+1)) + `}]`), capsule.CodeInvalidCommitment, "commitments.open[1].title"},
		{"title control character", c(`"open":[{"title":"abc\u0001"}]`), capsule.CodeInvalidCommitment, "commitments.open[0].title"},
		{"close without id", c(`"close":[{"evidence":"` + ev + `"}]`), capsule.CodeInvalidCommitment, "commitments.close[0].id"},
		{"close blank id", c(`"close":[{"id":" ","evidence":"` + ev + `"}]`), capsule.CodeInvalidCommitment, "commitments.close[0].id"},
		{"close without evidence", c(`"close":[{"id":"c_1"}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close null evidence", c(`"close":[{"id":"c_1","evidence":null}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close empty evidence", c(`"close":[{"id":"c_1","evidence":""}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close evidence not post", c(`"close":[{"id":"c_1","evidence":"done, trust me"}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close evidence bad uuid", c(`"close":[{"id":"c_1","evidence":"post:6f1c2b3a-4d5e-4f60-8a1b-2c3d4e5f6a7"}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close evidence padded", c(`"close":[{"id":"c_1","evidence":" ` + ev + `"}]`), capsule.CodeEvidenceRequired, "commitments.close[0].evidence"},
		{"close evidence upper-case uuid", c(`"close":[{"id":"c_1","evidence":"post:` + strings.ToUpper(goodUUID) + `"}]`), "", ""},
		{"close evidence wrong type", c(`"close":[{"id":"c_1","evidence":5}]`), capsule.CodeInvalidCommitment, "commitments.close[0].evidence"},
		{"close unknown field", c(`"close":[{"id":"c_1","evidence":"` + ev + `","note":"x"}]`), capsule.CodeInvalidCommitment, "commitments.close[0].note"},
		{"id 127", c(`"close":[{"id":` + js(rep("é", MaxCommitmentID-1)) + `,"evidence":"` + ev + `"}]`), "", ""},
		{"id 128", c(`"close":[{"id":` + js(rep("c", MaxCommitmentID)) + `,"evidence":"` + ev + `"}]`), "", ""},
		{"id 129", c(`"close":[{"id":` + js(rep("c", MaxCommitmentID+1)) + `,"evidence":"` + ev + `"}]`), capsule.CodeInvalidCommitment, "commitments.close[0].id"},
		{"drop without id", c(`"drop":[{"reason":"superseded by v2"}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].id"},
		{"drop reason 7", c(`"drop":[{"id":"c_1","reason":` + js(rep("é", MinDropReason-1)) + `}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].reason"},
		{"drop reason 9", c(`"drop":[{"id":"c_1","reason":` + js(rep("日", MinDropReason+1)) + `}]`), "", ""},
		{"drop reason 8", c(`"drop":[{"id":"c_1","reason":` + js(rep("é", MinDropReason)) + `}]`), "", ""},
		{"drop reason 7 padded", c(`"drop":[{"id":"c_1","reason":"  1234567  "}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].reason"},
		{"drop reason missing", c(`"drop":[{"id":"c_1"}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].reason"},
		{"drop reason 499", c(`"drop":[{"id":"c_1","reason":` + js(rep("é", MaxDropReason-1)) + `}]`), "", ""},
		{"drop reason 500", c(`"drop":[{"id":"c_1","reason":` + js(rep("日", MaxDropReason)) + `}]`), "", ""},
		{"drop reason 501", c(`"drop":[{"id":"c_1","reason":` + js(rep("日", MaxDropReason+1)) + `}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].reason"},
		{"same id closed twice", c(`"close":[{"id":"c_1","evidence":"` + ev + `"},{"id":"c_1","evidence":"` + ev + `"}]`), capsule.CodeInvalidCommitment, "commitments.close[1].id"},
		{"same id closed and dropped", c(`"close":[{"id":"c_1","evidence":"` + ev + `"}],"drop":[{"id":"c_1","reason":"superseded by v2"}]`), capsule.CodeInvalidCommitment, "commitments.drop[0].id"},
		{"secret in a title", c(`"open":[{"title":"abc"},{"title":"def"},{"title":` + js("rotate sk_live_"+fake(307, alnum, 24)) + `}]`), capsule.CodeSecretDetected, "commitments.open[2].title"},
		{"secret in a drop reason", c(`"drop":[{"id":"c_1","reason":` + js("leaked AKIA"+fake(308, base32, 16)) + `}]`), capsule.CodeSecretDetected, "commitments.drop[0].reason"},
	})
}

func TestDecodeCheckpointStop(t *testing.T) {
	runCheckpointCases(t, []bodyCase{
		{"stop", `{"stop":{"reason":"operator asked to stop"}}`, "", ""},
		{"not an object", `{"stop":"now"}`, capsule.CodeInvalidStop, "stop"},
		{"no reason", `{"stop":{}}`, capsule.CodeInvalidStop, "stop.reason"},
		{"blank reason", `{"stop":{"reason":"  "}}`, capsule.CodeInvalidStop, "stop.reason"},
		{"reason wrong type", `{"stop":{"reason":1}}`, capsule.CodeInvalidStop, "stop.reason"},
		{"unknown field", `{"stop":{"reason":"x","until":"never"}}`, capsule.CodeInvalidStop, "stop.until"},
		{"reason 499", `{"stop":{"reason":` + js(rep("é", MaxStopReason-1)) + `}}`, "", ""},
		{"reason 500", `{"stop":{"reason":` + js(rep("é", MaxStopReason)) + `}}`, "", ""},
		{"reason 501", `{"stop":{"reason":` + js(rep("é", MaxStopReason+1)) + `}}`, capsule.CodeInvalidStop, "stop.reason"},
		{"reason control character", `{"stop":{"reason":"x\u0002"}}`, capsule.CodeInvalidStop, "stop.reason"},
		{"other fields are ignored, even invalid", `{"focus":3,"public_status":{"phase":"dancing"},"decide":{"chosen":""},"stop":{"reason":"done"}}`, "", ""},
		{"unknown top-level field still refused", `{"stop":{"reason":"done"},"mood":"x"}`, capsule.CodeUnknownField, "mood"},
		{"secret anywhere is still refused", `{"working_state":{"last_result":` + js("ghp_"+fake(309, alnum, 36)) + `},"stop":{"reason":"done"}}`, capsule.CodeSecretDetected, "working_state.last_result"},
		{"secret in an ignored nested array", `{"commitments":{"open":[{"title":"abc"},{"title":` + js("xoxb-"+fake(310, digits, 12)+"-"+fake(311, digits, 12)+"-"+fake(312, alnum, 24)) + `}]},"stop":{"reason":"done"}}`, capsule.CodeSecretDetected, "commitments.open[1].title"},
		{"secret in the reason", `{"stop":{"reason":` + js("leaked dop_v1_"+fake(313, hexLower, 64)) + `}}`, capsule.CodeSecretDetected, "stop.reason"},
		{"resume_residency wrong type", `{"stop":{"reason":"done"},"resume_residency":1}`, capsule.CodeInvalidField, "resume_residency"},
	})
	g := testGuard(t)
	cp, err := g.DecodeCheckpoint([]byte(`{"focus":"x","working_state":{"next_action":"y"},"stop":{"reason":"done"},"resume_residency":true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &capsule.Checkpoint{Stop: &capsule.Stop{Reason: "done"}, ResumeResidency: true}
	if !reflect.DeepEqual(cp, want) {
		t.Fatalf("got %+v, want only stop and resume_residency", cp)
	}
}

func TestDecodeCheckpointResult(t *testing.T) {
	g := testGuard(t)
	body := `{"focus":"parser fix","working_state":{"next_action":"run tests","result_ref":null},
	 "decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute","passed_over":"a bigger burst"},
	 "public_status":{"phase":"acting","next_action":"fixing the parser","until":1754650000000,"route":"/office/{agent}"},
	 "commitments":{"open":[{"title":"ship the parser fix"}],"close":[{"id":"c_1","evidence":"post:` + goodUUID + `"}],"drop":[{"id":"c_2","reason":"superseded by the v2 plan"}]},
	 "resume_residency":true}`
	cp, err := g.DecodeCheckpoint([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	focus, next := "parser fix", "run tests"
	want := &capsule.Checkpoint{
		Focus:        &focus,
		WorkingState: &capsule.WorkingState{NextAction: &next, ResultRef: capsule.NullableString{Set: true}},
		Decide:       &capsule.Decision{Chosen: "retry with backoff", Because: "the upstream drops bursts over sixty a minute", PassedOver: "a bigger burst"},
		PublicStatus: &capsule.PublicStatus{Phase: "acting", NextAction: "fixing the parser", Until: json.RawMessage("1754650000000"), Route: "/office/{agent}"},
		Commitments: &capsule.CommitmentOps{
			Open:  []capsule.OpenCommitment{{Title: "ship the parser fix"}},
			Close: []capsule.CloseCommitment{{ID: "c_1", Evidence: "post:" + goodUUID}},
			Drop:  []capsule.DropCommitment{{ID: "c_2", Reason: "superseded by the v2 plan"}},
		},
		ResumeResidency: true,
	}
	if !reflect.DeepEqual(cp, want) {
		t.Fatalf("got  %s\nwant %s", js(cp), js(want))
	}
	// The interface document's own example body.
	doc := `{"decide": {"chosen": "retry with backoff", "because": "the upstream drops bursts over sixty a minute", "passed_over": "a bigger burst"},
 "commitments": {"open":  [{"title": "ship the parser fix"}],
                 "close": [{"id": "c_01", "evidence": "post:` + goodUUID + `"}],
                 "drop":  [{"id": "c_02", "reason": "superseded by the v2 plan"}]}}`
	if _, err := g.DecodeCheckpoint([]byte(doc)); err != nil {
		t.Fatal(err)
	}
}

func TestRefusalsNeverEchoValues(t *testing.T) {
	g := testGuard(t)
	secret := "ghp_" + fake(320, alnum, 36)
	bodies := []string{
		`{"focus":` + js(secret) + `}`,
		`{"public_status":{"phase":"acting","next_action":` + js("see "+secret) + `}}`,
		`{"public_status":{"phase":"acting","next_action":"mail me at agent.smith@example.org"}}`,
		`{"public_status":{"phase":"acting","next_action":"see https://evil.example.net/` + secret + `"}}`,
		`{"decide":{"chosen":` + js(secret) + `,"because":"short"}}`,
		`{"commitments":{"close":[{"id":"c_1","evidence":` + js(secret) + `}]}}`,
		`{"working_state":{"result_ref":` + js(rep("x", 490)+secret) + `}}`,
	}
	for _, b := range bodies {
		_, err := g.DecodeCheckpoint([]byte(b))
		e := checkGuardError(t, err)
		for _, leak := range []string{secret, "agent.smith", "evil.example", "example.org"} {
			if strings.Contains(e.Error(), leak) {
				t.Errorf("refusal %v echoes %q", e, leak)
			}
		}
	}
}

// BenchmarkDecodeCheckpoint: the strict decode and every guard, secret
// guard included, for the body the socket benchmarks send
// (docs/PERFORMANCE.md).
func BenchmarkDecodeCheckpoint(b *testing.B) {
	g := testGuard(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.DecodeCheckpoint(benchLikeBody); err != nil {
			b.Fatal(err)
		}
	}
}
