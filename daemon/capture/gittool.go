package capture

import (
	"context"
	"time"

	"github.com/continuityd/continuityd/internal/gittool"
)

// gitFindTimeout bounds finding git (a `git --version`) when the agent
// has no snapshot store to share its git with.
const gitFindTimeout = 10 * time.Second

// gitCredential is who git runs as on the agent's repository (the
// work-lost checks, the subjects of packed commits): nil, the daemon's
// own user. When the daemon has more rights than the workdir's owner,
// this is where the owner's uid and gid belong, so that git reads that
// repository with no more rights than its owner has.
func (c *Capture) gitCredential() *gittool.Credential { return nil }

// gitTool is the git the capture runs on the agent's repository: the
// snapshot store's when there is one, else the one found on PATH; nil
// when there is none.
func (c *Capture) gitTool() *gittool.Tool {
	c.gitOnce.Do(func() {
		var t *gittool.Tool
		if s := c.snapshotter(); s != nil {
			t = s.store.Tool()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), gitFindTimeout)
			defer cancel()
			var err error
			if t, err = gittool.Find(ctx, ""); err != nil {
				c.log.Debug("no git: commits read from packs are reported without their subject", "err", err)
			}
		}
		if t != nil {
			c.git = t.As(c.gitCredential())
		}
	})
	return c.git
}
