//go:build !unix

package api

import (
	"net/http"

	"github.com/continuityd/continuityd/capsule"
)

// mcpStdioHandler: descriptors cannot be passed here; `continuityd mcp`
// serves its client itself.
func (a *API) mcpStdioHandler(http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := mcpStdioRefusal(r); err != nil {
			writeError(w, err)
			return
		}
		writeError(w, capsule.Refuse(capsule.CodeNotFound, "",
			"%s: this system cannot pass descriptors; continuityd mcp serves its client itself", r.URL.Path))
	}
}
