package agent

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/statefiles"
)

// writeLastResume leaves the agent's resume on disk for hooks to answer
// with while the daemon is down.
func (a *Agent) writeLastResume() {
	r := a.LocalResume()
	raw, err := json.Marshal(statefiles.LastResume{Agent: a.name, Workdir: a.cfg.Workdir, At: time.Now().UTC(), Markdown: r.Markdown(statefiles.ResumeMarkdownLimit)})
	if err != nil {
		return
	}
	if err := atomicfile.WriteFile(filepath.Join(a.dir, statefiles.LastResumeName), raw, a.modes.LastResume); err != nil {
		a.log.Warn("cannot leave the last resume on disk", "err", err)
	}
}
