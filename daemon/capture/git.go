package capture

import (
	"context"
	"errors"

	"github.com/continuityd/continuityd/daemon/sources/gitwatch"
)

// gitCheck turns what moved in a watched repository (HEAD or a ref, seen by
// the workdir watcher: no polling) into receipts: a commit becomes
// "<repo>@<short-sha> <subject>" with the subject secret-redacted, a branch
// switch is noted. A repository first seen here (not primed at start) is
// followed from how it was created (gitwatch.Repo.CheckNew).
func (c *Capture) gitCheck(ctx context.Context, dir string) {
	c.mu.Lock()
	if c.repos == nil {
		c.repos = map[string]*gitwatch.Repo{}
	}
	r, known := c.repos[dir]
	c.mu.Unlock()
	if !known {
		var err error
		if r, err = gitwatch.Open(dir); err != nil {
			if !errors.Is(err, gitwatch.ErrReftable) {
				c.log.Debug("not a repository git receipts can read", "dir", dir, "err", err)
			}
			return
		}
		c.mu.Lock()
		c.repos[dir] = r
		c.mu.Unlock()
	}
	// A repository not primed at start appeared since (git init, git
	// clone): its first check reports the commits made since it appeared,
	// which may already be there when the first event is handled.
	changes, err := r.CheckNew(c.started)
	if err != nil {
		c.log.Debug("git check", "dir", dir, "err", err)
	}
	for _, ch := range changes {
		if ch.Kind != gitwatch.KindCommit && ch.Kind != gitwatch.KindBranchSwitch {
			continue
		}
		ch.Subject = c.guard.Redact(ch.Subject)
		if ch.Kind == gitwatch.KindCommit {
			c.noteCommit(ch.Receipt())
			if s := c.snapshotter(); s != nil {
				s.headMoved(ctx)
			}
		}
		if _, err := c.store.AddReceipt(ctx, ch.Receipt(), ch.Kind == gitwatch.KindCommit); err != nil && ctx.Err() == nil {
			c.log.Warn("cannot record a git receipt", "err", err)
		}
	}
}

// primeGit records where the workdir's repository stands at start, so the
// first commit after it is reported (not taken as the starting point).
func (c *Capture) primeGit(wd string) {
	r, err := gitwatch.Open(wd)
	if err != nil {
		return
	}
	r.Check()
	c.mu.Lock()
	if c.repos == nil {
		c.repos = map[string]*gitwatch.Repo{}
	}
	c.repos[r.Root()] = r
	c.mu.Unlock()
}
