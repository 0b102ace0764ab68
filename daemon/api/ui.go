package api

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// UI is the web page's door as the socket's operations see it: a one-time
// login URL for a user, and the end of sessions.
type UI interface {
	// Login is a one-time login URL on loopback for uid (primary group
	// gid), and whether the page's own listener serves it (no
	// daemon.listen).
	Login(uid, gid uint32) (url string, own bool, err error)
	// Revoke ends the sessions of uid, or every one with all, and says
	// how many ended.
	Revoke(uid uint32, all bool) int
}

// AsUser is ctx carrying uid (primary group gid) as the socket's peer: a
// request served in process with it (the web page's calls of the
// operations) passes the very checks the same user's call over the socket
// passes. Its supplementary groups are the user database's.
func AsUser(ctx context.Context, uid, gid uint32) context.Context {
	return context.WithValue(ctx, peerKey{}, peer{cred: safesocket.Cred{UID: uid, GID: gid}})
}

// caller is who asks for a login URL or a revocation: the socket's peer,
// or (the loopback listener's token holder) the daemon's own user.
func caller(r *http.Request) (uid, gid uint32, err error) {
	p := peerOf(r.Context())
	if p == nil {
		return uint32(os.Getuid()), uint32(os.Getgid()), nil
	}
	if p.err != nil {
		return 0, 0, capsule.Refuse(capsule.CodeAgentForbidden, "", "who is connecting could not be read (%v), so no web page session is made for it", p.err)
	}
	return p.cred.UID, p.cred.GID, nil
}

// handleUILogin is POST /v1/ui/login: a one-time URL that opens a web
// page session for the caller.
func (a *API) handleUILogin(w http.ResponseWriter, r *http.Request) {
	if a.o.UI == nil {
		writeError(w, capsule.Refuse(capsule.CodeNotFound, "", "this daemon serves no web page"))
		return
	}
	uid, gid, err := caller(r)
	if err != nil {
		writeError(w, err)
		return
	}
	url, own, err := a.o.UI.Login(uid, gid)
	if err != nil {
		var ce *capsule.Error
		if !errors.As(err, &ce) {
			err = capsule.Refuse(capsule.CodeInternal, "", "no login URL: %v", err)
		}
		writeError(w, err)
		return
	}
	listener := "configured"
	if own {
		listener = "own"
	}
	writeJSON(w, http.StatusOK, ops.UILoginAnswer{URL: url, Listener: listener, ExpiresIn: "1m"})
}

// handleUIRevoke is POST /v1/ui/revoke: root and the daemon's user end
// every session; anyone else, their own.
func (a *API) handleUIRevoke(w http.ResponseWriter, r *http.Request) {
	if a.o.UI == nil {
		writeError(w, capsule.Refuse(capsule.CodeNotFound, "", "this daemon serves no web page"))
		return
	}
	uid, _, err := caller(r)
	if err != nil {
		writeError(w, err)
		return
	}
	all := uid == 0 || uid == uint32(os.Getuid())
	writeJSON(w, http.StatusOK, ops.UIRevokeAnswer{Revoked: a.o.UI.Revoke(uid, all), All: all})
}
