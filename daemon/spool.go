package daemon

import (
	"context"
	"encoding/json"
	"os"

	"github.com/continuityd/continuityd/daemon/agent"
	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/sources/spool"
)

// storeSpooled is the spool's Store: a spooled event goes to the agent of
// the running configuration it names.
//
// A spooled event is taken only from a user the agent it names admits, as
// the socket would take it: the user is the owner of the file (spool.Entry),
// and its groups are those the user database gives it and the spool's
// writers (only their members may write in it). Anyone else's event, a
// tool claim among them, is set aside (spool.ForeignError).
func (d *Daemon) storeSpooled(ctx context.Context, e spool.Entry) error {
	// A place unwatched (or never adopted) is watched for it, as its
	// hook would have had it, for the user who spooled it.
	uid := uint32(os.Geteuid())
	if e.Owned {
		uid = e.Owner
	}
	a, g, cerr := d.agentAs(ctx, e.Event.Agent, e.Event.Cwd, uid)
	if cerr != nil {
		return cerr
	}
	if e.Owned {
		if !api.AdmitsOwner(a.Config(), e.Owner, e.Writers...) {
			return &spool.ForeignError{UID: e.Owner, Agent: a.Name()}
		}
		ctx = agent.WithCaller(ctx, e.Owner)
	}
	if !e.Made.IsZero() {
		ctx = agent.WithReceipt(ctx, e.Made)
	}
	// The spool is a file anyone with access to the state directory could
	// write: it is the agent's Signal operation, the same guard as the API.
	body, err := json.Marshal(e.Event.Signal)
	if err != nil {
		return err
	}
	_, err = a.Signal(ctx, g, body)
	return err
}
