package asowner

import (
	"bytes"
	"log/slog"
	"time"

	"golang.org/x/time/rate"

	"github.com/continuityd/continuityd/internal/termsafe"
)

// A worker's stderr goes into the daemon's log a line at a time: each
// line cut at maxLogLine bytes and its control characters escaped (the
// owner may write anything there through their worker), and no more
// than logBurst lines at once, logRate a second after that (the lines
// dropped are counted in the next one logged).
const (
	maxLogLine = 2048
	logBurst   = 200
	logRate    = 20
)

// lineLog is a worker's stderr.
type lineLog struct {
	log      *slog.Logger
	limit    *rate.Limiter
	now      func() time.Time
	buf      []byte
	skipping bool // the rest of an over-long line
	dropped  int
}

func newLineLog(log *slog.Logger) *lineLog {
	return &lineLog{log: log, limit: rate.NewLimiter(logRate, logBurst), now: time.Now}
}

func (l *lineLog) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.skipping {
			room := maxLogLine - len(l.buf)
			if len(chunk) > room {
				l.buf = append(l.buf, chunk[:room]...)
				l.emit(true)
				l.skipping = true
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !l.skipping {
			l.emit(false)
		}
		l.skipping = false
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLog) emit(cut bool) {
	line := string(l.buf)
	l.buf = l.buf[:0]
	if line == "" {
		return
	}
	if !l.limit.AllowN(l.now(), 1) {
		l.dropped++
		return
	}
	if cut {
		line += "…"
	}
	args := []any{"said", termsafe.Line(line)}
	if l.dropped > 0 {
		args = append(args, "lines_dropped_before", l.dropped)
		l.dropped = 0
	}
	l.log.Info("the owner's worker", args...)
}
