package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/internal/daemonside/openapi/openapitest"
)

// The fleet end to end: subprocess daemons against a real NATS JetStream
// server the test runs in-process on loopback.

// natsOpts is a JetStream server on 127.0.0.1:port (-1: random) with its
// store in dir.
func natsOpts(dir string, port int) *server.Options {
	return &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
		JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30}
}

func startNATS(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(o.Clone())
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func stopNATS(s *server.Server) { s.Shutdown(); s.WaitForShutdown() }

func loopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fleetDaemon is how a fleet test's daemon differs from the others: one
// agent, builder, shipping to the NATS fleet at a URL, written by
// workspace. Every fleet test's daemon is made here.
type fleetDaemon struct {
	agent     string   // its name; default builder
	upstreams []string // the agent's; default only the fleet
	timeout   string   // the fleet's; default "2s"
	fleet     string   // more lines of [upstream.fleet]
	daemon    string   // more lines of [daemon]
	more      string   // more tables: another upstream, [watch], [policy], …
}

// Tables most fleet tests add: the outbox retries soon, and no snapshot
// policy runs (the tests write the state they check).
const (
	quickOutbox = "\n[outbox]\nmin_backoff = \"100ms\"\nmax_backoff = \"1s\"\n"
	policyOff   = "\n[policy]\nenabled = false\n"
)

func (d fleetDaemon) workspace(t *testing.T, url string) *workspace {
	t.Helper()
	w := tempWorkspace(t, "cdfleet")
	upstreams, timeout, agent := d.upstreams, d.timeout, d.agent
	if agent == "" {
		agent = "builder"
	}
	if upstreams == nil {
		upstreams = []string{"fleet"}
	}
	if timeout == "" {
		timeout = "2s"
	}
	quoted, _ := json.Marshal(upstreams) // a TOML array of strings, as JSON writes it
	w.writeConfig(t, fmt.Sprintf(`[daemon]
state_dir = %q
socket = %q
shutdown_timeout = "3s"
%s
[[agent]]
name = %q
workdir = %q
upstreams = %s

[upstream.fleet]
kind = "nats"
url = %q
timeout = %q
%s%s`, w.state, w.socket, d.daemon, agent, w.work(), quoted, url, timeout, d.fleet, d.more))
	return w
}

// fleetWorkspace is the usual fleet daemon: a conflict window of a
// minute, the outbox quick, no policy; extra is more lines of
// [upstream.fleet] (and may open tables of its own after them).
func fleetWorkspace(t *testing.T, url string, extra string) *workspace {
	t.Helper()
	return fleetDaemon{fleet: "conflict_window = \"1m\"\n" + extra, more: quickOutbox + policyOff}.workspace(t, url)
}

// fleetJS is a JetStream client of the fleet at url, for a test's own look
// at what the daemons wrote there (or to write there as another machine
// would); close it when done.
func fleetJS(t *testing.T, url string) (jetstream.JetStream, func()) {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatalf("connecting to the fleet at %s: %v", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return js, nc.Close
}

// waitingForDirections is a fleet daemon whose agent has checkpointed and
// waits for directions, and the cursor its wait is at.
func waitingForDirections(t *testing.T, url string) (*proc, uint64) {
	t.Helper()
	w := fleetWorkspace(t, url, "")
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	fleetPost(t, p, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "waiting for directions"})
	return p, uint64(get(t, p.client(), "/v1/continuity/wait?max_seconds=1")["cursor"].(float64))
}

// publishDirection sends the agent builder a direction through the
// fleet, as an operator's tool would: body as it is, id its dedup id.
func publishDirection(t *testing.T, js jetstream.JetStream, id, body string) {
	t.Helper()
	msg := natsgo.NewMsg("continuityd.directions.builder")
	msg.Data = []byte(body)
	msg.Header.Set("Nats-Msg-Id", id)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// waitDirections waits (up to a minute) for n directions in the agent's
// wait after cursor, and returns them as JSON with the cursor it reached.
func waitDirections(t *testing.T, p *proc, cursor uint64, n int) ([]string, uint64) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		ans := get(t, p.client(), fmt.Sprintf("/v1/continuity/wait?max_seconds=5&after=%d", cursor))
		cursor = uint64(ans["cursor"].(float64))
		for _, e := range ans["events"].([]any) {
			if ev := e.(map[string]any); ev["kind"] == "direction" {
				got = append(got, fleetJSON(ev))
			}
		}
	}
	return got, cursor
}

