package daemoncmd

import (
	"runtime"
	"slices"
	"testing"

	"github.com/continuityd/continuityd/internal/front/cli"
)

// The table's daemon-side entries and the commands this package runs are
// the same: a command left out of either would be listed and not run, or
// run and not listed.
func TestRunsEveryDaemonSideCommand(t *testing.T) {
	want := slices.Sorted(slices.Values(cli.DaemonSideNames()))
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("daemoncmd runs %q; the table's daemon-side commands are %q", got, want)
	}
}

// The table's flags of each daemon-side command, which the front's
// completion scripts offer, are the command's own.
func TestTableFlagsAreTheCommands(t *testing.T) {
	for _, c := range cli.Commands() {
		if c.Run != nil {
			continue
		}
		got, _ := cli.Describe(commands()[c.Name])
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(c.Flags))) {
			t.Errorf("%s: the table lists the flags %q, the command has %q", c.Name, c.Flags, got)
		}
	}
}

// The daemon runs with one processor more than the runtime chose, and
// with exactly the GOMAXPROCS a user set.
func TestSpareProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	chosen := runtime.GOMAXPROCS(0)
	if got := spareProcessor(func(string) string { return "" }); got != chosen+1 || runtime.GOMAXPROCS(0) != chosen+1 {
		t.Fatalf("no GOMAXPROCS set: runs with %d (reported %d), want %d", runtime.GOMAXPROCS(0), got, chosen+1)
	}
	runtime.GOMAXPROCS(3)
	env := func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	}
	if got := spareProcessor(env); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("GOMAXPROCS=3 set: runs with %d (reported %d), want it kept", runtime.GOMAXPROCS(0), got)
	}
}
