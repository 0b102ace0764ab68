package guard

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// jsonScanCases are bodies at the edges the fast paths must hand to the
// slow walks, and ordinary ones they must take themselves.
func jsonScanCases() []string {
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	deepArr := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}" }
	many := func(n int, dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			k := i
			if dup && i == n-1 {
				k = 0
			}
			b.WriteString(`"k` + strings.Repeat("x", k%7) + string(rune('a'+k%26)) + string(rune('a'+k/26%26)) + `":1`)
		}
		b.WriteString("}")
		return b.String()
	}
	return []string{
		string(benchLikeBody),
		`"plain"`, `""`, `"a\"b"`, `"tab\there"`, "\"raw\ttab\"", "\"\xff\"", `"unicode é"`, `"x`, `x"`, `"`, `"a"b"`,
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a\"b":1,"a\"b":2}`,
		`{"a":{"b":1,"b":2}}`, `{"a":[{"b":1},{"b":2}]}`, `{"a":[{"b":1,"b":1}]}`,
		`{"a":"}\"{","b":"[\\"}`, `{"a":"x","b":{"a":"x"}}`, `{"a" : [ 1 , 2 , { "c" : null } ] , "d":true}`,
		`[]`, `"x"`, `1`, `null`, `{"a":1}x`, `{"a":1}{}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a":1`, ``, ` `,
		`{"a":"\ud800"}`, "{\"a\":\"\xff\"}", "{\"\xff\":1,\"\xfe\":2}", "{\"\x98\":0}", `{"a":1e999}`, `{"a":-0.5E+3}`,
		deep(MaxJSONDepth - 1), deep(MaxJSONDepth), deep(MaxJSONDepth + 1),
		deepArr(MaxJSONDepth - 1), deepArr(MaxJSONDepth), deepArr(MaxJSONDepth + 1),
		many(quickKeys-1, false), many(quickKeys, false), many(quickKeys+1, false), many(quickKeys+5, true), many(10, true),
	}
}

var benchLikeBody = []byte(`{"focus":"ship the parser fix","working_state":{"next_action":"run the fuzzers","last_result":"tests green on linux"},"decide":{"chosen":"retry with backoff","because":"the upstream drops bursts over sixty a minute"}}`)

// checkFastPaths fails when a fast path says something its slow walk would
// not.
func checkFastPaths(t *testing.T, body []byte) {
	t.Helper()
	if quickCheckJSON(body) {
		if err := checkJSON(body); err != nil {
			t.Fatalf("quickCheckJSON accepted what checkJSON refuses (%v): %q", err, body)
		}
	}
	if s, ok := plainJSONString(body); ok {
		var want string
		if err := json.Unmarshal(body, &want); err != nil || s != want {
			t.Fatalf("plainJSONString(%q) = %q, encoding/json: %q (%v)", body, s, want, err)
		}
	}
	if !json.Valid(body) {
		return // readMembers is only ever given checked JSON
	}
	ms, ok, slow := readMembersQuick(body)
	if slow {
		return
	}
	wms, wok := readMembersSlow(body)
	if ok != wok || len(ms) != len(wms) {
		t.Fatalf("readMembersQuick %v %d members, slow %v %d: %q", ok, len(ms), wok, len(wms), body)
	}
	for i := range ms {
		if ms[i].name != wms[i].name || string(ms[i].value) != string(wms[i].value) {
			t.Fatalf("member %d: quick %q=%s, slow %q=%s", i, ms[i].name, ms[i].value, wms[i].name, wms[i].value)
		}
	}
}

func TestJSONFastPathsAgreeWithSlowWalks(t *testing.T) {
	for _, c := range jsonScanCases() {
		checkFastPaths(t, []byte(c))
	}
	// Mutations of valid bodies: JSON's own punctuation and escapes
	// inserted, replaced and deleted at random.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]:,"\ u0a1-.e` + "\t\n")
	for _, c := range jsonScanCases() {
		for n := 0; n < 300; n++ {
			b := []byte(c)
			for m := 0; m < 1+r.IntN(3) && len(b) > 0; m++ {
				p := r.IntN(len(b))
				switch r.IntN(3) {
				case 0:
					b[p] = alphabet[r.IntN(len(alphabet))]
				case 1:
					b = append(b[:p], b[p+1:]...)
				default:
					b = append(b[:p], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[p:]...)...)
				}
			}
			checkFastPaths(t, b)
		}
	}
}

// The fast paths must actually carry ordinary bodies, or they only cost.
func TestJSONFastPathsTakeOrdinaryBodies(t *testing.T) {
	if !quickCheckJSON(benchLikeBody) {
		t.Fatal("quickCheckJSON sent an ordinary checkpoint to the slow walk")
	}
	ms, ok, slow := readMembersQuick(benchLikeBody)
	if slow || !ok || len(ms) != 3 || ms[1].name != "working_state" {
		t.Fatalf("readMembersQuick: %v %v %+v", slow, ok, ms)
	}
	if got, _ := readMembersSlow(benchLikeBody); !reflect.DeepEqual(len(got), len(ms)) {
		t.Fatal("slow walk disagrees")
	}
	if s, ok := plainJSONString([]byte(`"ship the parser fix"`)); !ok || s != "ship the parser fix" {
		t.Fatalf("plainJSONString left a plain string to encoding/json: %q %v", s, ok)
	}
	for _, refused := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[]`, `{"a":1}x`} {
		if quickCheckJSON([]byte(refused)) {
			t.Fatalf("quickCheckJSON accepted %s", refused)
		}
	}
}
