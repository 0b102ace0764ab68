package daemon

import (
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/mcpserver"
	"github.com/continuityd/continuityd/internal/client"
)

// mcpHandler serves MCP (Streamable HTTP) at /mcp with the same tools as
// `continuityd mcp`. The tools call the local API in-process, so they go
// through exactly the checks an HTTP client gets. ?agent= picks the default
// agent for the session's tools.
func (d *Daemon) mcpHandler(api http.Handler) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		c := client.NewWithTransport("in-process", inProcess{api})
		c.Agent = r.URL.Query().Get("agent")
		return mcpserver.New(mcpserver.Options{Client: c, Version: d.version, ResumeLimit: ResumeMarkdownLimit})
	}, &mcp.StreamableHTTPOptions{JSONResponse: true, Logger: d.log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A web page must not drive the agent's tools: browsers send
		// Origin, MCP clients do not (or send their own single-label host).
		// On the loopback listener requireToken has already held Host and
		// Origin to loopback; this is the Unix socket's rule.
		if o := r.Header.Get("Origin"); o != "" && !socketOrigin(o, r.Host) {
			writeError(w, capsule.RefuseStatus(http.StatusForbidden, capsule.CodeForbiddenOrigin, "",
				"MCP requests from a page on another origin (%s) are refused", o))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// inProcess is an http.RoundTripper that serves requests with a handler in
// the same process: no socket, the same code path.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}
