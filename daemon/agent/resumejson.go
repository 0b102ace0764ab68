package agent

import (
	"context"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/residency"
)

// ResumeJSON is Resume as its answer's bytes (what a json.Encoder without
// HTML escaping writes, trailing newline included), appended to buf. The
// residency's part comes encoded from the answer it keeps ready for the
// state it read (made by the commit that published it); only what the
// rest of the daemon knows is encoded here, into its slots. An agent with
// more than that to show (the upstreams' own views, a fleet's, work lost,
// an interrupted restore) has its whole document built and encoded.
func (a *Agent) ResumeJSON(ctx context.Context, o ResumeOptions, buf []byte) ([]byte, residency.Visit, error) {
	ans, visit := a.store.VisitAnswer()
	if a.ready.usable.Load() {
		if raw, ok := a.readyFor(ans); ok {
			return append(buf, raw...), visit, nil
		}
	}
	var late []string // the upstreams that did not answer in time
	if !o.Local {
		late = a.fetchRemote(ctx)
	}
	if raw, ok, err := a.localAnswer(ans, a.view(), a.UpstreamStates(), late, buf); ok || err != nil {
		return raw, visit, err
	}
	r := a.withLocal(ans.Resume())
	r.Degraded = append(r.Degraded, late...)
	a.addRemote(&r)
	raw, err := residency.EncodeResume(&r, buf)
	return raw, visit, err
}

// localOnly reports whether withLocal set nothing in p (a resume with
// nothing of the residency's) but the values of residency.LocalParts. The
// fields are named, not compared with a zero document (reflect.DeepEqual
// costs resume about 5%): a field withLocal learns to set is added here
// and to TestLocalOnly.
func localOnly(p *capsule.Resume) bool {
	return p.RestoredFrom == nil && p.FleetHandover == nil && len(p.FleetConflict) == 0 && len(p.WorkLost) == 0 && p.RestoreInterrupted == nil
}

// hasRemote reports whether an upstream's own view is kept for resumes.
func (a *Agent) hasRemote() bool {
	a.remoteMu.Lock()
	defer a.remoteMu.Unlock()
	return len(a.remote) > 0
}
