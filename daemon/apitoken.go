package daemon

import (
	"path/filepath"

	"github.com/continuityd/continuityd/daemon/apitoken"
)

// token is the loopback listener's token now ("" : none is taken).
func (d *Daemon) token() string {
	if t := d.apiToken.Load(); t != nil {
		return *t
	}
	return ""
}

// reloadToken reads api.token again at a reload, when the loopback
// listener runs: a token removed is replaced by a new one, a token changed
// is taken, and from then on the old one is refused. A token file that is
// refused (a link, readable by others) leaves the listener refusing every
// request until it is fixed and the daemon reloaded, rather than keeping
// a token its owner meant to revoke.
func (d *Daemon) reloadToken(stateDir string) {
	if d.apiToken.Load() == nil {
		return // no loopback listener
	}
	old := d.token()
	tok, err := apitoken.LoadOrCreate(stateDir)
	if err != nil {
		d.log.Error("the loopback listener refuses every request until api.token is fixed and the daemon reloaded", "err", err)
		tok = ""
	} else if tok != old {
		d.log.Info("the loopback listener takes the new api.token; the old one is refused from now on", "file", filepath.Join(stateDir, apitoken.FileName))
	}
	d.apiToken.Store(&tok)
}
