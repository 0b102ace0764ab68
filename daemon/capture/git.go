package capture

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/sources/gitwatch"
	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/daemonside/viewstamp"
)

// headsFile keeps, per agent, where HEAD stood in each repository of its
// workdir when last checked, so that a restart reports what moved while the
// daemon was down: an agent must hear that HEAD moved or the branch
// switched while it was not looking.
const headsFile = "git-heads.json"

// gitCheck turns what moved in a watched repository (HEAD or a ref, seen by
// the workdir watcher: no polling) into receipts: a commit becomes
// "<repo>@<short-sha> <subject>" with the subject secret-redacted; a branch
// switch or HEAD moved otherwise (reset, rebase, pull) becomes a head move
// in since_last_visit. A repository first seen here (not primed at start)
// is followed from how it was created (gitwatch.Repo.CheckNew).
func (c *Capture) gitCheck(ctx context.Context, dir string) {
	c.mu.Lock()
	if c.repos == nil {
		c.repos = map[string]*gitwatch.Repo{}
	}
	r, known := c.repos[dir]
	c.mu.Unlock()
	if !known {
		var err error
		if r, err = gitwatch.OpenWith(dir, c.gitTool(), c.o.Opener); err != nil {
			if !errors.Is(err, gitwatch.ErrReftable) {
				c.log.Debug("not a repository git receipts can read", "dir", dir, "err", err)
			}
			return
		}
		c.mu.Lock()
		c.repos[dir] = r
		c.mu.Unlock()
		viewstamp.Changed()
	}
	// A repository not primed at start appeared since (git init, git
	// clone): its first check reports the commits made since it appeared,
	// which may already be there when the first event is handled.
	changes, err := r.CheckNew(c.started)
	if err != nil {
		c.log.Debug("git check", "dir", dir, "err", err)
	}
	c.noteRefused(r.Root(), r.Refused())
	c.gitChanges(ctx, r, changes)
}

// gitChanges records what a check of r found, then where r's HEAD stands.
func (c *Capture) gitChanges(ctx context.Context, r *gitwatch.Repo, changes []gitwatch.Change) {
	for _, ch := range changes {
		ch.Subject = c.guard.Redact(ch.Subject)
		var err error
		switch {
		case ch.Kind == gitwatch.KindCommit:
			c.noteCommit(ch.Receipt())
			if s := c.snapshotter(); s != nil {
				s.headMoved(ctx)
			}
			_, err = c.store.AddReceipt(ctx, ch.Receipt(), true)
		case ch.Kind == gitwatch.KindBranchSwitch:
			_, err = c.store.AddHeadMove(ctx, headMove(capsule.HeadBranchSwitch, ch))
		case ch.Kind == gitwatch.KindRefMoved && ch.SHA != "" && ch.Branch == r.Branch():
			// HEAD's own branch moved without a commit on top (another
			// branch moving is not the agent's HEAD).
			_, err = c.store.AddHeadMove(ctx, headMove(capsule.HeadMoved, ch))
		default:
			continue
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("cannot record a git receipt", "err", err)
		}
	}
	if len(changes) > 0 {
		c.saveHeads()
	}
}

// headMove is what since_last_visit shows of ch (its Subject redacted).
func headMove(kind string, ch gitwatch.Change) capsule.HeadMove {
	return capsule.HeadMove{Kind: kind, Repo: ch.Repo, Branch: ch.Branch, PrevBranch: ch.PrevBranch,
		From: shortSHA(ch.PrevSHA), To: shortSHA(ch.SHA), Summary: ch.Receipt()}
}

func shortSHA(sha string) string { return sha[:min(len(sha), 12)] }

// primeGit records where the workdir's repository stands at start, so the
// first commit after it is reported (not taken as the starting point). If
// an earlier run saw it, what moved since (while the daemon was down) is
// reported first.
func (c *Capture) primeGit(ctx context.Context, wd string) {
	r, err := gitwatch.OpenWith(wd, c.gitTool(), c.o.Opener)
	if err != nil {
		return
	}
	var changes []gitwatch.Change
	if h, ok := c.loadHeads()[r.Root()]; ok {
		if changes, err = r.CheckFrom(h); err != nil {
			c.log.Debug("git check", "dir", r.Root(), "err", err)
		}
	} else {
		r.Check()
	}
	c.mu.Lock()
	if c.repos == nil {
		c.repos = map[string]*gitwatch.Repo{}
	}
	c.repos[r.Root()] = r
	c.mu.Unlock()
	viewstamp.Changed()
	c.noteRefused(r.Root(), r.Refused())
	c.gitChanges(ctx, r, changes)
	c.saveHeads()
}

func (c *Capture) loadHeads() map[string]gitwatch.Head {
	m := map[string]gitwatch.Head{}
	raw, err := os.ReadFile(filepath.Join(c.o.Dir, headsFile))
	if err == nil {
		if err := json.Unmarshal(raw, &m); err != nil {
			// Only a report of what moved while away is lost: say so.
			c.log.Warn("cannot read where HEAD stood at the last run; moves made while the daemon was down are not reported",
				"file", filepath.Join(c.o.Dir, headsFile), "err", err)
			return map[string]gitwatch.Head{}
		}
	}
	return m
}

// saveHeads keeps where HEAD stands in each repository checked so far.
func (c *Capture) saveHeads() {
	c.mu.Lock()
	repos := maps.Clone(c.repos)
	c.mu.Unlock()
	m := make(map[string]gitwatch.Head, len(repos))
	for _, r := range repos {
		if h := r.Head(); h != (gitwatch.Head{}) {
			m[r.Root()] = h
		}
	}
	raw, _ := json.Marshal(m)
	if err := atomicfile.ReplaceFile(filepath.Join(c.o.Dir, headsFile), raw, 0o600); err != nil {
		c.log.Debug("cannot save where HEAD stands", "err", err)
	}
}
