package snapshot

import (
	"testing"

	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
)

// A snapshot moves the view stamp before Take returns: a resume's kept
// view (it names the newest snapshot) is made again after it.
func TestTakeMovesTheViewStamp(t *testing.T) {
	wd := t.TempDir()
	write(t, wd, "a.txt", "one\n")
	s := newStore(t, wd, Options{})
	before := viewstamp.Now()
	mustTake(t, s, "start", 1)
	if viewstamp.Now() == before {
		t.Fatal("a snapshot was taken and the view stamp did not move")
	}
}
