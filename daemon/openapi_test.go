package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/daemonside/openapi/openapitest"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json from what the daemon serves")

// openapiCall is one call of the proof: the operation it exercises, the
// status it must get, and whether it is made outside the document on
// purpose (a body or query the document refuses too).
type openapiCall struct {
	op, method, path, body string
	status                 int
	outside                bool
}

// TestOpenAPIEveryOperationValidates is the proof of the served document:
// a real daemon on a real socket serves /v1/openapi.json, and every
// operation it names is called with a good request and a refused one
// through a Transport that checks each request and answer against it.
func TestOpenAPIEveryOperationValidates(t *testing.T) {
	cfg := testConfig(t)
	wd := filepath.Join(filepath.Dir(cfg.Daemon.Socket), "work")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "a.go"), []byte("package a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Agents[0].Workdir = wd
	cfg.Watch = config.Watch{Enabled: true, Ignore: []string{}, IgnoreDirs: config.DefaultIgnoreDirs(),
		Quiet: config.Duration{Duration: 100 * time.Millisecond}, HandoffFile: "HANDOFF.md", CapsuleFile: ".continuity/capsule.json"}
	cfg.Snapshots = config.Snapshots{Enabled: true, MaxFileSize: config.DefaultSnapshotMaxFileSize,
		Keep: config.DefaultSnapshotKeep, KeepBytes: config.DefaultSnapshotKeepBytes, Journal: true}
	// The policy for the quiet work record (a snapshot) that follows the
	// files' changes: they change only where the test says.
	cfg.Policy = config.Policy{Enabled: true, Quiet: config.Duration{Duration: 100 * time.Millisecond}, MaxDelay: config.Duration{Duration: time.Hour},
		MinInterval: config.Duration{Duration: 100 * time.Millisecond}, IdleAfter: config.Duration{Duration: time.Hour}, Refresh: config.Duration{Duration: time.Hour}, PublicStatus: "off"}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Daemon.Listen = l.Addr().String()
	l.Close()
	td := startDaemon(t, cfg)

	status, doc := td.doRaw("GET", "/v1/openapi.json", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", status, doc)
	}
	checkDocsOpenAPI(t, doc)
	tr, err := openapitest.NewTransport(doc, td.http.Transport)
	if err != nil {
		t.Fatal(err)
	}
	socket := &http.Client{Transport: tr}
	// The loopback listener, asked without its token, refuses every
	// operation with 401 in the error shape.
	lt, err := openapitest.NewTransport(doc, &http.Transport{})
	if err != nil {
		t.Fatal(err)
	}
	loopback := &http.Client{Transport: lt}
	defer lt.Base.(*http.Transport).CloseIdleConnections()

	do := func(c *http.Client, base string, call openapiCall) []byte {
		t.Helper()
		ctx := context.Background()
		if call.outside {
			ctx = openapitest.OutsideDocument(ctx)
		}
		var body io.Reader
		if call.body != "" {
			body = strings.NewReader(call.body)
		}
		req, err := http.NewRequestWithContext(ctx, call.method, base+call.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if call.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", call.op, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != call.status {
			t.Fatalf("%s: %s %s: got %d %s, want %d", call.op, call.method, call.path, resp.StatusCode, raw, call.status)
		}
		return raw
	}
	good, refused := map[string]bool{}, map[string]bool{}
	run := func(calls ...openapiCall) []byte {
		t.Helper()
		var last []byte
		for _, c := range calls {
			last = do(socket, "http://continuityd", c)
			if c.status == http.StatusOK {
				good[c.op] = true
			} else {
				refused[c.op] = true
			}
		}
		return last
	}

	// The snapshot the agent takes of its tree when it starts watching.
	var snapID string
	testwait.Until(t, func() string { return "no start snapshot" }, func() bool {
		var list struct {
			Snapshots []struct {
				ID string `json:"id"`
			} `json:"snapshots"`
		}
		if err := json.Unmarshal(run(openapiCall{op: "snapshot_list", method: "GET", path: "/v1/snapshots", status: 200}), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Snapshots) > 0 {
			snapID = list.Snapshots[0].ID
		}
		return snapID != ""
	})

	// The log is the snapshots, newest first, each the agent's.
	var log struct {
		Entries []struct {
			Snapshot, Trigger, Who string
		} `json:"entries"`
	}
	if err := json.Unmarshal(run(openapiCall{op: "log", method: "GET", path: "/v1/log", status: 200}), &log); err != nil ||
		len(log.Entries) == 0 || log.Entries[0].Snapshot != snapID || log.Entries[0].Trigger == "" || log.Entries[0].Who == "" {
		t.Errorf("the log is not the snapshots (newest %s): %+v %v", snapID, log, err)
	}

	run(
		openapiCall{op: "checkpoint", method: "POST", path: "/v1/continuity/checkpoint",
			body: `{"focus":"the parser","working_state":{"next_action":"fix it","result_ref":null},"commitments":{"open":[{"title":"ship the fix"}]}}`, status: 200},
		openapiCall{op: "checkpoint", method: "POST", path: "/v1/continuity/checkpoint?sync=1", body: `{"focus":"the parser, synced"}`, status: 200},
		openapiCall{op: "checkpoint", method: "POST", path: "/v1/continuity/checkpoint", body: `{"focus":7}`, status: 400, outside: true},
		openapiCall{op: "checkpoint", method: "POST", path: "/v1/continuity/checkpoint", body: `{}`, status: 400},
		openapiCall{op: "resume", method: "GET", path: "/v1/continuity?peek=1", status: 200},
		openapiCall{op: "resume", method: "GET", path: "/v1/continuity", status: 200},
		openapiCall{op: "resume", method: "GET", path: "/v1/continuity?agent=nobody", status: 404},
		openapiCall{op: "resume", method: "GET", path: "/v1/continuity?peek=maybe", status: 400, outside: true},
		openapiCall{op: "signal", method: "POST", path: "/v1/signals", body: `{"kind":"context","used_fraction":0.5}`, status: 200},
		openapiCall{op: "signal", method: "POST", path: "/v1/signals", body: `{"kind":"context","used_fraction":"half"}`, status: 400, outside: true},
		openapiCall{op: "wait", method: "GET", path: "/v1/continuity/wait?max_seconds=1&after=0", status: 200},
		openapiCall{op: "wait", method: "GET", path: "/v1/continuity/wait?max_seconds=91", status: 400, outside: true},
		openapiCall{op: "capsule_get", method: "GET", path: "/v1/capsule", status: 404},
		openapiCall{op: "capsule_seal", method: "POST", path: "/v1/capsule/seal", body: `{"next":"fix the parser"}`, status: 200},
		openapiCall{op: "capsule_seal", method: "POST", path: "/v1/capsule/seal", body: `{"next":3}`, status: 400, outside: true},
		openapiCall{op: "capsule_get", method: "GET", path: "/v1/capsule", status: 200},
		openapiCall{op: "capsule_put", method: "PUT", path: "/v1/capsule", body: `{"goal":3}`, status: 400, outside: true},
		openapiCall{op: "deadletter_list", method: "GET", path: "/v1/deadletter", status: 200},
		openapiCall{op: "deadletter_list", method: "GET", path: "/v1/deadletter?upstream=nope", status: 404},
		openapiCall{op: "deadletter_retry", method: "POST", path: "/v1/deadletter/retry", body: `{"upstream":"local"}`, status: 200},
		openapiCall{op: "deadletter_retry", method: "POST", path: "/v1/deadletter/retry", body: `{"upstream":"local","sequence":1}`, status: 400, outside: true},
		openapiCall{op: "deadletter_discard", method: "POST", path: "/v1/deadletter/discard", body: `{"upstream":"local","seq":0}`, status: 200},
		openapiCall{op: "deadletter_discard", method: "POST", path: "/v1/deadletter/discard", body: `{"upstream":"local","seq":99}`, status: 404},
		openapiCall{op: "snapshot_list", method: "GET", path: "/v1/snapshots?agent=nobody", status: 404},
		openapiCall{op: "log", method: "GET", path: "/v1/log?agent=nobody", status: 404},
		openapiCall{op: "snapshot_show", method: "GET", path: "/v1/snapshots/" + snapID, status: 200},
		openapiCall{op: "snapshot_show", method: "GET", path: "/v1/snapshots/" + snapID + "?diff=1", status: 200},
		openapiCall{op: "snapshot_show", method: "GET", path: "/v1/snapshots/deadbeef", status: 404},
		openapiCall{op: "snapshot_show", method: "GET", path: "/v1/snapshots/nosuchsnapshot", status: 400},
		openapiCall{op: "snapshot_restore", method: "POST", path: "/v1/snapshots/" + snapID + "/restore", body: `{"dry_run":true,"all":true}`, status: 200},
		openapiCall{op: "snapshot_restore", method: "POST", path: "/v1/snapshots/" + snapID + "/restore", body: `{"dry_run":"yes"}`, status: 400, outside: true},
		openapiCall{op: "snapshot_take", method: "POST", path: "/v1/snapshots", body: `{"message":"before the rewrite"}`, status: 200},
		openapiCall{op: "snapshot_take", method: "POST", path: "/v1/snapshots", body: `{"message":1}`, status: 400, outside: true},
		openapiCall{op: "status", method: "GET", path: "/v1/status", status: 200},
		openapiCall{op: "fleet", method: "GET", path: "/v1/fleet", status: 404},
		openapiCall{op: "fleet_take", method: "POST", path: "/v1/fleet/take", status: 404},
		openapiCall{op: "fleet_take", method: "POST", path: "/v1/fleet/take?force=maybe", status: 400, outside: true},
		openapiCall{op: "healthz", method: "GET", path: "/healthz", status: 200},
		openapiCall{op: "metrics", method: "GET", path: "/metrics", status: 200},
		openapiCall{op: "openapi", method: "GET", path: "/v1/openapi.json", status: 200},
		openapiCall{op: "ui_login", method: "POST", path: "/v1/ui/login", status: 200},
		openapiCall{op: "ui_revoke", method: "POST", path: "/v1/ui/revoke", status: 200},
	)
	// A loss (a.go, held by the start snapshot, removed: outside a
	// repository nothing is committed; the quiet work record's snapshot
	// sees it), brought back by its id.
	if err := os.Remove(filepath.Join(wd, "a.go")); err != nil {
		t.Fatal(err)
	}
	var lostID string
	testwait.Until(t, func() string { return "no work_lost after a.go was removed" }, func() bool {
		var r struct {
			WorkLost []struct {
				ID string `json:"id"`
			} `json:"work_lost"`
		}
		if err := json.Unmarshal(run(openapiCall{op: "resume", method: "GET", path: "/v1/continuity?peek=1&local=1", status: 200}), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.WorkLost) > 0 {
			lostID = r.WorkLost[0].ID
		}
		return lostID != ""
	})
	run(
		openapiCall{op: "work_lost_restore", method: "POST", path: "/v1/continuity/work_lost/" + lostID + "/restore", body: `{"dry_run":true}`, status: 200},
		openapiCall{op: "work_lost_restore", method: "POST", path: "/v1/continuity/work_lost/wl-000000000000/restore", status: 404},
		openapiCall{op: "work_lost_restore", method: "POST", path: "/v1/continuity/work_lost/" + lostID + "/restore", body: `{"dry_run":"yes"}`, status: 400, outside: true},
	)

	// The version journal: a file's versions, one restored (a dry run).
	if err := os.WriteFile(filepath.Join(wd, "v.go"), []byte("package v\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var version string
	testwait.Until(t, func() string { return "the version journal lists no version of v.go" }, func() bool {
		var h struct {
			Versions []struct {
				ID string `json:"id"`
			} `json:"versions"`
		}
		if err := json.Unmarshal(run(openapiCall{op: "history", method: "GET", path: "/v1/history?path=v.go", status: 200}), &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Versions) > 0 {
			version = h.Versions[0].ID
		}
		return version != ""
	})
	run(
		openapiCall{op: "history", method: "GET", path: "/v1/history", status: 400},
		openapiCall{op: "history_restore", method: "POST", path: "/v1/history/restore", body: `{"path":"v.go","version":"` + version + `","dry_run":true}`, status: 200},
		openapiCall{op: "history_restore", method: "POST", path: "/v1/history/restore", body: `{"path":"v.go","version":"v999999"}`, status: 404},
	)

	// The capsule sealed above, stored again as it came back.
	var rec struct {
		Capsule json.RawMessage `json:"capsule"`
	}
	if err := json.Unmarshal(run(openapiCall{op: "capsule_get", method: "GET", path: "/v1/capsule", status: 200}), &rec); err != nil || len(rec.Capsule) == 0 {
		t.Fatalf("the capsule record has no capsule: %v", err)
	}
	run(openapiCall{op: "capsule_put", method: "PUT", path: "/v1/capsule", body: string(rec.Capsule), status: 200})

	for _, op := range []string{"status", "healthz", "metrics", "openapi"} {
		path := map[string]string{"status": "/v1/status", "healthz": "/healthz", "metrics": "/metrics", "openapi": "/v1/openapi.json"}[op]
		do(loopback, "http://"+cfg.Daemon.Listen, openapiCall{op: op, method: "GET", path: path, status: http.StatusUnauthorized})
		refused[op] = true
	}
	for _, op := range []string{"ui_login", "ui_revoke"} {
		do(loopback, "http://"+cfg.Daemon.Listen, openapiCall{op: op, method: "POST", path: "/v1/" + strings.Replace(op, "_", "/", 1), status: http.StatusUnauthorized})
		refused[op] = true
	}

	// Every operation of the document was called both ways.
	var d struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	// GET /v1/fleet and POST /v1/fleet/take answer 200 only with a fleet
	// upstream, a NATS server: cmd/continuityd's TestFleetResumeAnywhere
	// and TestFleetTakeOver run one and check those answers against this
	// document.
	noGood := map[string]bool{"fleet": true, "fleet_take": true}
	var missing []string
	for _, methods := range d.Paths {
		for _, o := range methods {
			if !good[o.OperationID] && !noGood[o.OperationID] {
				missing = append(missing, o.OperationID+" (good)")
			}
			if !refused[o.OperationID] {
				missing = append(missing, o.OperationID+" (refused)")
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations of the document not exercised: %v", missing)
	}

	// The check can fail: with the status answer's pid described as a
	// string, the live answer is caught.
	var wrong map[string]any
	if err := json.Unmarshal(doc, &wrong); err != nil {
		t.Fatal(err)
	}
	status200 := wrong["paths"].(map[string]any)["/v1/status"].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any)["200"]
	schema := status200.(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	schema["properties"].(map[string]any)["pid"] = map[string]any{"type": "string"}
	wrongDoc, err := json.Marshal(wrong)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := openapitest.NewTransport(wrongDoc, td.http.Transport)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://continuityd/v1/status", nil)
	if resp, err := (&http.Client{Transport: wt}).Do(req); err == nil {
		resp.Body.Close()
		t.Error("a status answer whose pid is a number passed a document that says it is a string")
	} else if !strings.Contains(err.Error(), "pid") {
		t.Errorf("the mismatch does not name the field: %v", err)
	}
}

// checkDocsOpenAPI compares docs/openapi.json with what the daemon
// serves; -update rewrites it.
func checkDocsOpenAPI(t *testing.T, served []byte) {
	t.Helper()
	path := filepath.Join("..", "docs", "openapi.json")
	if *update {
		if err := os.WriteFile(path, served, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, served) {
		t.Errorf("docs/openapi.json is not what GET /v1/openapi.json serves: run go test ./daemon -run TestOpenAPI -update")
	}
}
