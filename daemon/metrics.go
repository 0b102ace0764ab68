package daemon

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/continuityd/continuityd/daemon/api"
	"github.com/continuityd/continuityd/daemon/residency"
)

// metrics are the daemon's Prometheus metrics, on a registry of its own (no
// process-wide state), served at GET /metrics.
type metrics struct {
	reg        *prometheus.Registry
	accepted   *prometheus.CounterVec   // agent, kind
	refused    *prometheus.CounterVec   // code
	signals    *prometheus.CounterVec   // agent, kind
	deliveries *prometheus.CounterVec   // upstream, outcome
	deliverDur *prometheus.HistogramVec // upstream
	deadEvents *prometheus.CounterVec   // upstream
	requests   *prometheus.HistogramVec // route, code
	reloads    *prometheus.CounterVec   // result
	mcpLive    *prometheus.GaugeVec     // state
	mcpEvicted prometheus.Counter
	conflicts  prometheus.Counter // paths two agents on one workdir changed
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_writes_accepted_total", Help: "Writes accepted and stored durably, by agent and kind.",
		}, []string{"agent", "kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_writes_refused_total", Help: "Requests refused, by error code.",
		}, []string{"code"}),
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_signals_total", Help: "Context signals accepted, by agent and kind.",
		}, []string{"agent", "kind"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_deliveries_total", Help: "Upstream delivery attempts by outcome (ok, retry, rate_limited, unauthorized, stopped, rejected); every outcome but ok is followed by a retry or the dead letter.",
		}, []string{"upstream", "outcome"}),
		deliverDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "continuityd_delivery_seconds", Help: "Time of one upstream delivery attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"upstream"}),
		deadEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_dead_letters_added_total", Help: "Writes moved to an upstream's dead letter.",
		}, []string{"upstream"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "continuityd_request_seconds", Help: "Local API request latency by route and status.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route", "status"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "continuityd_config_reloads_total", Help: "Config reloads by result (ok, partial, refused).",
		}, []string{"result"}),
		mcpLive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "continuityd_mcp_sessions", Help: "Live MCP sessions by state: /mcp's idle and in_call (a tool call in progress), and stdio (continuityd mcp's, handed to the daemon).",
		}, []string{"state"}),
		mcpEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "continuityd_mcp_sessions_evicted_total", Help: "Idle /mcp sessions closed to make room for a new one at daemon.mcp_max_sessions (the least recently used first).",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "continuityd_attribution_conflicts_total", Help: "Paths that two agents on one workdir both changed, neither having checkpointed past them (each told by a conflict event).",
		}),
	}
	m.reg.MustRegister(m.accepted, m.refused, m.signals, m.deliveries, m.deliverDur, m.deadEvents, m.requests, m.reloads,
		m.mcpLive, m.mcpEvicted, m.conflicts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register adds the collectors that read the daemon's state at scrape time.
func (m *metrics) register(d *Daemon) {
	m.reg.MustRegister(&stateCollector{d: d})
}

// handler serves the metrics; a caller who may not use every agent (on a
// shared socket) gets no series of the agents it may not use (their names,
// how busy they are, what they lost).
func (m *metrics) handler() http.Handler {
	all := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if api.ShowsEveryAgent(r.Context()) {
			all.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		mine := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			families, err := m.reg.Gather()
			return withoutAgents(families, func(agent string) bool { return !api.MayShowAgent(ctx, agent) }), err
		})
		promhttp.HandlerFor(mine, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// withoutAgents drops from families the series whose agent label hide
// says to, and the families left empty.
func withoutAgents(families []*dto.MetricFamily, hide func(agent string) bool) []*dto.MetricFamily {
	kept := families[:0]
	for _, f := range families {
		f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
			for _, l := range m.GetLabel() {
				if l.GetName() == "agent" && hide(l.GetValue()) {
					return true
				}
			}
			return false
		})
		if len(f.Metric) > 0 {
			kept = append(kept, f)
		}
	}
	return kept
}

// Delivery records one delivery attempt (agent.Observer).
func (m *metrics) Delivery(upstream, outcome string, d time.Duration) {
	m.deliveries.WithLabelValues(upstream, outcome).Inc()
	m.deliverDur.WithLabelValues(upstream).Observe(d.Seconds())
	if outcome == "rejected" {
		m.deadEvents.WithLabelValues(upstream).Inc()
	}
}

// stateCollector reports gauges read from the running agents at scrape
// time, so there is nothing to keep in sync.
type stateCollector struct{ d *Daemon }

