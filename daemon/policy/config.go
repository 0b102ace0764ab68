package policy

import (
	"fmt"
	"slices"
	"time"
)

// Config tunes the checkpoint policy. The zero value of a duration, and a
// nil Thresholds, mean the default; DefaultConfig is the safe starting
// point (the zero Config has Enabled false).
type Config struct {
	// Enabled turns the policy on (default true). Off, it sends nothing and
	// never wakes up.
	Enabled bool
	// Quiet: checkpoint this long after the last activity of a burst
	// (default 20s).
	Quiet time.Duration
	// MaxDelay: a burst that never goes quiet is still checkpointed this
	// long after its first activity (default 5m), so content derived from
	// the handoff file cannot wait forever behind a busy agent.
	MaxDelay time.Duration
	// MinInterval: at most one quiet-period checkpoint per interval
	// (default 60s). Thresholds, compaction and session end are not held
	// back by it (the outbox still coalesces them, and the hourly cap
	// still counts them).
	MinInterval time.Duration
	// Thresholds are context used fractions (0..1) that trigger a
	// checkpoint at once when crossed upward (default 0.5, 0.7, 0.85).
	// A threshold is re-armed when usage drops below it by Hysteresis, on a
	// compaction (phase post) and on a session start.
	Thresholds []float64
	// Hysteresis is how far below a threshold usage must drop to re-arm it
	// (default 0.05), so a reading that jitters around a threshold fires it
	// once, not at every crossing.
	Hysteresis float64
	// IdleAfter: acting → waiting after this long without activity
	// (default 10m).
	IdleAfter time.Duration
	// Refresh: re-send the public status this often while the agent is
	// alive (default 45m: the office drops an agent after an hour without a
	// saved status or a resume).
	Refresh time.Duration
	// Alive: the agent counts as alive (its status is refreshed) for this
	// long after its last activity, unless its session ended (default 24h).
	Alive time.Duration
	// PublicStatus: manage public_status at all (default true; the daemon
	// turns it off when no upstream shows it).
	PublicStatus bool
	// SealOnCompaction seals a capsule on a pre-compaction signal
	// (default true).
	SealOnCompaction bool
	// SealOnSessionEnd seals a capsule when the session ends (default true).
	SealOnSessionEnd bool
}

// Defaults.
const (
	DefaultQuiet       = 20 * time.Second
	DefaultMaxDelay    = 5 * time.Minute
	DefaultMinInterval = 60 * time.Second
	DefaultHysteresis  = 0.05
	DefaultIdleAfter   = 10 * time.Minute
	DefaultRefresh     = 45 * time.Minute
	DefaultAlive       = 24 * time.Hour

	// OfficeListing is how long the Q-Day office keeps listing an agent
	// after its last saved status or resume; Refresh must stay under it.
	OfficeListing = time.Hour

	// immediateHeadroom is how many automatic writes per hour the cap
	// allows on top of one quiet checkpoint per MinInterval: thresholds,
	// compaction and session end (with their seals), idle and refresh.
	immediateHeadroom = 10
)

// DefaultThresholds are the context used fractions that trigger a
// checkpoint by default.
var DefaultThresholds = []float64{0.5, 0.7, 0.85}

// DefaultConfig returns the safe defaults.
func DefaultConfig() Config {
	return Config{
		Enabled:          true,
		Quiet:            DefaultQuiet,
		MaxDelay:         DefaultMaxDelay,
		MinInterval:      DefaultMinInterval,
		Thresholds:       slices.Clone(DefaultThresholds),
		Hysteresis:       DefaultHysteresis,
		IdleAfter:        DefaultIdleAfter,
		Refresh:          DefaultRefresh,
		Alive:            DefaultAlive,
		PublicStatus:     true,
		SealOnCompaction: true,
		SealOnSessionEnd: true,
	}
}

// MaxPerHour is the hard cap on automatic writes (checkpoints and
// capsules) in any sliding hour: one quiet checkpoint per MinInterval plus
// a headroom of 10 for the immediate triggers. 70 with the defaults.
func (c Config) MaxPerHour() int {
	c = c.normalized()
	return int(time.Hour/c.MinInterval) + immediateHeadroom
}

// Validate reports a configuration that would not do what it says: for
// `continuityd config check`. New accepts any Config (it falls back to the
// defaults for zero or negative values).
func (c Config) Validate() error {
	for name, d := range map[string]time.Duration{
		"quiet": c.Quiet, "max_delay": c.MaxDelay, "min_interval": c.MinInterval,
		"idle_after": c.IdleAfter, "refresh": c.Refresh, "alive": c.Alive,
	} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative", name)
		}
	}
	if c.MinInterval != 0 && c.MinInterval < time.Second {
		return fmt.Errorf("min_interval must be at least 1s")
	}
	if c.PublicStatus && c.Refresh >= OfficeListing {
		return fmt.Errorf("refresh must be under %s, or the office stops listing the agent between refreshes", OfficeListing)
	}
	for _, t := range c.Thresholds {
		if !(t > 0 && t < 1) {
			return fmt.Errorf("thresholds must be fractions between 0 and 1 (exclusive), got %v", t)
		}
	}
	if c.Hysteresis < 0 || c.Hysteresis >= 1 {
		return fmt.Errorf("hysteresis must be in [0, 1), got %v", c.Hysteresis)
	}
	return nil
}

// normalized fills in the defaults for zero or invalid values.
func (c Config) normalized() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Quiet, DefaultQuiet)
	def(&c.MaxDelay, DefaultMaxDelay)
	def(&c.MinInterval, DefaultMinInterval)
	def(&c.IdleAfter, DefaultIdleAfter)
	def(&c.Refresh, DefaultRefresh)
	def(&c.Alive, DefaultAlive)
	if c.MinInterval < time.Second {
		c.MinInterval = time.Second
	}
	if c.Hysteresis <= 0 || c.Hysteresis >= 1 {
		c.Hysteresis = DefaultHysteresis
	}
	if c.Thresholds == nil {
		c.Thresholds = DefaultThresholds
	}
	var ts []float64
	for _, t := range c.Thresholds {
		if t > 0 && t < 1 {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	c.Thresholds = slices.Compact(ts)
	return c
}
