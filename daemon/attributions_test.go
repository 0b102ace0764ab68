package daemon

import "testing"

// Agents on one workdir share its ledger; another workdir has its own, and
// an agent without a workdir has none.
func TestWorkdirLedgersOnePerWorkdir(t *testing.T) {
	var l workdirLedgers
	a, b, c := l.For("/srv/work"), l.For("/srv/work/"), l.For("/srv/other")
	if a == nil || a != b {
		t.Fatalf("two agents on /srv/work got ledgers %p and %p, want one", a, b)
	}
	if c == nil || c == a {
		t.Fatalf("/srv/other got %p, want its own (not %p)", c, a)
	}
	if l.For("") != nil {
		t.Fatal("an agent without a workdir got a ledger")
	}
}
