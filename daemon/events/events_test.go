package events

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every waiter parked on the feed wakes with the event (synctest's Wait
// makes sure that all of them are parked before it is published).
func TestWaitWakesAllWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(8)
		start := f.Cursor()
		var wg sync.WaitGroup
		got := make([][]Event, 3)
		for i := range got {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				got[i], _, _ = f.Wait(ctx, start)
			})
		}
		synctest.Wait()
		f.Publish(Event{Kind: "signal", Summary: "context 80% used"})
		wg.Wait()
		for i, evs := range got {
			if len(evs) != 1 || evs[0].Kind != "signal" || evs[0].ID != 1 {
				t.Fatalf("waiter %d got %+v", i, evs)
			}
		}
	})
}

func TestWaitTimesOutAndWindowIsBounded(t *testing.T) {
	f := New(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if evs, cur, _ := f.Wait(ctx, 0); evs != nil || cur != 0 {
		t.Fatalf("timeout returned %v %d", evs, cur)
	}
	for i := 0; i < 5; i++ {
		f.Publish(Event{Kind: "k"})
	}
	evs, cur, missed := f.Wait(context.Background(), 0)
	if len(evs) != 3 || evs[0].ID != 3 || cur != 5 || missed != 2 {
		t.Fatalf("window: %+v cursor %d missed %d", evs, cur, missed)
	}
	// Past twice the window (when the ring is trimmed) it is still exactly
	// the last three.
	for i := 0; i < 6; i++ {
		f.Publish(Event{Kind: "k"})
	}
	if evs, cur, _ := f.Wait(context.Background(), 0); len(evs) != 3 || evs[0].ID != 9 || evs[2].ID != 11 || cur != 11 {
		t.Fatalf("window after a trim: %+v cursor %d", evs, cur)
	}
	if evs, _, _ := f.Wait(context.Background(), 9); len(evs) != 2 || evs[0].ID != 10 {
		t.Fatalf("after 9: %+v", evs)
	}
	// A cursor from the future (the feed restarted) means "from now".
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if evs, _, _ := f.Wait(ctx2, 99); evs != nil {
		t.Fatalf("future cursor returned %v", evs)
	}
}

// TestUpstreamFloodGivesWayToOwnEvents: an upstream answer of 10,000
// events, some of them huge, leaves the agent's own checkpoint event in the
// feed, reports the upstream events dropped as missed, and holds at most
// RemoteBytes of the upstream's.
func TestUpstreamFloodGivesWayToOwnEvents(t *testing.T) {
	f := New(512)
	before := f.Cursor()
	f.Publish(Event{Kind: "checkpoint", Seq: 7, Summary: "the agent's own"})
	flood := make([]Event, 0, 10000)
	for i := range 10000 {
		raw := json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)
		if i%100 == 0 {
			raw = json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
		}
		flood = append(flood, Remote("qday", raw))
	}
	f.Publish(flood...)
	evs, cursor, missed := f.Wait(context.Background(), before)
	if len(evs) == 0 || evs[0].Kind != "checkpoint" || evs[0].Seq != 7 {
		t.Fatalf("the agent's own event was pushed out by the flood: first of %d is %+v", len(evs), evs[0])
	}
	if cursor != before+10001 || missed != 10001-uint64(len(evs)) || missed == 0 {
		t.Errorf("cursor %d, missed %d with %d events returned", cursor, missed, len(evs))
	}
	held := 0
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxRemoteEvent+1024 {
			t.Fatalf("an event of %d bytes is held", len(b))
		}
		held += len(b)
	}
	if held > RemoteBytes+512<<10 {
		t.Errorf("the feed holds %d bytes of events", held)
	}
	// Own events still go by age among themselves.
	for range 600 {
		f.Publish(Event{Kind: "signal"})
	}
	if evs, _, _ := f.Wait(context.Background(), before); len(evs) != 512 || evs[0].Kind != "signal" {
		t.Errorf("own events over the window: %d kept, first %+v", len(evs), evs[0])
	}
}

// TestRemoteEventIsBoundedAndValidUTF8: an upstream event over the limit is
// replaced by a note of its size; invalid UTF-8 is made valid.
func TestRemoteEventIsBoundedAndValidUTF8(t *testing.T) {
	big := Remote("qday", json.RawMessage(`"`+strings.Repeat("x", MaxRemoteEvent)+`"`))
	if d := big.Data.(map[string]any); d["event"] != nil || !strings.Contains(d["omitted"].(string), "over the limit") {
		t.Errorf("an oversized event is held: %v", d["omitted"])
	}
	bad := Remote("qday", json.RawMessage("{\"text\":\"a\xffb\"}"))
	b, err := json.Marshal(bad)
	if err != nil || !utf8.Valid(b) {
		t.Errorf("event with invalid UTF-8: %q %v", b, err)
	}
}
