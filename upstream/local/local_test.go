package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

func TestArchiveAppendsFlushesAndDeduplicates(t *testing.T) {
	dir := t.TempDir()
	a := New("local", func(string) string { return dir })
	defer a.Close()
	ctx := context.Background()
	day1 := time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	focus := "f"
	ws := []capsule.Write{
		{Seq: 1, Kind: capsule.WriteCheckpoint, At: day1, IdempotencyKey: "cd-x-1", Checkpoint: &capsule.Checkpoint{Focus: &focus}},
		{Seq: 2, Kind: capsule.WriteCapsule, At: day2, IdempotencyKey: "cd-x-2", Capsule: &capsule.Capsule{Version: "1"}},
	}
	for _, w := range ws {
		if err := a.Deliver(ctx, "builder", w); err != nil {
			t.Fatal(err)
		}
	}
	// A redelivery after a crash appends the same write again.
	if err := a.Deliver(ctx, "builder", ws[1]); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx, "builder"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"2026-11-29.jsonl", "2026-11-30.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, ArchiveDir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A torn last line (a crash mid-append) is skipped.
	f, _ := os.OpenFile(filepath.Join(dir, ArchiveDir, "2026-11-30.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":3,"kind":"checkp`)
	f.Close()
	got, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || *got[0].Checkpoint.Focus != "f" || got[1].IdempotencyKey != "cd-x-2" {
		t.Fatalf("archive: %+v", got)
	}
}

func TestArchiveDeliverFailsWhenTheDirectoryCannotBeMade(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ArchiveDir), []byte("in the way"), 0o600)
	a := New("local", func(string) string { return dir })
	defer a.Close()
	if err := a.Deliver(context.Background(), "builder", capsule.Write{Seq: 1, At: time.Now()}); err == nil {
		t.Fatal("delivered into a file")
	}
}