func fleetPost(t *testing.T, p *proc, path string, body any) map[string]any {
	t.Helper()
	code, m, err := post(p.client(), path, body)
	if err != nil || code != 200 {
		t.Fatalf("POST %s: %d %v %v", path, code, m, err)
	}
	return m
}

// fleetWait polls cond every 100 ms for up to d.
func fleetWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fleetSeq is the seq of the agent's state in the fleet's bucket (0: none).
func fleetSeq(t *testing.T, url, agent string) uint64 {
	js, closeJS := fleetJS(t, url)
	defer closeJS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "continuityd")
	if err != nil {
		return 0
	}
	e, err := kv.Get(ctx, agent)
	if err != nil {
		return 0
	}
	var env struct {
		Seq uint64 `json:"seq"`
	}
	json.Unmarshal(e.Value(), &env)
	return env.Seq
}

// streamWrites reads every write of agent in the stream: seq, key, body.
type streamWrite struct {
	seq  uint64
	key  string
	body map[string]any
}

func streamWrites(t *testing.T, url, agent string) []streamWrite {
	t.Helper()
	var out []streamWrite
	readFleetStream(t, url, "continuityd.writes."+agent+".>", func(msg jetstream.Msg) {
		seq, _ := strconv.ParseUint(msg.Headers().Get("Continuityd-Seq"), 10, 64)
		var body map[string]any
		json.Unmarshal(msg.Data(), &body)
		out = append(out, streamWrite{seq: seq, key: msg.Headers().Get("Nats-Msg-Id"), body: body})
	})
	return out
}

func fleetResumeDoc(t *testing.T, p *proc) map[string]any {
	t.Helper()
	return get(t, p.client(), "/v1/continuity?peek=1")
}

func degradedHas(r map[string]any, name string) bool {
	ds, _ := r["degraded"].([]any)
	for _, d := range ds {
		if d == name {
			return true
		}
	}
	return false
}

