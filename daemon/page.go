package daemon

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/ui"
)

// SessionTTLEnv is a test hook: a web page session's lifetime (a Go
// duration), so a test sees one expire without waiting hours.
const SessionTTLEnv = "CONTINUITYD_TEST_UI_SESSION_TTL"

// StaticPageEnv is a test hook: a file the page serves as it is at
// /ui/static, the benchmarks' reference page.
const StaticPageEnv = "CONTINUITYD_TEST_UI_STATIC"

// newPage is the web page, calling the operations through apiRoutes.
func newPage(log *slog.Logger, to api.Timeouts, apiRoutes http.Handler) *ui.Server {
	ttl, _ := time.ParseDuration(os.Getenv(SessionTTLEnv))
	return ui.New(ui.Options{API: apiRoutes, Logger: log, Timeouts: to, SessionTTL: ttl, StaticFile: os.Getenv(StaticPageEnv)})
}

// loopbackDoors is the configured loopback listener's handler: the page
// under /ui/ (behind its own door: a session cookie, not the API's
// token), the API behind the token everywhere else.
func loopbackDoors(doors *api.API, page *ui.Server, addr net.Addr) http.Handler {
	_, port, _ := net.SplitHostPort(addr.String())
	page.UseListener(addr)
	apiH, pageH := doors.LoopbackHandler(port), page.Handler(port)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/") {
			pageH.ServeHTTP(w, r)
			return
		}
		apiH.ServeHTTP(w, r)
	})
}
