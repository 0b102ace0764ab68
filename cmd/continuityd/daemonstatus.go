package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// runningDaemon asks the daemon the client flags name for its status, for
// commands that change files the daemon reads and then tell it so
// (recover, delx register). socket is where it asked; peer is who answered
// there, as the kernel says; st is nil when no daemon answered (err says
// why).
func runningDaemon(ctx context.Context, e *env, cf clientFlags) (st *api.Status, peer safesocket.Cred, socket string, err error) {
	c, err := cf.client(e)
	if err != nil {
		return nil, peer, "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, peer, err := c.DoPeer(ctx, http.MethodGet, "/v1/status", nil, nil)
	if err != nil {
		return nil, peer, c.Socket, err
	}
	st = &api.Status{}
	if err := json.Unmarshal(out, st); err != nil {
		return nil, peer, c.Socket, err
	}
	return st, peer, c.Socket, nil
}

// daemonPID is the PID a command may signal: the one the status names,
// only when it is the process that answered on the socket (the kernel's
// word, not the answer's) and that process runs as this user (root may
// signal a daemon run as its own service user). Whatever else listens on
// the socket path and names some other process is refused, with the
// socket and both PIDs named: signalling on its word would let it have
// any process of ours killed.
func daemonPID(st *api.Status, peer safesocket.Cred, socket string) (int, error) {
	if st.PID != peer.PID {
		return 0, fmt.Errorf("the process answering on %s (pid %d, uid %d) names pid %d as the daemon: not signalling a process it does not prove to be",
			socket, peer.PID, peer.UID, st.PID)
	}
	if uid := os.Getuid(); uid != 0 && peer.UID != uint32(uid) {
		return 0, fmt.Errorf("the process answering on %s (pid %d) runs as uid %d, not as this user (uid %d): not signalling it",
			socket, peer.PID, peer.UID, uid)
	}
	return st.PID, nil
}
