package guard

import (
	"reflect"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

func TestDecodeSignal(t *testing.T) {
	const code = capsule.CodeInvalidSignal
	cases := []bodyCase{
		{"context", `{"kind":"context","used_fraction":0.83}`, "", ""},
		{"context zero", `{"kind":"context","used_fraction":0}`, "", ""},
		{"context one", `{"kind":"context","used_fraction":1}`, "", ""},
		{"context exponent", `{"kind":"context","used_fraction":5e-1}`, "", ""},
		{"context just over one", `{"kind":"context","used_fraction":1.0000001}`, code, "used_fraction"},
		{"context just under zero", `{"kind":"context","used_fraction":-0.0000001}`, code, "used_fraction"},
		{"context huge", `{"kind":"context","used_fraction":1e400}`, code, "used_fraction"},
		{"context without fraction", `{"kind":"context","tokens":1000}`, code, "used_fraction"},
		{"context fraction string", `{"kind":"context","used_fraction":"83%"}`, code, "used_fraction"},
		{"context fraction null", `{"kind":"context","used_fraction":null}`, code, "used_fraction"},
		{"context with numbers", `{"kind":"context","used_fraction":0.41,"tokens":82000,"window":200000,"session_id":"` + goodUUID + `","via":"statusline"}`, "", ""},
		{"tokens zero", `{"kind":"context","used_fraction":0.1,"tokens":0}`, "", ""},
		{"tokens negative", `{"kind":"context","used_fraction":0.1,"tokens":-1}`, code, "tokens"},
		{"window negative", `{"kind":"context","used_fraction":0.1,"window":-200000}`, code, "window"},
		{"tokens fraction", `{"kind":"context","used_fraction":0.1,"tokens":1.5}`, code, "tokens"},
		{"tokens exponent", `{"kind":"context","used_fraction":0.1,"tokens":1e3}`, code, "tokens"},
		{"tokens overflow", `{"kind":"context","used_fraction":0.1,"tokens":9223372036854775808}`, code, "tokens"},
		{"tokens max", `{"kind":"context","used_fraction":0.1,"tokens":9223372036854775807}`, "", ""},
		{"compaction pre", `{"kind":"compaction","phase":"pre","trigger":"auto"}`, "", ""},
		{"compaction post manual", `{"kind":"compaction","phase":"post","trigger":"manual"}`, "", ""},
		{"compaction no trigger", `{"kind":"compaction","phase":"pre"}`, "", ""},
		{"compaction no phase", `{"kind":"compaction","trigger":"auto"}`, code, "phase"},
		{"compaction bad phase", `{"kind":"compaction","phase":"during"}`, code, "phase"},
		{"compaction bad trigger", `{"kind":"compaction","phase":"pre","trigger":"cron"}`, code, "trigger"},
		{"compaction with event", `{"kind":"compaction","phase":"pre","event":"start"}`, code, "event"},
		{"session start", `{"kind":"session","event":"start","source":"resume","session_id":"abc"}`, "", ""},
		{"session end", `{"kind":"session","event":"end","reason":"prompt_input_exit"}`, "", ""},
		{"session stop", `{"kind":"session","event":"stop"}`, "", ""},
		{"session no event", `{"kind":"session"}`, code, "event"},
		{"session bad event", `{"kind":"session","event":"prompt"}`, code, "event"},
		{"session with phase", `{"kind":"session","event":"start","phase":"pre"}`, code, "phase"},
		{"activity", `{"kind":"activity"}`, "", ""},
		{"activity prompt", `{"kind":"activity","event":"prompt"}`, "", ""},
		{"activity tool", `{"kind":"activity","event":"tool"}`, "", ""},
		{"activity file", `{"kind":"activity","event":"file"}`, "", ""},
		{"activity bad event", `{"kind":"activity","event":"start"}`, code, "event"},
		{"activity with trigger", `{"kind":"activity","trigger":"auto"}`, code, "trigger"},
		{"context with event", `{"kind":"context","used_fraction":0.5,"event":"tool"}`, code, "event"},
		{"kind missing", `{"used_fraction":0.5}`, code, "kind"},
		{"kind empty", `{"kind":""}`, code, "kind"},
		{"kind unknown", `{"kind":"heartbeat"}`, code, "kind"},
		{"kind case", `{"kind":"Context","used_fraction":0.5}`, code, "kind"},
		{"kind wrong type", `{"kind":1}`, code, "kind"},
		{"unknown field", `{"kind":"activity","mood":"ok"}`, code, "mood"},
		{"unknown field named", `{"kind":"activity","Event":"tool"}`, code, "Event"},
		{"depth 32", `{"kind":"activity","at":` + rep("[", MaxJSONDepth-1) + rep("]", MaxJSONDepth-1) + `}`, "", ""},
		{"depth 33", `{"kind":"activity","at":` + rep("[", MaxJSONDepth) + rep("]", MaxJSONDepth) + `}`, capsule.CodeInvalidJSON, ""},
		{"body at the limit", `{"kind":"activity","at":"` + rep("a", MaxBodyBytes-len(`{"kind":"activity","at":""}`)) + `"}`, "", ""},
		{"body over the limit", `{"kind":"activity","at":"` + rep("a", MaxBodyBytes-len(`{"kind":"activity","at":""}`)+1) + `"}`, capsule.CodeBodyTooLarge, ""},
		{"at is ignored", `{"kind":"activity","at":"2020-01-01T00:00:00Z"}`, "", ""},
		{"at of any type is ignored", `{"kind":"activity","at":{"x":[1,2]}}`, "", ""},
		{"string 1023", `{"kind":"activity","via":` + js(rep("é", MaxSignalString-1)) + `}`, "", ""},
		{"string 1024", `{"kind":"activity","transcript_path":` + js(rep("日", MaxSignalString)) + `}`, "", ""},
		{"string 1025", `{"kind":"activity","transcript_path":` + js(rep("日", MaxSignalString+1)) + `}`, code, "transcript_path"},
		{"reason 1025", `{"kind":"session","event":"end","reason":` + js(rep("a", MaxSignalString+1)) + `}`, code, "reason"},
		{"control character", `{"kind":"session","event":"end","source":"x\u0000"}`, code, "source"},
		{"string wrong type", `{"kind":"session","event":"end","session_id":42}`, code, "session_id"},
		{"secret", `{"kind":"session","event":"end","reason":` + js("exported OPENAI key sk-"+fake(600, alnum, 48)) + `}`, capsule.CodeSecretDetected, "reason"},
		{"not an object", `["context"]`, capsule.CodeInvalidJSON, ""},
		{"duplicate key", `{"kind":"context","kind":"session"}`, capsule.CodeInvalidJSON, "kind"},
		{"invalid utf8", "{\"kind\":\"activity\",\"via\":\"\xc0\"}", capsule.CodeInvalidUTF8, ""},
		{"transcript path", `{"kind":"activity","transcript_path":"/home/user/.claude/projects/-home-user-proj/` + goodUUID + `.jsonl"}`, "", ""},
	}
	g := testGuard(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := g.DecodeSignal([]byte(tc.body))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !s.At.IsZero() {
					t.Fatalf("at was not ignored: %v", s.At)
				}
				return
			}
			wantRefusal(t, err, tc.code, tc.field)
			checkGuardError(t, err)
		})
	}
}

func TestDecodeSignalResult(t *testing.T) {
	g := testGuard(t)
	s, err := g.DecodeSignal([]byte(`{"kind":"context","used_fraction":0.41,"tokens":82000,"window":200000,"session_id":"s1","transcript_path":"/t.jsonl","via":"statusline","at":"2031-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	f, tok, win := 0.41, int64(82000), int64(200000)
	want := &capsule.Signal{Kind: capsule.SignalContext, UsedFraction: &f, Tokens: &tok, Window: &win, SessionID: "s1", TranscriptPath: "/t.jsonl", Via: "statusline", At: time.Time{}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %s, want %s", js(s), js(want))
	}
}
