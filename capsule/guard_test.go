package capsule

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
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
		CodeInvalidPublicStatus: cp(`{"public_status":{"phase":"acting"}}`),
		CodeInvalidWorkingState: cp(`{"working_state":{"next_action":1}}`),
		CodeMotiveRequired:      cp(`{"decide":{"chosen":"a","because":"too short"}}`),
		CodeTooManyOpenLoops:    cp(`{"commitments":{"open":[` + strings.Repeat(`{"title":"abc"},`, 12) + `{"title":"abc"}]}}`),
		CodeEvidenceRequired:    cp(`{"commitments":{"close":[{"id":"c_1"}]}}`),
		CodeInvalidCapsule:      capsuleBody(`{"version":"2"}`),
		CodeSecretDetected:      cp(`{"focus":"` + "ghp_" + fake(700, alnum, 36) + `"}`),
		CodeInvalidJSON:         cp(`{`),
		CodeInvalidUTF8:         cp("{\"focus\":\"\x80\"}"),
		CodeUnknownField:        cp(`{"fokus":"a"}`),
		CodeInvalidField:        cp(`{"focus":true}`),
		CodeInvalidFocus:        cp(`{"focus":"` + strings.Repeat("a", MaxFocus+1) + `"}`),
		CodeInvalidDecision:     cp(`{"decide":{}}`),
		CodeInvalidCommitment:   cp(`{"commitments":{"open":[{"title":"ab"}]}}`),
		CodeInvalidStop:         cp(`{"stop":{}}`),
		CodeEmptyCheckpoint:     cp(`{}`),
		CodeInvalidSignal:       sig(`{"kind":"nope"}`),
		CodeBodyTooLarge:        sig(`{"kind":"activity","via":"` + strings.Repeat("a", MaxBodyBytes) + `"}`),
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
		{"check capsule", func() (any, error) { return nil, g.CheckCapsule(&Capsule{Version: "1", Goal: "g"}) }},
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
// the gitleaks config is loaded on a private viper instance and the logger
// is silenced once, so construction shares nothing.
func TestNewGuardConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			g, err := NewGuard(GuardOptions{})
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
