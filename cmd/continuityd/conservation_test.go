package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/continuityd/continuityd/upstream/qday"
	"github.com/continuityd/continuityd/upstream/qdaytest"
)

// TestConservationUnderKillsAndFaults: a writer sends thousands of
// checkpoints (most with a decide, so they cannot be coalesced) while the
// daemon is SIGKILLed and restarted at random moments and the fake Q-Day
// fails about 30% of calls. At the end every write answered 200 is at the
// fake (duplicates allowed), in order, and in no window did the fake see
// more calls than rate × t + burst.
func TestConservationUnderKillsAndFaults(t *testing.T) {
	const (
		rate, burst = 300.0, 20
		minWrites   = 2000
		minKills    = 10
	)
	fake := qdaytest.New(qdaytest.Options{Token: "conservation-token", Rate: rate, Burst: burst,
		RetryAfter: qdaytest.RetryAfterNone, Seed: 7})
	defer fake.Close()
	fake.SetFailRate(0.3)

	dir, err := os.MkdirTemp("", "cdcons")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock, cfgPath := filepath.Join(dir, "d.sock"), filepath.Join(dir, "c.toml")
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
socket = %q
shutdown_timeout = "2s"

[[agent]]
name = "builder"
upstreams = ["qday"]

[upstream.qday]
kind = "qday"
url = %q
token_env = "CD_CONSERVATION_TOKEN"
rate = %v
burst = %d
timeout = "2s"

[outbox]
min_backoff = "10ms"
max_backoff = "100ms"
`, filepath.Join(dir, "state"), sock, fake.URL(), rate, burst)
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	env := []string{"CD_CONSERVATION_TOKEN=conservation-token"}

	var mu sync.Mutex
	p := startProc(t, sock, env, "run", "--config", cfgPath)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer client.CloseIdleConnections()

	var kills atomic.Int32
	acked := map[uint64]bool{} // seq → has a decide
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the writer
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := map[string]any{"focus": fmt.Sprint("focus ", i)}
			decide := i%5 != 0 // four in five cannot be coalesced
			if decide {
				body["decide"] = map[string]any{"chosen": fmt.Sprint("choice ", i), "because": "a write answered 200 must reach the upstream"}
			}
			status, m, err := post(client, "/v1/continuity/checkpoint", body)
			seq, whole := m["seq"].(float64)
			if err != nil || status != 200 || !whole {
				// The daemon is down or restarting, or was killed while
				// answering (a cut-off answer tells the writer nothing).
				time.Sleep(5 * time.Millisecond)
				continue
			}
			mu.Lock()
			acked[uint64(seq)] = decide
			mu.Unlock()
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= minWrites && int(kills.Load()) >= minKills {
			break
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		mu.Lock()
		p.kill()
		kills.Add(1)
		mu.Unlock()
		p = startProc(t, sock, env, "run", "--config", cfgPath)
	}
	close(stop)
	<-done

	// Everything acknowledged reaches the fake once the daemon runs on.
	var maxSeq uint64
	for s := range acked {
		maxSeq = max(maxSeq, s)
	}
	first := map[uint64]int{} // seq → index of the first applied call covering it
	deadline := time.Now().Add(90 * time.Second)
	for {
		clear(first)
		for i, req := range fake.Accepted() {
			from, to, ok := parseSeqs(req.Header.Get(qday.SeqsHeader))
			if !ok {
				t.Fatalf("applied call without %s: %+v", qday.SeqsHeader, req.Header)
			}
			if !strings.HasSuffix(req.IdempotencyKey, "-"+strconv.FormatUint(to, 10)) {
				t.Fatalf("call covering %d-%d carries key %s", from, to, req.IdempotencyKey)
			}
			for s := from; s <= to; s++ {
				if _, seen := first[s]; !seen {
					first[s] = i
				}
			}
		}
		missing := 0
		for s := range acked {
			if _, ok := first[s]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged writes never reached the fake", missing, len(acked))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// In order: a later write is never first seen before an earlier one.
	prevSeq, prevIdx := uint64(0), -1
	for s := uint64(1); s <= maxSeq; s++ {
		if _, ok := acked[s]; !ok {
			continue
		}
		if first[s] < prevIdx {
			t.Fatalf("write %d reached the fake (call %d) before write %d (call %d)", s, first[s], prevSeq, prevIdx)
		}
		prevSeq, prevIdx = s, first[s]
	}
	// Never faster than the limit, in any window. The fake stamps a call
	// when its handler starts, which on a loaded machine can bunch calls
	// the daemon spaced out by a few milliseconds; 10 ms of slack covers
	// that stamping jitter and nothing else.
	const jitter = 10 * time.Millisecond
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second} {
		limit := int(rate*(w+jitter).Seconds()) + burst
		if got := fake.MaxInWindow(w); got > limit {
			t.Fatalf("%d calls in a %v window; the limit allows %d", got, w, limit)
		}
	}
	reqs := fake.Requests()
	faulted := 0
	for _, r := range reqs {
		if r.Fault != "" {
			faulted++
		}
	}
	t.Logf("%d writes acknowledged over %d kills; %d upstream calls, %d faulted (%.0f%%), %d applied",
		len(acked), kills.Load(), len(reqs), faulted, 100*float64(faulted)/float64(len(reqs)), len(fake.Accepted()))
	p.terminate(t)
}

func parseSeqs(h string) (from, to uint64, ok bool) {
	a, b, isRange := strings.Cut(h, "-")
	from, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	to = from
	if isRange {
		if to, err = strconv.ParseUint(b, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return from, to, true
}