// A writes (decisions, commitments, a capsule, a stop and a resume), its
// state directory is deleted, and B on a fresh one resumes the same state
// and continues the sequence.
func TestFleetResumeAnywhere(t *testing.T) {
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()

	wa := fleetWorkspace(t, url, "")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	fleetPost(t, a, "/v1/continuity/checkpoint", map[string]any{
		"focus":         "migrate the billing module",
		"working_state": map[string]any{"next_action": "swap the callsites in checkout", "last_result": "adapters written"},
		"decide":        map[string]any{"chosen": "retry with backoff", "because": "the upstream drops bursts over sixty a minute"},
		"commitments":   map[string]any{"open": []any{map[string]any{"title": "ship the parser fix"}}},
	})
	fleetPost(t, a, "/v1/continuity/checkpoint", map[string]any{
		"decide": map[string]any{"chosen": "keep the old adapter", "because": "the new one breaks the refund flow"},
	})
	req, _ := json.Marshal(map[string]any{"version": "1", "goal": "billing on the new API", "next": "swap callsites"})
	code, _, err := fleetPut(a.client(), "/v1/capsule", req)
	if err != nil || code != 200 {
		t.Fatalf("PUT capsule: %d %v", code, err)
	}
	fleetPost(t, a, "/v1/continuity/checkpoint", map[string]any{"stop": map[string]any{"reason": "moving to another machine"}})
	last := fleetPost(t, a, "/v1/continuity/checkpoint?sync=1", map[string]any{"resume_residency": true, "focus": "billing, on the new machine"})
	lastSeq := uint64(last["seq"].(float64))
	if lastSeq != 5 {
		t.Fatalf("A's last seq %d, want 5", lastSeq)
	}
	fleetWait(t, 60*time.Second, "A's state in the bucket", func() bool { return fleetSeq(t, url, "builder") == lastSeq })
	before := fleetResumeDoc(t, a)
	a.kill()
	if err := os.RemoveAll(wa.state); err != nil {
		t.Fatal(err)
	}

	wb := fleetWorkspace(t, url, "")
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	r := fleetResumeDoc(t, b)
	for _, k := range []string{"focus", "working_state", "decisions", "commitments", "stopped"} {
		if g, w := fleetJSON(r[k]), fleetJSON(before[k]); g != w {
			t.Errorf("B's %s = %s, A had %s", k, g, w)
		}
	}
	if c, _ := r["capsule"].(map[string]any); c == nil || c["capsule"].(map[string]any)["goal"] != "billing on the new API" {
		t.Errorf("B's capsule = %v", r["capsule"])
	}
	if uint64(r["seq"].(float64)) != lastSeq {
		t.Errorf("B's seq = %v, want %d", r["seq"], lastSeq)
	}
	from, _ := r["restored_from"].(map[string]any)
	if from == nil || from["upstream"] != "fleet" || from["machine"] == "" || from["last_seq"].(float64) != float64(lastSeq) || from["age_seconds"] == nil {
		t.Fatalf("restored_from = %v", r["restored_from"])
	}
	if degradedHas(r, "fleet") {
		t.Errorf("degraded after a restore: %v", r["degraded"])
	}
	next := fleetPost(t, b, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "B continues"})
	if uint64(next["seq"].(float64)) != lastSeq+1 {
		t.Fatalf("B's first write seq %v, want %d", next["seq"], lastSeq+1)
	}
	ws := streamWrites(t, url, "builder")
	if len(ws) != int(lastSeq)+1 {
		t.Fatalf("stream holds %d writes, want %d", len(ws), lastSeq+1)
	}
	for i, w := range ws {
		if w.seq != uint64(i+1) {
			t.Fatalf("stream write %d has seq %d: %+v", i, w.seq, ws)
		}
	}
	if !strings.HasSuffix(ws[len(ws)-1].key, fmt.Sprintf("-%d", lastSeq+1)) || ws[len(ws)-1].key == ws[0].key {
		t.Errorf("B's key %q", ws[len(ws)-1].key)
	}
	if !strings.Contains(b.stderr.String(), "agent restored from the fleet") {
		t.Errorf("B's log does not say it restored: %s", b.stderr)
	}

	// `continuityd fleet` lists the agent with B's machine and seq.
	out, code := fleetCLI(t, "fleet", "--socket", wb.socket)
	if code != 0 || !strings.Contains(out, "builder") || !strings.Contains(out, "AGENT") || !strings.Contains(out, "connected") {
		t.Fatalf("fleet table (%d):\n%s", code, out)
	}
	out, code = fleetCLI(t, "fleet", "--socket", wb.socket, "--json")
	var ans struct {
		Health struct{ Connected bool }
		Agents []struct {
			Agent   string
			Machine string
			Seq     uint64
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil || !ans.Health.Connected || len(ans.Agents) != 1 || ans.Agents[0].Agent != "builder" || ans.Agents[0].Machine == "" {
		t.Fatalf("fleet --json (%d): %s", code, out)
	}
	fleetAnswerValidates(t, b)
	fleetWait(t, 60*time.Second, "B's state in the bucket", func() bool { return fleetSeq(t, url, "builder") == lastSeq+1 })
}

// fleetAnswerValidates checks GET /v1/fleet's answer with a fleet (the
// one operation daemon's OpenAPI test cannot answer 200 without NATS)
// against the OpenAPI document the daemon serves.
func fleetAnswerValidates(t *testing.T, p *proc) {
	t.Helper()
	resp, err := validatingClient(t, p).Get("http://d/v1/fleet")
	if err != nil {
		t.Fatalf("GET /v1/fleet against the document: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/fleet: %d", resp.StatusCode)
	}
}

// validatingClient is a client of p's socket whose transport checks each
// request and answer against the OpenAPI document p serves.
func validatingClient(t *testing.T, p *proc) *http.Client {
	t.Helper()
	c := p.client()
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get("http://d/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/openapi.json: %d %v", resp.StatusCode, err)
	}
	tr, err := openapitest.NewTransport(doc, c.Transport)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// With the fleet down at B's start, B starts degraded and writes; when the
// fleet comes back B restores without losing its own writes.
func TestFleetDownAtStartCatchesUp(t *testing.T) {
	opts := natsOpts(t.TempDir(), -1)
	srv := startNATS(t, opts)
	url := srv.ClientURL()
	opts.Port = srv.Addr().(*net.TCPAddr).Port // where it comes back

	wa := fleetWorkspace(t, url, "")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	fleetPost(t, a, "/v1/continuity/checkpoint", map[string]any{
		"focus":       "A's focus",
		"decide":      map[string]any{"chosen": "retry with backoff", "because": "the upstream drops bursts over sixty a minute"},
		"commitments": map[string]any{"open": []any{map[string]any{"title": "A's open loop"}}},
	})
	fleetPost(t, a, "/v1/continuity/checkpoint?sync=1", map[string]any{"working_state": map[string]any{"next_action": "A's next"}})
	fleetWait(t, 60*time.Second, "A's state in the bucket", func() bool { return fleetSeq(t, url, "builder") == 2 })
	a.terminate(t)
	os.RemoveAll(wa.state)
	stopNATS(srv)

	wb := fleetWorkspace(t, url, "")
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)
	r := fleetResumeDoc(t, b)
	if !degradedHas(r, "fleet") || r["restored_from"] != nil || r["focus"] != "" {
		t.Fatalf("B with the fleet down: degraded %v, restored_from %v, focus %q", r["degraded"], r["restored_from"], r["focus"])
	}
	st := get(t, b.client(), "/v1/status")
	if ag := st["agents"].([]any)[0].(map[string]any); !strings.Contains(fleetJSON(ag["degraded"]), "fleet") {
		t.Errorf("status degraded = %v", ag["degraded"])
	}
	fleetPost(t, b, "/v1/continuity/checkpoint", map[string]any{
		"focus":  "B's own focus",
		"decide": map[string]any{"chosen": "B decided this offline", "because": "the fleet was unreachable at the start"},
	})

	startNATS(t, opts) // the same port and store: the fleet is back
	fleetWait(t, 30*time.Second, "B to restore from the fleet", func() bool {
		r = fleetResumeDoc(t, b)
		return r["restored_from"] != nil && !degradedHas(r, "fleet")
	})
	if r["focus"] != "B's own focus" {
		t.Errorf("B's own focus was overwritten: %q", r["focus"])
	}
	ws, _ := r["working_state"].(map[string]any)
	if ws == nil || ws["next_action"] != "A's next" {
		t.Errorf("working_state not filled in from the fleet: %v", r["working_state"])
	}
	ds := fleetJSON(r["decisions"])
	if !strings.Contains(ds, "retry with backoff") || !strings.Contains(ds, "B decided this offline") {
		t.Errorf("decisions = %s", ds)
	}
	if !strings.Contains(fleetJSON(r["commitments"]), "A's open loop") {
		t.Errorf("commitments = %v", r["commitments"])
	}
	if from := r["restored_from"].(map[string]any); from["merged"] != true {
		t.Errorf("restored_from = %v", from)
	}
	next := fleetPost(t, b, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "after the catch-up"})
	if seq := uint64(next["seq"].(float64)); seq <= 2 {
		t.Errorf("B's write after the catch-up has seq %d, not after the fleet's 2", seq)
	}
	// B's offline write reached the fleet too.
	fleetWait(t, 60*time.Second, "B's writes in the stream", func() bool {
		got := streamWrites(t, url, "builder")
		return len(got) == 4 && strings.Contains(fleetJSON(got[2].body), "B's own focus")
	})
}

