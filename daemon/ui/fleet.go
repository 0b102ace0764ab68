package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
)

// fleetPage is the fleet view's data: each agent's upstreams, refusals
// and dead letters, and what each fleet (nats) upstream knows.
type fleetPage struct {
	Agents      []ops.AgentStatus
	DeadLetters map[string][]ops.DeadLetter
	Fleets      []*ops.FleetAnswer
	FleetErrs   []string
}

func (s *Server) fleetView(w http.ResponseWriter, r *http.Request) {
	st, err := call(r.Context(), s, ops.Status, ops.Args{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fp := fleetPage{Agents: st.Agents, DeadLetters: map[string][]ops.DeadLetter{}}
	var nats []string
	for _, a := range st.Agents {
		for _, u := range a.Upstreams {
			if u.Kind == "nats" && !slices.Contains(nats, u.Name) {
				nats = append(nats, u.Name)
			}
			if u.DeadLetter > 0 {
				if dl, err := call(r.Context(), s, ops.DeadLetters, ops.Args{Query: agentQuery(a.Name, "upstream", u.Name)}); err == nil {
					fp.DeadLetters[a.Name] = append(fp.DeadLetters[a.Name], dl.Entries...)
				}
			}
		}
	}
	for _, n := range nats {
		f, err := call(r.Context(), s, ops.Fleet, ops.Args{Query: url.Values{"upstream": {n}}})
		if err != nil {
			fp.FleetErrs = append(fp.FleetErrs, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		fp.Fleets = append(fp.Fleets, f)
	}
	s.render(w, r, http.StatusOK, "fleet", page{Title: "Fleet", Nav: "fleet", Data: fp})
}

// contextPage is the context view's data: the used fraction over the
// events the daemon holds for the place, as an SVG chart drawn here.
type contextPage struct {
	Agent       string
	Now         *float64
	Compactions int
	Points      []chartPoint
	Marks       []chartPoint // compactions
	Line        string       // the polyline's points
	From, To    time.Time
}

type chartPoint struct {
	X, Y float64
	At   time.Time
	Used float64
}

// Chart geometry, in SVG user units.
const chartW, chartH = 800.0, 200.0

// contextView charts the context used over the place's recent events (the
// wait feed's window: what happened since the daemon started, at most its
// last 512 events), compactions marked.
func (s *Server) contextView(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("agent")
	res, err := call(r.Context(), s, ops.Resume, ops.Args{Query: agentQuery(name, "peek", "1", "local", "1")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cp := contextPage{Agent: name, Now: res.Context.UsedFraction, Compactions: res.Context.Compactions}
	for _, e := range s.feedNow(r.Context(), name) {
		if e.Kind != "signal" {
			continue
		}
		sig, _ := e.Data.(map[string]any)
		switch sig["kind"] {
		case "context":
			if f, ok := sig["used_fraction"].(float64); ok {
				cp.Points = append(cp.Points, chartPoint{At: e.At, Used: f})
			}
		case "compaction":
			cp.Marks = append(cp.Marks, chartPoint{At: e.At})
		}
	}
	cp.layout()
	s.render(w, r, http.StatusOK, "context", page{Title: "Context of " + name, Nav: "context", Agent: name, Data: cp})
}

// layout places the points on the chart: time across, used fraction up.
func (cp *contextPage) layout() {
	all := append(append([]chartPoint{}, cp.Points...), cp.Marks...)
	if len(all) == 0 {
		return
	}
	cp.From, cp.To = all[0].At, all[0].At
	for _, p := range all {
		if p.At.Before(cp.From) {
			cp.From = p.At
		}
		if p.At.After(cp.To) {
			cp.To = p.At
		}
	}
	span := cp.To.Sub(cp.From).Seconds()
	x := func(t time.Time) float64 {
		if span == 0 {
			return chartW / 2
		}
		return t.Sub(cp.From).Seconds() / span * chartW
	}
	for i := range cp.Points {
		cp.Points[i].X = x(cp.Points[i].At)
		cp.Points[i].Y = chartH - min(max(cp.Points[i].Used, 0), 1)*chartH
		cp.Line += fmt.Sprintf("%.1f,%.1f ", cp.Points[i].X, cp.Points[i].Y)
	}
	for i := range cp.Marks {
		cp.Marks[i].X = x(cp.Marks[i].At)
	}
}
