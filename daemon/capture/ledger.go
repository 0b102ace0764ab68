package capture

import "github.com/continuityd/continuityd/daemon/attribution"

// AttributionLedger is the workdir's attribution ledger when this
// capture watches the workdir (the watcher's changes are what it credits);
// nil when the workdir is not watched or there is none: the ledger then
// cannot say who changed what.
func (c *Capture) AttributionLedger() *attribution.Ledger {
	if !c.o.Watch.Enabled || c.o.Workdir == "" {
		return nil
	}
	return c.o.Attribution
}
