package agent

import (
	"encoding/json"
	"time"

	"github.com/continuityd/continuityd/internal/statefiles"
)

// writeLastResume leaves the agent's resume on disk for hooks to answer
// with while the daemon is down. It is rebuilt from the residency at every
// start and after every change, so it is replaced atomically (its Slot
// swaps it with the spare beside it) but not synced (two syncs a burst of
// work would pay for a cache): a crash of the machine may leave the one
// before, or a damaged one, which statefiles.ReadLastResume refuses.
func (a *Agent) writeLastResume() {
	r := a.LocalResume()
	raw, err := json.Marshal(statefiles.LastResume{Agent: a.name, Workdir: a.cfg.Workdir, At: time.Now().UTC(), Markdown: r.Markdown(statefiles.ResumeMarkdownLimit)})
	if err != nil {
		return
	}
	if err := a.lastResume.Write(raw); err != nil {
		a.log.Warn("cannot leave the last resume on disk", "err", err)
	}
}
