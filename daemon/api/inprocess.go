package api

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/continuityd/continuityd/internal/client"
)

// InProcess is a client of api (the routes a Handler gives) that serves
// each call in this process, as from the caller whose request context is
// caller: a Unix socket peer (PeerContext put its credentials there) is
// checked for each agent exactly as over the socket; a context with no
// peer is the loopback listener's token holder, who may use every agent,
// so give it only a request requireToken let through. The daemon's own
// MCP sessions reach the operations so, and any other door served by the
// daemon (a page) should too: one way in, typed by package ops
// (ops.Endpoint.Call), with the API's checks, codes and answers.
func InProcess(api http.Handler, caller context.Context) *client.Client {
	return client.NewVia(inProcess{h: api, peer: peerOf(caller)}, "the daemon (in process)")
}

// inProcess carries the requests of the daemon's own MCP sessions' tools
// to h, the API's routes, in this process: each as if it had come over the
// socket from peer (nil: over the loopback listener, whose token holder may
// use every agent), so it passes the very checks the same call over HTTP
// passes, which agents the caller may use included, and gets the very
// answer.
type inProcess struct {
	h    http.Handler
	peer *peer
}

// RoundTrip implements http.RoundTripper.
func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	// The call came on no connection, whatever the context it was made
	// in: its limits are not its caller's connection's to change.
	ctx := context.WithValue(r.Context(), clockKey{}, (*clockedConn)(nil))
	if t.peer != nil {
		ctx = context.WithValue(ctx, peerKey{}, *t.peer)
	}
	w := &inProcessAnswer{ctx: ctx, header: http.Header{}}
	t.h.ServeHTTP(w, r.WithContext(ctx))
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r}, nil
}

// inProcessAnswer is an answer served in process, kept whole for the
// caller. A flush reaches the caller as long as it waits: a resume resets
// since_last_visit only for a caller still there when it was answered.
type inProcessAnswer struct {
	ctx    context.Context
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *inProcessAnswer) Header() http.Header { return w.header }

func (w *inProcessAnswer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *inProcessAnswer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

// FlushError says whether the caller still waits (http.ResponseController
// asks it).
func (w *inProcessAnswer) FlushError() error { return w.ctx.Err() }
