package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Handing an agent over (`continuityd fleet take`) end to end, on a real
// NATS server: machine A writes and is killed (SIGKILL); B resumes the
// agent from the fleet; its take is refused while A's state is within the
// conflict window, then done with --force; A restarted stops writing the
// agent and says so. One writer, every acknowledged write in the fleet's
// stream, and both logs and statuses say what happened.
func TestFleetTakeOver(t *testing.T) {
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()
	host, _ := os.Hostname()

	wa := fleetWorkspace(t, url, "")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	const n = 4
	for i := 1; i <= n; i++ {
		ans := fleetPost(t, a, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": fmt.Sprintf("A's step %d", i)})
		if seq := uint64(ans["seq"].(float64)); seq != uint64(i) {
			t.Fatalf("A's write %d acknowledged as seq %d", i, seq)
		}
	}
	fleetWait(t, 60*time.Second, "A's state in the bucket", func() bool { return fleetSeq(t, url, "builder") == n })
	a.kill() // SIGKILL: A says nothing to anyone

	wb := fleetWorkspace(t, url, "")
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	if r := fleetResumeDoc(t, b); uint64(r["seq"].(float64)) != n || r["focus"] != fmt.Sprintf("A's step %d", n) {
		t.Fatalf("B resumed at seq %v, focus %v", r["seq"], r["focus"])
	}
	writerA := host + "/" + stateInstance(t, wa.state)
	writerB := host + "/" + stateInstance(t, wb.state)

	// A's state is seconds old: refused, naming A, the window and --force.
	out, code := fleetCLI(t, "fleet", "take", "builder", "--socket", wb.socket)
	for _, want := range []string{"FLEET_TAKE_REFUSED", writerA, "conflict window (1m0s)", "--force"} {
		if code == 0 || !strings.Contains(out, want) {
			t.Fatalf("fleet take without --force (exit %d) does not refuse with %q:\n%s", code, want, out)
		}
	}

	// With --force, through the API as the OpenAPI document describes it.
	take := takeValidated(t, b, "/v1/fleet/take?agent=builder&force=1")
	h := take["handover"].(map[string]any)
	if take["agent"] != "builder" || h["here"] != "taken" || h["from"] != writerA || h["to"] != writerB || h["forced"] != true || h["seq"].(float64) != n {
		t.Fatalf("the take's answer: %v", take)
	}
	waitUntil(t, func() string { return "B's log does not say it took the agent over:\n" + b.stderr.String() }, func() bool {
		return strings.Contains(b.stderr.String(), "this daemon took the agent over") && strings.Contains(b.stderr.String(), writerA)
	})
	if sh := takeStatus(t, b)["fleet_handover"].(map[string]any); sh["here"] != "taken" || sh["from"] != writerA || sh["at"] == nil {
		t.Errorf("B's status handover: %v", sh)
	}
	fleetPost(t, b, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "B's step 5"})

	// A comes back: it stops writing the agent and says so, once.
	a = startProc(t, wa.socket, nil, "run", "--config", wa.config)
	var ah map[string]any
	waitUntil(t, func() string { return fmt.Sprintf("A's status shows no handover: %v\n%s", takeStatus(t, a), a.stderr) }, func() bool {
		ah, _ = takeStatus(t, a)["fleet_handover"].(map[string]any)
		return ah != nil
	})
	if ah["here"] != "given" || ah["to"] != writerB || ah["from"] != writerA {
		t.Errorf("A's status handover: %v", ah)
	}
	code, body, err := post(a.client(), "/v1/continuity/checkpoint", map[string]any{"focus": "A, after the take"})
	e, _ := body["error"].(map[string]any)
	if err != nil || code != 409 || e["code"] != "AGENT_HANDED_OVER" || !strings.Contains(e["message"].(string), writerB) {
		t.Fatalf("A's write after the take: %d %v %v", code, body, err)
	}
	r := fleetResumeDoc(t, a) // still answers, degraded, with A's own state
	if !degradedHas(r, "fleet") || r["fleet_handover"] == nil || uint64(r["seq"].(float64)) != n {
		t.Errorf("A's resume: degraded %v, handover %v, seq %v", r["degraded"], r["fleet_handover"], r["seq"])
	}
	if c := strings.Count(a.stderr.String(), "this agent was taken over by another daemon"); c != 1 {
		t.Errorf("A's log says it was taken over %d times:\n%s", c, a.stderr)
	}

	// One writer: B writes on; A put no state and kept none apart.
	fleetPost(t, b, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "B's step 6"})
	fleetWait(t, 60*time.Second, "B's state at seq 6 in the bucket", func() bool { return fleetSeq(t, url, "builder") == 6 })
	if holder := fleetHolder(t, url, "builder"); holder != writerB {
		t.Errorf("the agent's key is written by %s, not B (%s)", holder, writerB)
	}
	if keys := fleetKeys(t, url); strings.Contains(strings.Join(keys, " "), "builder.conflict.") {
		t.Errorf("a state was kept apart (a second writer): %v", keys)
	}
	if fc := takeStatus(t, b)["fleet_conflict"]; fc != nil {
		t.Errorf("B reports a conflict: %v", fc)
	}
	// Nothing lost: every write acknowledged on either side is in the
	// stream, once, in order.
	ws := streamWrites(t, url, "builder")
	want := []string{"A's step 1", "A's step 2", "A's step 3", "A's step 4", "B's step 5", "B's step 6"}
	if len(ws) != len(want) {
		t.Fatalf("the stream holds %d writes, want %d: %+v", len(ws), len(want), ws)
	}
	for i, w := range ws {
		if w.seq != uint64(i+1) || !strings.Contains(fleetJSON(w.body), want[i]) {
			t.Errorf("stream write %d: seq %d %s, want seq %d %q", i, w.seq, fleetJSON(w.body), i+1, want[i])
		}
	}
}

// stateInstance is how a daemon with state directory dir names itself in
// the fleet beside its machine (daemon/agent.FleetInstance).
func stateInstance(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// takeStatus is the daemon's status of its one agent.
func takeStatus(t *testing.T, p *proc) map[string]any {
	t.Helper()
	return get(t, p.client(), "/v1/status")["agents"].([]any)[0].(map[string]any)
}

// takeValidated POSTs path to the daemon through a transport that checks
// the request and the answer against the OpenAPI document it serves, and
// returns the answer (200).
func takeValidated(t *testing.T, p *proc, path string) map[string]any {
	t.Helper()
	resp, err := validatingClient(t, p).Post("http://d"+path, "application/json", nil)
	if err != nil {
		t.Fatalf("POST %s against the document: %v", path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, m, err)
	}
	return m
}

// fleetHolder is the writer (machine/instance) of agent's key in the bucket.
func fleetHolder(t *testing.T, url, agent string) string {
	t.Helper()
	var env struct{ Machine, Instance string }
	if err := json.Unmarshal(fleetValue(t, url, agent), &env); err != nil {
		t.Fatalf("the fleet's key %s: %v", agent, err)
	}
	return env.Machine + "/" + env.Instance
}

// fleetKeys are the keys of the fleet's state bucket.
func fleetKeys(t *testing.T, url string) []string {
	t.Helper()
	js, closeJS := fleetJS(t, url)
	defer closeJS()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "continuityd")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
