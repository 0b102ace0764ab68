package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
)

// TestResumeShowsEveryAcknowledgedWrite: a resume asked for right after a
// checkpoint was acknowledged shows that checkpoint, however the answer
// is made (encoded per request or kept ready between commits). Writers
// race each other on one agent, each resuming straight after its own ack:
// the resume's seq is never below the ack's, and a resume with nothing
// committed after the ack shows the ack's own focus. Many rounds, so that
// an answer kept a commit too long is caught (run it under -race).
func TestResumeShowsEveryAcknowledgedWrite(t *testing.T) {
	w := newWorkspace(t)
	p := startProc(t, w.socket, nil, "run", "--config", w.config)
	defer p.kill()
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	type state struct {
		Seq   uint64 `json:"seq"`
		Focus string `json:"focus"`
	}
	call := func(c *http.Client, method, path string, body []byte) (state, error) {
		req, _ := http.NewRequest(method, "http://d"+path, bytes.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			return state{}, err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return state{}, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var s state
		if method == "POST" {
			var ans struct {
				Seq   uint64 `json:"seq"`
				State state  `json:"state"`
			}
			err = json.Unmarshal(raw, &ans)
			s = state{Seq: ans.Seq, Focus: ans.State.Focus}
		} else {
			err = json.Unmarshal(raw, &s)
		}
		return s, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lastSeq uint64 // the highest seq acknowledged so far, across writers
	for wr := range 4 {
		wg.Go(func() {
			c := p.client()
			defer c.CloseIdleConnections()
			for i := range rounds {
				focus := fmt.Sprintf("writer %d round %d", wr, i)
				body, _ := json.Marshal(map[string]any{"focus": focus})
				ack, err := call(c, "POST", "/v1/continuity/checkpoint", body)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lastSeq = max(lastSeq, ack.Seq)
				mu.Unlock()
				path := "/v1/continuity"
				if i%2 == 1 {
					path += "?peek=1" // the reader's answer, which resets nothing
				}
				got, err := call(c, "GET", path, nil)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case got.Seq < ack.Seq:
					t.Errorf("writer %d round %d: resume shows seq %d (focus %q), the write acknowledged before it was seq %d", wr, i, got.Seq, got.Focus, ack.Seq)
					return
				case got.Seq == ack.Seq && got.Focus != focus:
					t.Errorf("writer %d round %d: resume at the acknowledged seq %d shows focus %q, the write set %q", wr, i, got.Seq, got.Focus, focus)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Quiet now: a last resume shows the last acknowledged write exactly.
	c := p.client()
	defer c.CloseIdleConnections()
	got, err := call(c, "GET", "/v1/continuity", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq < lastSeq {
		t.Fatalf("at rest, resume shows seq %d; the last acknowledged write was seq %d", got.Seq, lastSeq)
	}
}