// Two daemons running the same agent at once both report it.
func TestFleetSplitWriters(t *testing.T) {
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()
	wa, wb := fleetWorkspace(t, url, ""), fleetWorkspace(t, url, "")
	a := startProc(t, wa.socket, nil, "run", "--config", wa.config)
	fleetPost(t, a, "/v1/continuity/checkpoint?sync=1", map[string]any{"focus": "A at work"})
	fleetWait(t, 60*time.Second, "A's state in the bucket", func() bool { return fleetSeq(t, url, "builder") == 1 })
	b := startProc(t, wb.socket, nil, "run", "--config", wb.config)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { // both keep writing, as two live agents would
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			post(a.client(), "/v1/continuity/checkpoint", map[string]any{"focus": fmt.Sprintf("A %d", i)})
			post(b.client(), "/v1/continuity/checkpoint", map[string]any{"focus": fmt.Sprintf("B %d", i)})
			time.Sleep(200 * time.Millisecond)
		}
	}()
	for _, p := range []*proc{a, b} {
		fleetWait(t, 60*time.Second, "a fleet_conflict in resume", func() bool {
			fc, _ := fleetResumeDoc(t, p)["fleet_conflict"].([]any)
			return len(fc) > 0
		})
		st := get(t, p.client(), "/v1/status")
		if fc, _ := st["agents"].([]any)[0].(map[string]any)["fleet_conflict"].([]any); len(fc) == 0 {
			t.Errorf("status has no fleet_conflict: %v", st)
		}
		if !strings.Contains(fleetMetrics(t, p), `continuityd_fleet_conflict{agent="builder",upstream="fleet"} 1`) {
			t.Errorf("metric not 1")
		}
	}
	cancel()
	<-done
	for _, p := range []*proc{a, b} {
		if !strings.Contains(p.stderr.String(), "another daemon is writing this agent") {
			t.Errorf("log does not report the other writer: %s", p.stderr)
		}
	}
}