var (
	descPending         = prometheus.NewDesc("continuityd_spool_depth", "Writes an upstream has not taken yet.", []string{"agent", "upstream"}, nil)
	descDead            = prometheus.NewDesc("continuityd_dead_letters", "Writes sitting in an upstream's dead letter.", []string{"agent", "upstream"}, nil)
	descSeq             = prometheus.NewDesc("continuityd_residency_seq", "The agent's last sequence number.", []string{"agent"}, nil)
	descUp              = prometheus.NewDesc("continuityd_upstream_ok", "1 when the upstream delivers fine for the agent, 0 otherwise.", []string{"agent", "upstream", "state"}, nil)
	descWEvents         = prometheus.NewDesc("continuityd_watcher_events_total", "fsnotify events the agent's workdir watcher (shared by the agents on the workdir) received.", []string{"agent"}, nil)
	descWRescan         = prometheus.NewDesc("continuityd_watcher_rescans_total", "Full rescans of the workdir after an inotify overflow.", []string{"agent"}, nil)
	descWDirs           = prometheus.NewDesc("continuityd_watcher_watched_dirs", "Directories the workdir watcher holds a watch on.", []string{"agent"}, nil)
	descWErrs           = prometheus.NewDesc("continuityd_watcher_watch_errors_total", "Directories that could not be watched (inotify limits).", []string{"agent"}, nil)
	descCommits         = prometheus.NewDesc("continuityd_commits_total", "Group commits of the agent's residency (one log sync each).", []string{"agent"}, nil)
	descCWrites         = prometheus.NewDesc("continuityd_committed_writes_total", "Writes those commits held (background updates included).", []string{"agent"}, nil)
	descCBusy           = prometheus.NewDesc("continuityd_commit_seconds_total", "Time spent committing, syncs included.", []string{"agent"}, nil)
	descCkpts           = prometheus.NewDesc("continuityd_checkpoints_total", "bbolt commits that caught up with the write-ahead log.", []string{"agent"}, nil)
	descFleetC          = prometheus.NewDesc("continuityd_fleet_conflict", "1 while another daemon is seen writing the agent through the fleet upstream (see `continuityd fleet`), else 0.", []string{"agent", "upstream"}, nil)
	descLostAll         = prometheus.NewDesc("continuityd_work_lost_total", "Times uncommitted work a snapshot held vanished from the workdir without a commit (checkout, reset, stash, rm), since the daemon started.", []string{"agent"}, nil)
	descLostNow         = prometheus.NewDesc("continuityd_work_lost", "Losses resume lists now (work_lost): not brought back, and not checkpointed past by the agent.", []string{"agent"}, nil)
	descWorkdirWatchers = prometheus.NewDesc("continuityd_workdir_watchers", "Workdir watchers running: one per workdir, however many agents share it.", nil, nil)
	descWorkdirDirs     = prometheus.NewDesc("continuityd_workdir_watched_dirs", "Directories all workdir watchers together hold an inotify watch on (each directory of a shared workdir once).", nil, nil)
	descDamaged         = prometheus.NewDesc("continuityd_agent_damaged", "1 for an agent refused because its files are damaged (see `continuityd recover`).", []string{"agent"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPending
	ch <- descDead
	ch <- descSeq
	ch <- descUp
	ch <- descWEvents
	ch <- descWRescan
	ch <- descWDirs
	ch <- descWErrs
	ch <- descCommits
	ch <- descCWrites
	ch <- descCBusy
	ch <- descCkpts
	ch <- descDamaged
	ch <- descFleetC
	ch <- descLostAll
	ch <- descLostNow
	ch <- descWorkdirWatchers
	ch <- descWorkdirDirs
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.snap()
	watchers, dirs := c.d.watches.running(), 0
	for _, w := range watchers {
		dirs += w.Stats().WatchedDirs
	}
	ch <- prometheus.MustNewConstMetric(descWorkdirWatchers, prometheus.GaugeValue, float64(len(watchers)))
	ch <- prometheus.MustNewConstMetric(descWorkdirDirs, prometheus.GaugeValue, float64(dirs))
	for name, err := range st.damaged {
		// Only damage: an agent refused for another workdir (place) is not
		// a case for `recover --accept-loss`, which the metric's help names.
		if de := (*residency.DamageError)(nil); errors.As(err, &de) {
			ch <- prometheus.MustNewConstMetric(descDamaged, prometheus.GaugeValue, 1, name)
		}
	}
	for _, name := range st.names {
		a := st.agents[name]
		r := a.Store().Resume()
		ch <- prometheus.MustNewConstMetric(descSeq, prometheus.GaugeValue, float64(r.Seq), name)
		cs := a.Store().CommitStats()
		ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(cs.Commits), name)
		ch <- prometheus.MustNewConstMetric(descCWrites, prometheus.CounterValue, float64(cs.Writes), name)
		ch <- prometheus.MustNewConstMetric(descCBusy, prometheus.CounterValue, cs.Busy.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descCkpts, prometheus.CounterValue, float64(cs.Flushes), name)
		for _, u := range a.UpstreamStates() {
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(u.Pending), name, u.Name)
			ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, float64(u.DeadLetter), name, u.Name)
			ok := 0.0
			if u.State == "ok" {
				ok = 1
			}
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, ok, name, u.Name, u.State)
		}
		if fl := a.FleetUpstreams(); len(fl) > 0 {
			in := map[string]bool{}
			for _, c := range a.FleetConflicts() {
				in[c.Upstream] = true
			}
			for _, u := range fl {
				v := 0.0
				if in[u] {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(descFleetC, prometheus.GaugeValue, v, name, u)
			}
		}
		ch <- prometheus.MustNewConstMetric(descLostAll, prometheus.CounterValue, float64(a.Capture().WorkLostFound()), name)
		ch <- prometheus.MustNewConstMetric(descLostNow, prometheus.GaugeValue, float64(len(a.Capture().WorkLost())), name)
		if w := a.Capture().Watching(); w != nil {
			ws := w.Stats()
			ch <- prometheus.MustNewConstMetric(descWEvents, prometheus.CounterValue, float64(ws.Events), name)
			ch <- prometheus.MustNewConstMetric(descWRescan, prometheus.CounterValue, float64(ws.Rescans), name)
			ch <- prometheus.MustNewConstMetric(descWDirs, prometheus.GaugeValue, float64(ws.WatchedDirs), name)
			ch <- prometheus.MustNewConstMetric(descWErrs, prometheus.CounterValue, float64(ws.WatchErrors), name)
		}
	}
}

// Accepted counts a write stored durably (agent.Observer).
func (m *metrics) Accepted(agent, kind string) { m.accepted.WithLabelValues(agent, kind).Inc() }

// Signal counts a context signal stored (agent.Observer).
func (m *metrics) Signal(agent, kind string) { m.signals.WithLabelValues(agent, kind).Inc() }
