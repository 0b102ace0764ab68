package daemoncmd

import (
	"bytes"
	"io"
	"sync"

	"github.com/kardianos/service"
)

// serviceLogWriter turns the daemon's log lines into entries of the service
// manager's own log (on Windows, the Application event log, where a
// service's stderr would otherwise go nowhere), at the line's level.
type serviceLogWriter struct {
	mu      sync.Mutex
	log     service.Logger
	partial []byte // a line not ended yet
}

var _ io.Writer = (*serviceLogWriter)(nil)

func (w *serviceLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if line == "" {
			continue
		}
		// slog's text and JSON handlers both name the level this way.
		var err error
		switch {
		case containsLevel(line, "ERROR"):
			err = w.log.Error(line)
		case containsLevel(line, "WARN"):
			err = w.log.Warning(line)
		default:
			err = w.log.Info(line)
		}
		if err != nil {
			return len(p), err
		}
	}
}

func containsLevel(line, level string) bool {
	return bytes.Contains([]byte(line), []byte("level="+level)) || bytes.Contains([]byte(line), []byte(`"level":"`+level+`"`))
}
