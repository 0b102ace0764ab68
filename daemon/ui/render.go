package ui

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule/guard"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// The page's templates and assets, in the binary: nothing is fetched from
// elsewhere, nothing needs building.
//
//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// funcs are the templates' helpers. Every text from a workdir, an agent or
// another machine goes through show or name: control and invisible
// characters escaped visibly (internal/termsafe), credential shapes
// redacted (capsule/guard); html/template then escapes it for HTML.
var funcs = template.FuncMap{
	"show": func(s string) string { return redact(termsafe.Line(s)) },
	"name": func(s string) string { return redact(termsafe.Name(s)) },
	"ago":  ago,
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"short": func(id string) string {
		if len(id) > 12 {
			return id[:12]
		}
		return id
	},
	"pct": func(f *float64) string {
		if f == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", *f*100)
	},
	"pctNum": func(f *float64) int {
		if f == nil {
			return 0
		}
		return int(*f*100 + 0.5)
	},
	"add":    func(a, b int) int { return a + b },
	"mul100": func(f float64) float64 { return f * 100 },
}

// redactMarker replaces a credential shape on the page.
const redactMarker = "[redacted]"

func redact(s string) string { return guard.RedactCredentialShapes(s, redactMarker) }

// ago says how long ago t was, roughly.
func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// views are the page's templates, each with the frame (layout.html).
var views = func() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html"))
	out := map[string]*template.Template{}
	entries, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		name := strings.TrimPrefix(e, "templates/")
		if name == "layout.html" {
			continue
		}
		out[strings.TrimSuffix(name, ".html")] = template.Must(template.Must(base.Clone()).ParseFS(templateFiles, e))
	}
	return out
}()

// page is what every view's template gets: the view's own data, and the
// frame's.
type page struct {
	Title string
	CSRF  string
	Nav   string // which view, for the frame's navigation
	Agent string // the place the view is of ("" : none)
	Data  any
}

// render writes view's page; a template error is a bug, answered 500.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, view string, p page) {
	p.CSRF = sessionOf(r.Context()).csrf
	var buf bytes.Buffer
	if err := views[view].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.log.Error("web page template failed", "view", view, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail shows an operation's refusal (or another error) as a page with its
// status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := http.StatusInternalServerError, "INTERNAL", err.Error()
	var ce *client.APIError
	if errors.As(err, &ce) {
		status, code, msg = ce.Status, ce.Code, ce.Message
	}
	s.render(w, r, status, "error", page{Title: code, Data: map[string]string{"Code": code, "Message": msg}})
}
