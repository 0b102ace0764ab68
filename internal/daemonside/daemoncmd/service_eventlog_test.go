package daemoncmd

import (
	"fmt"
	"reflect"
	"testing"
)

type recordingLogger struct{ entries []string }

func (l *recordingLogger) Error(v ...any) error   { return l.add("E", v) }
func (l *recordingLogger) Warning(v ...any) error { return l.add("W", v) }
func (l *recordingLogger) Info(v ...any) error    { return l.add("I", v) }
func (l *recordingLogger) Errorf(f string, v ...any) error {
	return l.add("E", []any{fmt.Sprintf(f, v...)})
}
func (l *recordingLogger) Warningf(f string, v ...any) error {
	return l.add("W", []any{fmt.Sprintf(f, v...)})
}
func (l *recordingLogger) Infof(f string, v ...any) error {
	return l.add("I", []any{fmt.Sprintf(f, v...)})
}
func (l *recordingLogger) add(level string, v []any) error {
	l.entries = append(l.entries, level+" "+fmt.Sprint(v...))
	return nil
}

// Each log line of the daemon becomes one entry of the service manager's
// log, at its level, whichever format the config chose.
func TestServiceLogWriterKeepsLinesAndLevels(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		rec := &recordingLogger{}
		log := newLogger(&serviceLogWriter{log: rec}, "debug", format)
		log.Info("listening", "socket", "/run/continuityd.sock")
		log.Warn("upstream slow", "upstream", "qday")
		log.Error("cannot start", "err", "boom")
		var levels []string
		for _, e := range rec.entries {
			levels = append(levels, e[:1])
		}
		if !reflect.DeepEqual(levels, []string{"I", "W", "E"}) {
			t.Fatalf("%s: entries %q", format, rec.entries)
		}
	}
	// A line written in pieces is one entry.
	rec := &recordingLogger{}
	w := &serviceLogWriter{log: rec}
	fmt.Fprint(w, "level=INFO msg=a")
	fmt.Fprint(w, "bc\nlevel=ERROR msg=d\n")
	if !reflect.DeepEqual(rec.entries, []string{"I level=INFO msg=abc", "E level=ERROR msg=d"}) {
		t.Fatalf("entries %q", rec.entries)
	}
}
