package events

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
				got[i], _ = f.Wait(ctx, start)
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
	if evs, cur := f.Wait(ctx, 0); evs != nil || cur != 0 {
		t.Fatalf("timeout returned %v %d", evs, cur)
	}
	for i := 0; i < 5; i++ {
		f.Publish(Event{Kind: "k"})
	}
	evs, cur := f.Wait(context.Background(), 0)
	if len(evs) != 3 || evs[0].ID != 3 || cur != 5 {
		t.Fatalf("window: %+v cursor %d", evs, cur)
	}
	// Past twice the window (when the ring is trimmed) it is still exactly
	// the last three.
	for i := 0; i < 6; i++ {
		f.Publish(Event{Kind: "k"})
	}
	if evs, cur := f.Wait(context.Background(), 0); len(evs) != 3 || evs[0].ID != 9 || evs[2].ID != 11 || cur != 11 {
		t.Fatalf("window after a trim: %+v cursor %d", evs, cur)
	}
	if evs, _ := f.Wait(context.Background(), 9); len(evs) != 2 || evs[0].ID != 10 {
		t.Fatalf("after 9: %+v", evs)
	}
	// A cursor from the future (the feed restarted) means "from now".
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if evs, _ := f.Wait(ctx2, 99); evs != nil {
		t.Fatalf("future cursor returned %v", evs)
	}
}
