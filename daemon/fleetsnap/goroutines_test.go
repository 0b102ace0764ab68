package fleetsnap

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestShippingObjectsKeepsGoroutinesFlat: a daemon that ships snapshots
// for weeks puts objects by the hundred thousand; 10,000 puts of small
// objects (what a snapshot's blobs mostly are) to an embedded JetStream
// leave the goroutine count where it was. nats.go's ObjectStore.Put (v1.55.0,
// the newest) left one goroutine waiting for ever about every 300 puts.
func TestShippingObjectsKeepsGoroutinesFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 puts")
	}
	ctx := context.Background()
	c := startFleet(t)
	put := func(i int) {
		t.Helper()
		name := objectName(fmt.Sprintf("%040x", i))
		if err := c.PutObject(ctx, name, fmt.Appendf(nil, "blob %d\n", i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	put(0) // the first finds (or creates) the bucket
	before := runtime.NumGoroutine()
	const objects = 10000
	for i := 1; i <= objects; i++ {
		put(i)
	}
	// Goroutines that end on their own (a timer's) are given time to;
	// a leaked one never ends.
	const slack = 5
	deadline := time.Now().Add(30 * time.Second)
	after := runtime.NumGoroutine()
	for ; after > before+slack && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("goroutines: %d before %d puts, %d after", before, objects, after)
	if after > before+slack {
		t.Fatalf("goroutines: %d before %d puts, %d after: a put leaves goroutines behind:\n%s", before, objects, after, stacksSummary())
	}
	// What was put reads back whole.
	for _, i := range []int{1, objects / 2, objects} {
		got := readObject(t, c, objectName(fmt.Sprintf("%040x", i)))
		if want := fmt.Sprintf("blob %d\n", i); got != want {
			t.Fatalf("object %d reads back as %q; want %q", i, got, want)
		}
	}
}

// stacksSummary counts the goroutines by the function they wait in.
func stacksSummary() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	count := map[string]int{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		lines := strings.Split(string(g), "\n")
		if len(lines) > 1 {
			fn, _, _ := strings.Cut(strings.TrimSpace(lines[1]), "(0x")
			count[fn]++
		}
	}
	var b strings.Builder
	for fn, n := range count {
		fmt.Fprintf(&b, "%6d %s\n", n, fn)
	}
	return b.String()
}

