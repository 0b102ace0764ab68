package asowner

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/continuityd/continuityd/internal/testkit/testwait"
)

// The test binary is the worker too: the pool starts /proc/self/exe
// worker, as the daemon does, and a fake worker that answers garbage is
// the test binary with "garbage MODE".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case WorkerCommand:
			os.Exit(Main(os.Stderr))
		case garbageCommand:
			os.Exit(garbageMain(os.Args[2]))
		}
	}
	goleak.VerifyTestMain(m)
}

// testOwnerID is whom the worker runs as when the test runs as root.
const testOwnerID = 40001

// ownerTree is a directory the worker's owner owns, and that owner: uid
// 40001 (no passwd entry needed) when the test runs as root, the test's
// own user otherwise.
func ownerTree(t *testing.T) (string, Owner) {
	t.Helper()
	dir, err := os.MkdirTemp("", "asowner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() != 0 {
		return dir, Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	}
	o := Owner{UID: testOwnerID, GID: testOwnerID}
	if err := os.Chown(dir, testOwnerID, testOwnerID); err != nil {
		t.Fatal(err)
	}
	return dir, o
}

// give makes what lies under dir (dir included) the owner's.
func give(t *testing.T, o Owner, paths ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	for _, p := range paths {
		err := filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, int(o.UID), int(o.GID))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// logBuffer is a logger whose lines the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// procStatus is the lines of /proc/PID/status by their key.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// pid is the running worker's process id (0: none).
func (w *Worker) pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		return 0
	}
	return w.cur.cmd.Process.Pid
}

// killWorker SIGKILLs the running worker and waits until it is reaped.
func killWorker(t *testing.T, w *Worker) {
	t.Helper()
	w.mu.Lock()
	cur := w.cur
	w.mu.Unlock()
	if err := cur.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, func() string { return "the killed worker is not reaped" }, func() bool {
		select {
		case <-cur.exited:
			return true
		default:
			return false
		}
	})
}
