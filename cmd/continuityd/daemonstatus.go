package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/continuityd/continuityd/daemon/api"
)

// runningDaemon asks the daemon the client flags name for its status, for
// commands that change files the daemon reads and then tell it so
// (recover, delx register). socket is where it asked; st is nil when no
// daemon answered there (err says why).
func runningDaemon(ctx context.Context, e *env, cf clientFlags) (st *api.Status, socket string, err error) {
	c, err := cf.client(e)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := c.Do(ctx, http.MethodGet, "/v1/status", nil, nil)
	if err != nil {
		return nil, c.Socket, err
	}
	st = &api.Status{}
	if err := json.Unmarshal(out, st); err != nil {
		return nil, c.Socket, err
	}
	return st, c.Socket, nil
}
