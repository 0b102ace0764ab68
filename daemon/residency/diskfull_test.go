package residency

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
)

func TestCommitErrorMapsAFullDiskTo507(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&fs.PathError{Op: "write", Path: "/s/residency.db", Err: syscall.ENOSPC}, 507, capsule.CodeDiskFull},
		{fmt.Errorf("write-ahead log: %w", &fs.PathError{Op: "write", Path: "/s/residency.wal", Err: syscall.EDQUOT}), 507, capsule.CodeDiskFull},
		// bbolt's own wording when growing the file: the errno is text only.
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: "/s/residency.db", Err: syscall.ENOSPC}), 507, capsule.CodeDiskFull},
		{&fs.PathError{Op: "write", Path: "/s/residency.db", Err: syscall.EIO}, 500, capsule.CodeInternal},
		{errors.New("something else"), 500, capsule.CodeInternal},
	} {
		ce := commitError("/s/agents/builder", tc.err)
		if ce.Status != tc.status || ce.Code != tc.code || !strings.Contains(ce.Message, "nothing was saved") {
			t.Errorf("%v: got %d %s %q", tc.err, ce.Status, ce.Code, ce.Message)
		}
		if tc.status == 507 && (!strings.Contains(ce.Message, "/s/agents/builder") || !strings.Contains(ce.Message, "Free space")) {
			t.Errorf("%v: the message names neither the directory nor the way out: %q", tc.err, ce.Message)
		}
	}
}

// TestFullDiskRefusesWith507AndKeepsEveryAnsweredWrite fills a real tmpfs
// under a store: each write is answered nil (and is there after a crash and
// a reopen once space is back) or 507 DISK_FULL (and is nowhere).
func TestFullDiskRefusesWith507AndKeepsEveryAnsweredWrite(t *testing.T) {
	dir, err := os.MkdirTemp("", "resfull")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		os.Remove(dir)
		t.Skipf("needs a small real tmpfs to fill: %v (run as root, as CI does)", err)
	}
	t.Cleanup(func() {
		syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
	})
	opts := Options{Agent: "builder", Dir: filepath.Join(dir, "builder"), Upstreams: []string{"a"},
		flushDelay: 10 * time.Millisecond, walSize: 64 << 10}
	full, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { full.Close() })
	ctx := context.Background()
	// Fill the disk.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{64 << 10, 1} {
		for buf := make([]byte, n); ; {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
	f.Close()
	pad := strings.Repeat("p", 2000)
	acked, refused := map[string]bool{}, map[string]bool{}
	for i, inARow := 0, 0; inARow < 3; i++ {
		if i > 2000 {
			t.Fatal("2000 writes on a full disk and no DISK_FULL")
		}
		focus := fmt.Sprintf("write %d %s", i, pad)
		_, err := full.Checkpoint(ctx, &capsule.Checkpoint{Focus: &focus}, capsule.OriginExplicit)
		var ce *capsule.Error
		switch {
		case err == nil:
			acked[focus], inARow = true, 0
		case errors.As(err, &ce) && ce.Status == 507 && ce.Code == capsule.CodeDiskFull:
			refused[focus] = true
			inARow++
		default:
			t.Fatalf("write %d: %v (want nil or 507 DISK_FULL)", i, err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no write landed before the disk was full: the log took none")
	}
	// A clean Close cannot checkpoint on the full disk; it must still
	// return (the log holds every answered write). The bound only catches
	// a hang.
	closed := make(chan error, 1)
	go func() { closed <- full.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close hangs on a full disk")
	}
	os.Remove(filepath.Join(dir, "filler"))
	s := openStore(t, opts)
	ws, err := s.Pending("a", 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for _, w := range ws {
		logged[*w.Checkpoint.Focus] = true
	}
	for f := range acked {
		if !logged[f] {
			t.Fatalf("answered %.10q… is lost", f)
		}
	}
	for f := range refused {
		if logged[f] {
			t.Fatalf("refused %.10q… was kept", f)
		}
	}
	t.Logf("%d answered, %d refused", len(acked), len(refused))
}
