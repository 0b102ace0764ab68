package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/spool"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// lockedBuffer is a log the daemon writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSpoolIsStoredAfterTheSocketAnswers: a spool of more events than one
// pass takes is stored whole, in passes, and only once the daemon answers
// (it used to be stored before the socket was served, so a large spool held
// the socket off at start).
func TestSpoolIsStoredAfterTheSocketAnswers(t *testing.T) {
	cfg := testConfig(t)
	const events = spool.PassFiles + spool.PassFiles/5
	at := time.Now().UTC()
	for i := range events {
		ev := statefiles.SpooledEvent{Agent: "builder", At: at.Add(time.Duration(i)), Signal: capsule.Signal{Kind: "compaction", Phase: "pre", Trigger: "auto"}}
		if err := statefiles.Spool(cfg.Daemon.StateDir, ev); err != nil {
			t.Fatal(err)
		}
	}
	var log lockedBuffer
	td := startDaemonWith(t, cfg, Options{Version: "test", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	// Stored in full, and the pass logged (the line follows the last
	// store, so the resume may show every event a moment before it).
	waitFor(t, 60*time.Second, func() bool {
		return int(td.resume("?peek=1")["context"].(map[string]any)["compactions"].(float64)) == events &&
			strings.Contains(log.String(), "stored hook events spooled")
	})
	out := log.String()
	listening, stored := strings.Index(out, "continuityd listening"), strings.Index(out, "stored hook events spooled")
	if listening < 0 || stored < listening {
		t.Fatalf("the spool was stored before the daemon answered (listening at %d, stored at %d):\n%s", listening, stored, out)
	}
	if !strings.Contains(out, fmt.Sprintf("count=%d", events)) {
		t.Errorf("the log does not count %d stored events:\n%s", events, out)
	}
}
