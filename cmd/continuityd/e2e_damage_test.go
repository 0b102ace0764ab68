package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// damageWorkspace is a config with two agents: "builder", whose files the
// tests damage, and "other", which must keep running.
func damageWorkspace(t *testing.T) *workspace {
	t.Helper()
	w := newWorkspace(t)
	for _, a := range []string{"builder", "other"} {
		os.MkdirAll(filepath.Join(w.dir, "work-"+a), 0o755)
	}
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\nshutdown_timeout = \"5s\"\n\n"+
		"[[agent]]\nname = \"builder\"\nworkdir = %q\n\n[[agent]]\nname = \"other\"\nworkdir = %q\n",
		w.state, w.socket, filepath.Join(w.dir, "work-builder"), filepath.Join(w.dir, "work-other"))
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// killWhileWriting starts the daemon, has writers checkpoint "builder"
// until it is killed with SIGKILL mid-stream, and repeats until the log
// holds at least min records bbolt has not checkpointed. It returns the
// highest seq answered 200 and what the log holds.
func killWhileWriting(t *testing.T, w *workspace, min int) (uint64, *residency.Inspection) {
	t.Helper()
	var maxSeq uint64
	for try := 0; try < 10; try++ {
		p := startProc(t, w.socket, nil, "run", "--config", w.config)
		var mu sync.Mutex
		var answered atomic.Int64 // writes answered 200 in this try
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for wr := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := p.client()
				defer c.CloseIdleConnections()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					code, ans, err := post(c, "/v1/continuity/checkpoint?agent=builder",
						map[string]any{"focus": fmt.Sprintf("writer %d step %d", wr, i)})
					if err != nil || code != 200 {
						return // killed
					}
					mu.Lock()
					maxSeq = max(maxSeq, uint64(ans["seq"].(float64)))
					mu.Unlock()
					answered.Add(1)
				}
			}()
		}
		// Killed once the writers are well under way (more with each try,
		// so the log outgrows bbolt's checkpoints), never after a fixed time.
		want := int64(50 * (try + 1))
		testwait.Until(t, func() string {
			return fmt.Sprintf("try %d: %d writes answered, want %d: %s", try, answered.Load(), want, p.stderr)
		}, func() bool { return answered.Load() >= want })
		p.kill()
		close(stop)
		wg.Wait()
		in, err := residency.Inspect(filepath.Join(w.state, "agents", "builder"))
		if err != nil {
			t.Fatal(err)
		}
		if in.Damage != nil {
			t.Fatalf("a plain SIGKILL left damage: %v", in.Damage)
		}
		if len(in.Unapplied) >= min {
			return maxSeq, in
		}
	}
	t.Fatalf("after 10 tries the log never held %d records bbolt lacked (the last try answered up to seq %d)", min, maxSeq)
	return 0, nil
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	f.ReadAt(b, int64(off))
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedAgentIsRefusedLoudly: each kind of damage to the write-ahead
// log of an agent whose acknowledged writes bbolt had not caught up with
// makes the daemon refuse that agent (naming the file, keeping it), serve
// the other agent, and go on only once `continuityd recover --accept-loss`
// is run, with numbering past every seq it had answered.
func TestDamagedAgentIsRefusedLoudly(t *testing.T) {
	t.Parallel()
	wal := func(w *workspace) string { return filepath.Join(w.state, "agents", "builder", residency.WALFile) }
	cases := []struct {
		name   string
		file   string
		damage func(t *testing.T, w *workspace, in *residency.Inspection)
	}{
		{"bit flip early", residency.WALFile, func(t *testing.T, w *workspace, in *residency.Inspection) {
			flipByte(t, wal(w), in.Unapplied[0].Offset+20)
		}},
		{"bit flip deep", residency.WALFile, func(t *testing.T, w *workspace, in *residency.Inspection) {
			r := in.Unapplied[len(in.Unapplied)-3]
			flipByte(t, wal(w), r.Offset+r.Length/2)
		}},
		{"truncated", residency.WALFile, func(t *testing.T, w *workspace, in *residency.Inspection) {
			if err := os.Truncate(wal(w), int64(in.Unapplied[1].Offset)); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeroed", residency.WALFile, func(t *testing.T, w *workspace, in *residency.Inspection) {
			fi, _ := os.Stat(wal(w))
			if err := os.WriteFile(wal(w), make([]byte, fi.Size()), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", residency.WALFile, func(t *testing.T, w *workspace, in *residency.Inspection) {
			if err := os.Remove(wal(w)); err != nil {
				t.Fatal(err)
			}
		}},
		{"bbolt page", residency.File, func(t *testing.T, w *workspace, in *residency.Inspection) {
			path := filepath.Join(w.state, "agents", "builder", residency.File)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := 2 * 4096; i < len(data); i++ { // every page but the two meta pages
				data[i] = byte(i*13 + 5)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := damageWorkspace(t)
			answered, in := killWhileWriting(t, w, 4)
			c.damage(t, w, in)
			damaged := filepath.Join(w.state, "agents", "builder", c.file)
			before, _ := os.ReadFile(damaged)

			p := startProc(t, w.socket, nil, "run", "--config", w.config)
			cl := p.client()
			resp, err := cl.Get("http://d/v1/continuity?agent=builder")
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != 503 || !strings.Contains(body, "AGENT_DAMAGED") || !strings.Contains(body, damaged) ||
				!strings.Contains(body, "--accept-loss") {
				t.Fatalf("the damaged agent answered %d %s", resp.StatusCode, body)
			}
			if code, _, err := post(cl, "/v1/continuity/checkpoint?agent=other", map[string]any{"focus": "still here"}); err != nil || code != 200 {
				t.Fatalf("the other agent: %d %v", code, err)
			}
			if log := p.stderr.String(); !strings.Contains(log, "agent refused") || !strings.Contains(log, damaged) {
				t.Fatalf("the log does not name the refused agent's file:\n%s", log)
			}
			if after, _ := os.ReadFile(damaged); !bytes.Equal(before, after) {
				t.Fatal("the damaged file was changed")
			}
			code, out, _ := cli(t, nil, "", "status", "--config", w.config)
			if code != 0 || !strings.Contains(out, "builder is not served") {
				t.Fatalf("status %d:\n%s", code, out)
			}

			mresp, err := cl.Get("http://d/metrics")
			if err != nil {
				t.Fatal(err)
			}
			if m := readAll(t, mresp); !strings.Contains(m, `continuityd_agent_damaged{agent="builder"} 1`) {
				t.Fatal("no continuityd_agent_damaged metric for the refused agent")
			}
			// A hook event for the refused agent waits in the spool.
			env := []string{"CONTINUITYD_SOCKET=" + w.socket, "CONTINUITYD_STATE_DIR=" + w.state}
			pre := `{"session_id":"s1","transcript_path":"/tmp/t.jsonl","cwd":"` + filepath.Join(w.dir, "work-builder") +
				`","hook_event_name":"PreCompact","trigger":"auto"}`
			if code, _, errOut := cli(t, env, pre, "hook"); code != 0 {
				t.Fatalf("hook: %d %s", code, errOut)
			}
			if spooled, _ := filepath.Glob(filepath.Join(w.state, "spool", "*.json")); len(spooled) != 1 {
				t.Fatalf("the refused agent's hook event was not spooled: %v", spooled)
			}

			code, out, errOut := cli(t, nil, "", "recover", "--config", w.config, "--agent", "builder")
			if code != 1 || !strings.Contains(out, "is damaged") || !strings.Contains(out, damaged) {
				t.Fatalf("recover without --accept-loss: %d\n%s%s", code, out, errOut)
			}
			code, out, errOut = cli(t, nil, "", "recover", "--config", w.config, "--agent", "builder", "--accept-loss")
			if code != 0 || !strings.Contains(out, "moved aside") && c.name != "deleted" || !strings.Contains(out, "asked the daemon") {
				t.Fatalf("recover --accept-loss: %d\n%s%s", code, out, errOut)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, ans, err := post(cl, "/v1/continuity/checkpoint?agent=builder", map[string]any{"focus": "after the loss"})
				if err == nil && code == 200 {
					seq := uint64(ans["seq"].(float64))
					if c.file == residency.WALFile && seq <= answered {
						t.Fatalf("seq %d after the loss repeats one answered before (up to %d)", seq, answered)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the agent never came back after the reload: %d %v %v\n%s", code, ans, err, p.stderr)
				}
				time.Sleep(50 * time.Millisecond)
			}
			for n := 0.0; n != 1; {
				n = get(t, cl, "/v1/continuity?agent=builder&peek=1")["context"].(map[string]any)["compactions"].(float64)
				if n != 1 && time.Now().After(deadline) {
					t.Fatalf("the spooled hook event was not stored once the agent was back: compactions %v", n)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if p.terminate(t) != 0 {
				t.Fatalf("exit after recovery:\n%s", p.stderr)
			}
		})
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
