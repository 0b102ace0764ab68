package asowner

import (
	"strings"
	"testing"
	"time"
)

// TestLineLog: a worker's stderr reaches the daemon's log a line at a
// time, each escaped and cut at maxLogLine, and a flood is dropped past
// the burst, the count said in the next line logged.
func TestLineLog(t *testing.T) {
	log, lines := newLog()
	l := newLineLog(log)
	now := time.Now()
	l.now = func() time.Time { return now }
	l.Write([]byte("one line\nhalf a li"))
	l.Write([]byte("ne \x1b[2J\n"))
	l.Write([]byte(strings.Repeat("x", maxLogLine+100) + "tail\nafter\n"))
	got := lines.String()
	for _, want := range []string{`said="one line"`, `said="half a line \\033[2J"`, "x…", `said=after`} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "tail") || strings.Contains(got, strings.Repeat("x", maxLogLine+1)) {
		t.Errorf("a raw control character, or an over-long line whole:\n%s", got)
	}
	for range logBurst * 2 {
		l.Write([]byte("flood\n"))
	}
	if n := strings.Count(lines.String(), "said=flood"); n > logBurst {
		t.Errorf("%d lines of a flood logged, over the burst of %d", n, logBurst)
	}
	now = now.Add(time.Second) // a second of the log's clock: room for more
	l.Write([]byte("calm\n"))
	if !strings.Contains(lines.String(), "lines_dropped_before=") {
		t.Errorf("the dropped lines are not counted:\n%s", lines.String()[max(0, len(lines.String())-500):])
	}
}
