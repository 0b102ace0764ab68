package ui

import (
	"context"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// The answers' security headers: no script, style, image or connection
// but the page's own; no framing; no sniffing; no referrer (a login URL
// never travels on).
const (
	contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// CookieName is the session cookie's name on a listener's port. Cookies
// are not scoped by port, so two daemons' pages on one host (root's and a
// user's) each keep a cookie of their own.
func CookieName(port string) string { return "continuityd_ui_" + port }

// connKey is the context key of ConnContext's record of a connection.
type connKey struct{}

// connInfo is a loopback connection, and (once asked) the user owning its
// other end.
type connInfo struct {
	local, remote net.Addr
	once          sync.Once
	uid           uint32
	err           error
}

func (c *connInfo) owner() (uint32, error) {
	c.once.Do(func() { c.uid, c.err = peerUID(c.local, c.remote) })
	return c.uid, c.err
}

// ConnContext is the page's listeners' http.Server.ConnContext: it keeps
// the connection's addresses, whose owner the door asks the kernel for
// once per connection.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connInfo{local: c.LocalAddr(), remote: c.RemoteAddr()})
}

// sessionKey is the context key of the request's session and the
// listener's port.
type sessionKey struct{}

type reqInfo struct {
	sess session
	port string
}

func sessionOf(ctx context.Context) session {
	i, _ := ctx.Value(sessionKey{}).(reqInfo)
	return i.sess
}

// cookieOf is the session cookie's name on the request's listener.
func cookieOf(r *http.Request) string {
	i, _ := r.Context().Value(sessionKey{}).(reqInfo)
	return CookieName(i.port)
}

// securityHeaders sets the headers every answer of the page carries.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// door checks every request of the page before next sees it, for a
// listener on port: the Host, the Origin, the connection's user, the
// session, and a POST's CSRF token. Only /ui/login goes in without a
// session: it is how one is opened.
func (s *Server) door(port string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !loopbackHostPort(r.Host, port) {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_HOST",
				fmt.Sprintf("the page answers only to Host 127.0.0.1:%s, localhost:%s or [::1]:%s; a request for another host name (a DNS-rebound page) is refused", port, port, port))
			return
		}
		origin := r.Header.Get("Origin")
		// With no referrer, a browser sends its own page's form POST with
		// Origin "null"; it is believed only beside Sec-Fetch-Site:
		// same-origin, which the browser sets and no page can.
		sameOrigin := r.Header.Get("Sec-Fetch-Site") == "same-origin"
		if origin != "" && !loopbackOrigin(origin, port) && !(origin == "null" && sameOrigin) {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_ORIGIN", "requests from a page on another origin are refused")
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_ORIGIN", "requests another site starts are refused (Sec-Fetch-Site: "+site+")")
			return
		}
		uid, known, err := connOwner(r.Context())
		if err != nil {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_PEER", "who opened this connection could not be read ("+err.Error()+"), so nothing is served to it")
			return
		}
		if r.URL.Path == "/ui/login" {
			s.login(w, r, port, uid, known)
			return
		}
		c, _ := r.Cookie(CookieName(port))
		var sess session
		ok := false
		if c != nil {
			sess, ok = s.sessions.lookup(c.Value)
		}
		if !ok {
			s.refuse(w, r, http.StatusUnauthorized, "UNAUTHORIZED",
				"no session: run `continuityd ui` for a one-time login URL (sessions end after "+s.sessions.ttl.String()+" and at `continuityd ui --revoke`)")
			return
		}
		if known && uid != sess.id.UID {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_PEER",
				fmt.Sprintf("this session belongs to uid %d; the connection is uid %d's: a session is used only by the user who asked for it", sess.id.UID, uid))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", "GET, POST")
				s.refuse(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the page takes GET and POST only")
				return
			}
			if origin == "" {
				s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_ORIGIN", "a change is taken only from the page itself, whose browser sends its Origin")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
			tok := r.Header.Get(csrfHeader)
			if tok == "" {
				tok = r.PostFormValue(csrfField)
			}
			if !csrfMatches(sess, tok) {
				s.refuse(w, r, http.StatusForbidden, "CSRF_REQUIRED", "a change needs the page's CSRF token; reload the page and try again")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, reqInfo{sess: sess, port: port})))
	})
}

// connOwner is the user owning the request's connection; known is false
// where the platform does not say (the session's cookie alone counts).
func connOwner(ctx context.Context) (uid uint32, known bool, err error) {
	ci, ok := ctx.Value(connKey{}).(*connInfo)
	if !ok || !peerUIDKnown {
		return 0, false, nil
	}
	uid, err = ci.owner()
	return uid, err == nil, err
}

// login redeems a one-time login URL: it opens a session for the user who
// asked for it (only for a connection of that user's), sets the cookie
// and sends the browser to the places.
func (s *Server) login(w http.ResponseWriter, r *http.Request, port string, uid uint32, known bool) {
	if r.Method != http.MethodGet {
		s.refuse(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the login URL is opened with GET")
		return
	}
	if known {
		if id, ok := s.sessions.ticketUser(r.URL.Query().Get("t")); ok && id.UID != uid {
			s.refuse(w, r, http.StatusForbidden, "FORBIDDEN_PEER",
				fmt.Sprintf("this login URL was asked for by uid %d; the connection is uid %d's", id.UID, uid))
			return
		}
	}
	cookie, sess, ok := s.sessions.redeem(r.URL.Query().Get("t"))
	if !ok {
		s.refuse(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "this login URL is used up or expired (it works once, within "+TicketTTL.String()+"): run `continuityd ui` again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName(port), Value: cookie, Path: "/ui/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Expires: sess.expires})
	s.log.Info("web page session opened", "uid", sess.id.UID)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// refuse answers a refusal: a short page for a browser, the API's JSON
// error shape for anything else. It never echoes what the request sent.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	s.log.Debug("web page request refused", "path", r.URL.Path, "code", code)
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		refusedPage.Execute(w, map[string]string{"Code": code, "Message": msg})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%s}}`+"\n", code, strconv.Quote(msg))
}

var refusedPage = template.Must(template.New("refused").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>continuityd: {{.Code}}</title></head>` +
	`<body><h1>{{.Code}}</h1><p>{{.Message}}</p></body></html>`))

// loopbackHostPort reports whether a Host header names a loopback address
// (localhost, 127.0.0.0/8, ::1) with port.
func loopbackHostPort(hostport, port string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil || p != port {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOrigin reports whether an Origin is http on a loopback host with
// port ("null" is not).
func loopbackOrigin(origin, port string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	return loopbackHostPort(u.Host, port)
}
