package guard

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// TestEveryGuardCode shows one refusal for every code a Guard returns, with
// its status, and that the list of known codes is exactly those.
func TestEveryGuardCode(t *testing.T) {
	g := testGuard(t)
	cp := func(b string) func() error {
		return func() error { _, err := g.DecodeCheckpoint([]byte(b)); return err }
	}
	capsuleBody := func(b string) func() error { return func() error { _, err := g.DecodeCapsule([]byte(b)); return err } }
	sig := func(b string) func() error { return func() error { _, err := g.DecodeSignal([]byte(b)); return err } }
	examples := map[string]func() error{
		capsule.CodeInvalidPublicStatus: cp(`{"public_status":{"phase":"acting"}}`),
		capsule.CodeInvalidWorkingState: cp(`{"working_state":{"next_action":1}}`),
		capsule.CodeMotiveRequired:      cp(`{"decide":{"chosen":"a","because":"too short"}}`),
		capsule.CodeTooManyOpenLoops:    cp(`{"commitments":{"open":[` + strings.Repeat(`{"title":"abc"},`, 12) + `{"title":"abc"}]}}`),
		capsule.CodeEvidenceRequired:    cp(`{"commitments":{"close":[{"id":"c_1"}]}}`),
		capsule.CodeInvalidCapsule:      capsuleBody(`{"version":"2"}`),
		capsule.CodeSecretDetected:      cp(`{"focus":"` + "ghp_" + fake(700, alnum, 36) + `"}`),
		capsule.CodeInvalidJSON:         cp(`{`),
		capsule.CodeInvalidUTF8:         cp("{\"focus\":\"\x80\"}"),
		capsule.CodeUnknownField:        cp(`{"fokus":"a"}`),
		capsule.CodeInvalidField:        cp(`{"focus":true}`),
		capsule.CodeInvalidFocus:        cp(`{"focus":"` + strings.Repeat("a", MaxFocus+1) + `"}`),
		capsule.CodeInvalidDecision:     cp(`{"decide":{}}`),
		capsule.CodeInvalidCommitment:   cp(`{"commitments":{"open":[{"title":"ab"}]}}`),
		capsule.CodeInvalidStop:         cp(`{"stop":{}}`),
		capsule.CodeEmptyCheckpoint:     cp(`{}`),
		capsule.CodeInvalidSignal:       sig(`{"kind":"nope"}`),
		capsule.CodeBodyTooLarge:        sig(`{"kind":"activity","via":"` + strings.Repeat("a", MaxBodyBytes) + `"}`),
	}
	if len(examples) != len(knownCodes) {
		t.Fatalf("%d examples for %d known codes", len(examples), len(knownCodes))
	}
	for code, f := range examples {
		e := checkGuardError(t, f())
		if e.Code != code {
			t.Errorf("example for %s gave %v", code, e)
		}
	}
}

// TestGuardConcurrent drives one Guard from 16 goroutines (run with -race)
// and checks every answer equals the one given sequentially.
func TestGuardConcurrent(t *testing.T) {
	g := testGuard(t)
	type call struct {
		name string
		f    func() (any, error)
	}
	tok := "xoxb-" + fake(710, digits, 12) + "-" + fake(711, digits, 12) + "-" + fake(712, alnum, 24)
	calls := []call{
		{"checkpoint ok", func() (any, error) {
			return g.DecodeCheckpoint([]byte(`{"focus":"x","public_status":{"phase":"acting","next_action":"see https://qdaybunker.fun"}}`))
		}},
		{"checkpoint secret", func() (any, error) { return g.DecodeCheckpoint([]byte(`{"focus":"` + tok + `"}`)) }},
		{"checkpoint bad", func() (any, error) { return g.DecodeCheckpoint([]byte(`{"decide":{"chosen":"a"}}`)) }},
		{"capsule ok", func() (any, error) { return g.DecodeCapsule([]byte(`{"version":"1","receipts":["repo@a1b2c3d"]}`)) }},
		{"capsule bad", func() (any, error) { return g.DecodeCapsule([]byte(`{"version":"1","x":1,"goal":3}`)) }},
		{"check capsule", func() (any, error) { return nil, g.CheckCapsule(&capsule.Capsule{Version: "1", Goal: "g"}) }},
		{"signal", func() (any, error) { return g.DecodeSignal([]byte(`{"kind":"context","used_fraction":0.5}`)) }},
		{"secret", func() (any, error) { return nil, g.CheckSecret("f", "note "+tok) }},
		{"redact", func() (any, error) { return g.Redact("commit: drop " + tok + " from config"), nil }},
	}
	type result struct {
		v   any
		err error
	}
	want := make([]result, len(calls))
	for i, c := range calls {
		v, err := c.f()
		want[i] = result{v, err}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16*len(calls))
	for w := range 16 {
		wg.Go(func() {
			for r := range 10 {
				i := (w + r) % len(calls)
				v, err := calls[i].f()
				if !reflect.DeepEqual(v, want[i].v) || fmt.Sprint(err) != fmt.Sprint(want[i].err) {
					errs <- fmt.Sprintf("%s: got (%v, %v), want (%v, %v)", calls[i].name, v, err, want[i].v, want[i].err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestNewGuardConcurrent builds Guards at the same time (run with -race):
// they share the rule set, parsed once, and nothing else.
func TestNewGuardConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			g, err := New(Options{})
			if err != nil {
				t.Error(err)
				return
			}
			if g.CheckSecret("f", "ghp_"+fake(720, alnum, 36)) == nil {
				t.Error("a fresh Guard missed a GitHub token")
			}
		})
	}
	wg.Wait()
}
