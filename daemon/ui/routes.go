package ui

import (
	"io/fs"
	"net/http"
)

// routes are the page's views, each its own URL.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFiles, "assets")
	mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /ui/{$}", s.placesView)
	mux.HandleFunc("GET /ui/events", s.events)
	mux.HandleFunc("GET /ui/fleet", s.fleetView)
	mux.HandleFunc("GET /ui/a/{agent}/{$}", s.timelineView)
	mux.HandleFunc("GET /ui/a/{agent}/s/{id}", s.changesView)
	mux.HandleFunc("GET /ui/a/{agent}/s/{id}/newer", s.newerView)
	mux.HandleFunc("GET /ui/a/{agent}/s/{id}/diff", s.diffRest)
	mux.HandleFunc("GET /ui/a/{agent}/file", s.fileView)
	mux.HandleFunc("GET /ui/a/{agent}/file/restore", s.fileRestoreView)
	mux.HandleFunc("POST /ui/a/{agent}/file/restore", s.fileRestore)
	mux.HandleFunc("GET /ui/a/{agent}/lost", s.lostView)
	mux.HandleFunc("POST /ui/a/{agent}/lost/{id}/restore", s.lostRestore)
	mux.HandleFunc("GET /ui/a/{agent}/context", s.contextView)
	mux.HandleFunc("POST /ui/logout", s.logout)
	if f := s.o.StaticFile; f != "" {
		mux.HandleFunc("GET /ui/static", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			http.ServeFile(w, r, f)
		})
	}
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusNotFound, "error", page{Title: "not found",
			Data: map[string]string{"Code": "NOT_FOUND", "Message": "the page has no view at this address"}})
	})
	return mux
}

// logout ends the request's own session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieOf(r)); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieOf(r), Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	refusedPage.Execute(w, map[string]string{"Code": "Logged out", "Message": "this session has ended; run `continuityd ui` to open the page again"})
}