// Directions published to the fleet reach the agent's wait and resume,
// once per message id.
func TestFleetDirections(t *testing.T) {
	srv := startNATS(t, natsOpts(t.TempDir(), -1))
	url := srv.ClientURL()
	p, cursor := waitingForDirections(t, url)

	js, closeJS := fleetJS(t, url)
	defer closeJS()
	for _, m := range []struct{ id, text string }{{"d-1", "rebase first"}, {"d-1", "rebase first"}, {"d-2", "then ship"}} {
		publishDirection(t, js, m.id, m.text)
	}
	texts, cursor := waitDirections(t, p, cursor, 2)
	if len(texts) != 2 || !strings.Contains(texts[0], "rebase first") || !strings.Contains(texts[1], "then ship") {
		t.Fatalf("directions relayed: %v", texts)
	}
	// Nothing more arrives for the duplicate.
	ans := get(t, p.client(), fmt.Sprintf("/v1/continuity/wait?max_seconds=2&after=%d", cursor))
	for _, e := range ans["events"].([]any) {
		if e.(map[string]any)["kind"] == "direction" {
			t.Fatalf("a direction relayed twice: %v", e)
		}
	}
	ds := fleetJSON(fleetResumeDoc(t, p)["directions"])
	if strings.Count(ds, "rebase first") != 1 || strings.Count(ds, "then ship") != 1 {
		t.Fatalf("resume directions = %s", ds)
	}
}

func fleetJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func fleetPut(c interface {
	Do(*http.Request) (*http.Response, error)
}, path string, body []byte) (int, map[string]any, error) {
	req, _ := http.NewRequest(http.MethodPut, "http://d"+path, bytes.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, nil
}

func fleetMetrics(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := p.client().Get("http://d/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// fleetCLI runs the continuityd binary as a client command.
func fleetCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	code, out, errOut := cli(t, nil, "", args...)
	return out + errOut, code
}

// readFleetStream calls fn with every message of the stream on filter, in
// stream order, retrying through a cluster's leader elections.
func readFleetStream(t *testing.T, url, filter string, fn func(jetstream.Msg)) {
	t.Helper()
	js, closeJS := fleetJS(t, url)
	defer closeJS()
	// Generous: under -race beside other packages, and through a node's
	// restart, a cluster can take minutes to answer again.
	deadline := time.Now().Add(4 * time.Minute)
	var next, last uint64 = 1, 0
	var lastErr error // what stopped the last read, for the failure
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if last == 0 {
			info, err := js.Stream(ctx, "CONTINUITYD")
			if err != nil {
				cancel()
				lastErr = err
				time.Sleep(200 * time.Millisecond)
				continue
			}
			last = info.CachedInfo().State.LastSeq
		}
		cons, err := js.OrderedConsumer(ctx, "CONTINUITYD", jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: next})
		cancel()
		if err != nil {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for {
			msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err != nil {
				if next > last || errors.Is(err, natsgo.ErrTimeout) {
					return // nothing more on the filter
				}
				lastErr = err
				break // a leader election: read on from next
			}
			md, _ := msg.Metadata()
			next = md.Sequence.Stream + 1
			fn(msg)
			if next > last {
				return
			}
		}
	}
	if next <= last {
		t.Fatalf("could not read the stream up to %d (at %d); the last read stopped on: %v", last, next, lastErr)
	}
}

// fleetCluster is a three-node JetStream cluster on loopback.
type fleetCluster struct {
	t       *testing.T
	opts    []*server.Options
	servers []*server.Server
}

// startFleetCluster starts the three nodes on loopback ports picked
// ahead (JetStream's cluster needs its routes configured before a node
// starts). A port picked and freed may be taken meanwhile by a connection
// of the tests running beside: a node that cannot listen is not ready,
// and the cluster is started again on fresh ports, up to three times.
func startFleetCluster(t *testing.T) *fleetCluster {
	t.Helper()
	cl := &fleetCluster{t: t, servers: make([]*server.Server, 3)}
	t.Cleanup(cl.stopAll)
	for attempt := 1; ; attempt++ {
		cl.configure()
		ready := true
		for i := range 3 {
			if ready = cl.tryStart(i); !ready {
				break
			}
		}
		if ready {
			break
		}
		cl.stopAll()
		if attempt == 3 {
			t.Fatal("the cluster's nodes did not become ready on three sets of ports")
		}
	}
	js, closeJS := fleetJS(t, cl.url())
	defer closeJS()
	fleetWait(t, 30*time.Second, "the cluster's JetStream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return cl
}

// configure gives the three nodes fresh ports, each routed to all three.
func (cl *fleetCluster) configure() {
	var routes []string
	clientPorts, routePorts := make([]int, 3), make([]int, 3)
	for i := range 3 {
		clientPorts[i], routePorts[i] = loopbackPort(cl.t), loopbackPort(cl.t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	cl.opts = nil
	for i := range 3 {
		o := natsOpts(cl.t.TempDir(), clientPorts[i])
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = server.ClusterOpts{Name: "fleet", Host: "127.0.0.1", Port: routePorts[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		cl.opts = append(cl.opts, o)
	}
}

// tryStart starts node i and reports whether it became ready.
func (cl *fleetCluster) tryStart(i int) bool {
	s, err := server.NewServer(cl.opts[i].Clone())
	if err != nil {
		cl.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		stopNATS(s)
		return false
	}
	cl.servers[i] = s
	return true
}

func (cl *fleetCluster) start(i int) {
	if !cl.tryStart(i) {
		cl.t.Fatalf("node %d not ready", i)
	}
}

func (cl *fleetCluster) stopAll() {
	for i, s := range cl.servers {
		if s != nil {
			stopNATS(s)
			cl.servers[i] = nil
		}
	}
}

func (cl *fleetCluster) stop(i int) { stopNATS(cl.servers[i]); cl.servers[i] = nil }

func (cl *fleetCluster) url() string {
	var out []string
	for _, o := range cl.opts {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(out, ",")
}

// TestFleetConservation: 2,000 writes through a daemon SIGKILLed 5 times,
// shipping to a three-node cluster (replicas 3) one node of which is
// stopped and restarted mid-stream. The stream holds every acknowledged
// write, once per Idempotency-Key, in order, never faster than the limit.
func TestFleetConservation(t *testing.T) {
	const (
		total    = 2000
		segments = 6 // 5 SIGKILLs between them
		rate     = 400.0
		burst    = 40
	)
	cl := startFleetCluster(t)
	w := fleetWorkspace(t, cl.url(), fmt.Sprintf("replicas = 3\nrate = %v\nburst = %d\n", rate, burst))
	acked := map[uint64]string{}
	n := 0
	for seg := range segments {
		p := startProc(t, w.socket, nil, "run", "--config", w.config)
		c := p.client()
		per := total / segments
		if seg == segments-1 {
			per = total - n
		}
		for i := range per {
			if seg == 2 && i == per/2 {
				cl.stop(1) // a node goes away mid-stream...
			}
			if seg == 4 && i == per/2 {
				cl.start(1) // ...and comes back
			}
			focus := fmt.Sprintf("write %d", n)
			code, m, err := post(c, "/v1/continuity/checkpoint", map[string]any{"focus": focus})
			if err != nil || code != 200 {
				t.Fatalf("write %d: %d %v %v", n, code, m, err)
			}
			acked[uint64(m["seq"].(float64))] = focus
			n++
		}
		c.CloseIdleConnections()
		if seg < segments-1 {
			p.kill()
			continue
		}
		fleetWait(t, 40*time.Second, "every write delivered", func() bool {
			st := get(t, p.client(), "/v1/status")
			ups := st["agents"].([]any)[0].(map[string]any)["upstreams"].([]any)
			return ups[0].(map[string]any)["pending"].(float64) == 0
		})
		p.terminate(t)
	}

	var seqs []uint64
	var times []time.Time
	keys := map[string]bool{}
	readFleetStream(t, cl.url(), "continuityd.writes.builder.>", func(msg jetstream.Msg) {
		md, _ := msg.Metadata()
		key := msg.Headers().Get("Nats-Msg-Id")
		if keys[key] {
			t.Fatalf("Idempotency-Key %s stored twice", key)
		}
		keys[key] = true
		seq, _ := strconv.ParseUint(msg.Headers().Get("Continuityd-Seq"), 10, 64)
		var body struct {
			Checkpoint struct{ Focus string } `json:"checkpoint"`
		}
		json.Unmarshal(msg.Data(), &body)
		if want, ok := acked[seq]; ok && body.Checkpoint.Focus != want {
			t.Fatalf("seq %d holds %q, the daemon acknowledged %q", seq, body.Checkpoint.Focus, want)
		}
		if len(seqs) > 0 && seq <= seqs[len(seqs)-1] {
			t.Fatalf("out of order: seq %d after %d", seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, seq)
		times = append(times, md.Timestamp)
	})
	got := map[uint64]bool{}
	for _, s := range seqs {
		got[s] = true
	}
	for s := range acked {
		if !got[s] {
			t.Errorf("acknowledged seq %d is not in the stream", s)
		}
	}
	if len(acked) != total {
		t.Fatalf("%d writes acknowledged, want %d", len(acked), total)
	}
	// Never faster than the limit: any run of k stored writes spans at
	// least (k - burst) / rate (50 ms of slack for the server's clock).
	for i := range times {
		for j := i + burst; j < len(times); j++ {
			k := float64(j - i + 1)
			if span := times[j].Sub(times[i]).Seconds() + 0.05; k > rate*span+burst {
				t.Fatalf("writes %d..%d: %v in %.3fs, over rate %v burst %d", i, j, k, span, rate, burst)
			}
		}
	}
	t.Logf("%d writes, %d in the stream, 5 SIGKILLs, node n2 stopped and restarted", len(acked), len(seqs))
}
