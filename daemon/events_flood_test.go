package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

// TestUpstreamFloodKeepsTheAgentsOwnEvent: Q-Day's long poll answering
// 10,000 events does not push the agent's own checkpoint event out of its
// feed unseen: a wait from before the checkpoint still returns it first,
// and counts the upstream events that gave way as missed.
func TestUpstreamFloodKeepsTheAgentsOwnEvent(t *testing.T) {
	fake := qdaytest.New(qdaytest.Options{Token: "t"})
	defer fake.Close()
	t.Setenv("CD_FLOOD_TOKEN", "t")
	cfg := testConfig(t)
	cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_FLOOD_TOKEN",
		Rate: 1e6, Burst: 1000, Timeout: config.Duration{Duration: 30 * time.Second}}}
	cfg.Agents[0].Upstreams = []string{"qday"}
	td := startDaemon(t, cfg)

	start := uint64(td.expectOK("GET", "/v1/continuity/wait?max_seconds=1", nil)["cursor"].(float64))
	td.expectOK("POST", "/v1/continuity/checkpoint", map[string]any{"focus": "the agent's own"})
	const flood = 10000
	for i := range flood {
		fake.PushEvent(json.RawMessage(fmt.Sprintf(`{"kind":"direction","text":"flood %d"}`, i)))
	}
	var ans map[string]any
	waitFor(t, 60*time.Second, func() bool {
		ans = td.expectOK("GET", fmt.Sprintf("/v1/continuity/wait?max_seconds=1&after=%d", start), nil)
		return uint64(ans["cursor"].(float64)) >= start+1+flood
	})
	evs := ans["events"].([]any)
	first := evs[0].(map[string]any)
	if first["kind"] != "checkpoint" {
		t.Fatalf("the agent's own checkpoint event is gone after the flood; the first of %d is %v", len(evs), first)
	}
	missed, ok := ans["missed"].(float64)
	if want := ans["cursor"].(float64) - float64(start) - float64(len(evs)); !ok || missed != want || missed == 0 {
		t.Errorf("missed = %v, want %v (cursor %v, %d events)", ans["missed"], want, ans["cursor"], len(evs))
	}
}

// TestSyncCheckpointTellsRefusedFromDelivered: a ?sync=1 checkpoint the
// upstream refuses for good (400, kept in its dead letter) is reported
// refused with the reason, not delivered.
func TestSyncCheckpointTellsRefusedFromDelivered(t *testing.T) {
	fake := qdaytest.New(qdaytest.Options{Token: "sync-token-0123456789"})
	defer fake.Close()
	t.Setenv("CD_SYNC_TOKEN", "sync-token-0123456789")
	cfg := testConfig(t)
	cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_SYNC_TOKEN",
		Rate: 1e6, Burst: 1000, Timeout: config.Duration{Duration: 30 * time.Second}}}
	cfg.Agents[0].Upstreams = []string{"qday"}
	td := startDaemon(t, cfg)
	fake.Script(qdaytest.Fault{Kind: qdaytest.Status400, Path: qdaytest.CheckpointPath})
	m := td.expectOK("POST", "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "refused upstream"})
	s := m["sync"].([]any)[0].(map[string]any)
	if s["name"] != "qday" || s["delivered"] != false || s["refused"] != true || s["error"] == nil {
		t.Fatalf("sync answer for a write the upstream refused: %v", s)
	}
	m = td.expectOK("POST", "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "taken"})
	if s := m["sync"].([]any)[0].(map[string]any); s["delivered"] != true || s["refused"] == true {
		t.Fatalf("sync answer for a write the upstream took: %v", s)
	}
}

// TestInvalidUTF8FromAnUpstreamIsMadeValid: a Q-Day resume carrying
// invalid UTF-8 reaches the agent as valid UTF-8 (a strict decoder reads
// the resume).
func TestInvalidUTF8FromAnUpstreamIsMadeValid(t *testing.T) {
	fake := qdaytest.New(qdaytest.Options{Token: "utf8-token-0123456789"})
	defer fake.Close()
	fake.SetDirections(json.RawMessage("{\"text\":\"take the \xff\xfe path\"}"))
	t.Setenv("CD_UTF8_TOKEN", "utf8-token-0123456789")
	cfg := testConfig(t)
	cfg.Upstreams = map[string]config.Upstream{"qday": {Kind: config.KindQDay, URL: fake.URL(), TokenEnv: "CD_UTF8_TOKEN",
		Rate: 1e6, Burst: 1000, Timeout: config.Duration{Duration: 30 * time.Second}}}
	cfg.Agents[0].Upstreams = []string{"qday"}
	td := startDaemon(t, cfg)
	status, body := td.doRaw("GET", "/v1/continuity?peek=1", nil)
	if status != 200 || !strings.Contains(string(body), "take the") {
		t.Fatalf("resume: %d %s", status, body)
	}
	if !utf8.Valid(body) {
		t.Fatalf("the resume passes the upstream's invalid UTF-8 on: %q", body)
	}
}
