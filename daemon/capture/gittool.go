package capture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/gittool"
)

// gitFindTimeout bounds finding git (a `git --version`) when the agent
// has no snapshot store to share its git with.
const gitFindTimeout = 10 * time.Second

// gitCredential is who git runs as on the agent's repository (the
// work-lost checks, the subjects of packed commits): nil, the daemon's
// own user; when the daemon has more rights than the workdir's owner, the
// owner (Options.GitAs), so that git reads that repository with no more
// rights than its owner has.
func (c *Capture) gitCredential() *gittool.Credential { return c.o.GitAs }

// gitTool is the git the capture runs on the agent's repository: the
// snapshot store's when there is one, else the one found on PATH; nil
// when there is none. It runs git as gitCredential and reads the
// repository's configuration itself (Refuses) through Options.Opener:
// both with the owner's rights.
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
			c.git = t.As(c.gitCredential()).ReadsWith(c.o.Opener)
		}
	})
	return c.git
}

// noteRefused logs, once per reason, a repository of the workdir that git
// is not run on (gitwatch.Repo.Refused): commitsHealth shows it.
func (c *Capture) noteRefused(root, why string) {
	if why == "" {
		return
	}
	c.mu.Lock()
	if c.refusedLogged == nil {
		c.refusedLogged = map[string]string{}
	}
	seen := c.refusedLogged[root] == why
	c.refusedLogged[root] = why
	c.mu.Unlock()
	if !seen {
		c.log.Warn("git is not run on this repository: its commits read from packs are reported without their subject, and degraded [\"commits\"] says why",
			"repo", root, "why", why)
	}
}

// commitsProblem says why git is not run on a repository of the workdir
// ("" when it is run on each): the commits' receipts then lack subjects.
func (c *Capture) commitsProblem() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for root, r := range c.repos {
		if why := r.Refused(); why != "" {
			out = append(out, fmt.Sprintf("%s: %s", root, why))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// commitsHealth is the commits' part of Health: off while no repository
// is known in the workdir, ok, or degraded with the repositories git is
// not run on.
func (c *Capture) commitsHealth() Component {
	h := Component{Name: "commits", State: StateOff}
	c.mu.Lock()
	repos := len(c.repos)
	c.mu.Unlock()
	if c.o.Workdir == "" || !c.o.Watch.Enabled || repos == 0 {
		return h
	}
	if why := c.commitsProblem(); why != "" {
		h.State, h.Detail = StateDegraded, "commits read from packs are reported without their subject: "+why
		return h
	}
	h.State = StateOK
	return h
}

// workLostProblem is why the last check for uncommitted work that
// vanished failed ("" when it worked, or none ran yet).
func (c *Capture) workLostProblem() string {
	c.lost.mu.Lock()
	defer c.lost.mu.Unlock()
	return c.lost.failed
}

// workLostHealth is the work-lost checks' part of Health: off without
// snapshots, degraded with the reason while the checks fail (git refuses
// the repository, git is missing or too old for it).
func (c *Capture) workLostHealth() Component {
	h := Component{Name: "work_lost", State: StateOff}
	if c.snapshotter() == nil {
		return h
	}
	if why := c.workLostProblem(); why != "" {
		h.State, h.Detail = StateDegraded, "uncommitted work that vanishes is not found: "+why
		return h
	}
	h.State = StateOK
	return h
}
