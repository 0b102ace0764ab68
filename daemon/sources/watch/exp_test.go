package watch

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExpWatch(t *testing.T) {
	dir := os.Getenv("EXP_WATCH_DIR")
	if dir == "" {
		t.Skip()
	}
	w, err := New(Options{Root: dir, Quiet: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	var c0 time.Duration
	go func() { <-w.Ready(); c0 = cpuNow(); os.WriteFile(dir+".ready", nil, 0o644) }()
	n := 0
	w.Run(ctx, func(s Summary) { n += s.Count })
	fmt.Printf("paths %d events %d cpu %v\n", n, w.Stats().Events, cpuNow()-c0)
}
