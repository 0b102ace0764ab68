package daemoncmd

import (
	"slices"
	"testing"

	"github.com/continuityd/continuityd/internal/cli"
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
