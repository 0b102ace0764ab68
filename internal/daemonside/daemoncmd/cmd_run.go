package daemoncmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon"
	"github.com/continuityd/continuityd/daemon/place"
	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/internal/termsafe"
	"github.com/continuityd/continuityd/internal/timerslack"
)

// cmdRun runs the daemon in the foreground until SIGINT or SIGTERM. With no
// --config it runs the embedded default: agent "default" on the current
// directory, upstream "local", XDG or FHS paths.
func cmdRun(ctx context.Context, e *cli.Env, args []string) int {
	// Started by the Windows service manager: run under it (a no-op elsewhere).
	// Its log then goes to the service manager's own log (logTo).
	if code, ok := runUnderServiceManager(ctx, func(ctx context.Context, logTo io.Writer) int {
		se := *e
		if logTo != nil {
			se.Stderr = logTo
		}
		return cmdRun(ctx, &se, args)
	}); ok {
		return code
	}
	fs := cli.NewFlagSet(e, "run", "[--config FILE | --workdir DIR]")
	cfgPath := fs.String("config", "", "the config `FILE` (without it: the embedded default)")
	workdir := fs.String("workdir", "", "the embedded default's workdir, a `DIR` (without it: the current directory)")
	if pos, err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage
	} else if len(pos) > 0 {
		return cli.TooMany(e, "run", pos[0])
	}
	// SIGHUP reloads the config file (the daemon also reloads when the file
	// changes). It is caught from here on: one that comes while the daemon
	// starts is served once the agents run (daemon.Reload waits for that).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := cli.LoadConfig(e, *cfgPath)
	if err == nil && *workdir != "" {
		err = setDefaultWorkdir(cfg, *cfgPath, *workdir)
	}
	placesOnly := false
	if err == nil && *workdir == "" {
		placesOnly = servePlacesOnly(cfg)
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %v\n", err)
		return cli.ExitUsage
	}
	// A slack configured other than the one `continuityd run` hands over
	// with is given by executing the program again, in this process,
	// before anything is opened. The new image runs this code again: a
	// SIGHUP before it is caught there ends the process, as one does
	// before the front has handed over.
	slackErr := timerslack.Ensure(cfg.Daemon.TimerSlack.Duration)
	log := newLogger(e.Stderr, cfg.Daemon.LogLevel, cfg.Daemon.LogFormat)
	if placesOnly {
		log.Info("started in / or the home directory, which is never a place: this daemon serves the projects agent sessions report from, each a place of its own")
	}
	if slackErr != nil {
		log.Warn("daemon.timer_slack not applied: the daemon runs on with the slack it has", "err", slackErr)
	}
	log.Debug("processors", "gomaxprocs", spareProcessor(e.Getenv))
	opts := daemon.Options{Logger: log, Version: e.Version, Ready: notifyReady, Stopping: notifyStopping}
	if cfg.Path != "" { // --config, or the user's own file
		opts.Load = func() (*config.Config, error) {
			c, err := config.Load(cfg.Path)
			if err == nil && *workdir == "" {
				servePlacesOnly(c)
			}
			return c, err
		}
	} else {
		opts.FollowCwd = true // the embedded default's agent is the directory's
	}
	d, err := daemon.New(cfg, opts)
	if err != nil {
		// A sentence for the person who ran it, not a log record: the
		// log's format is for the daemon's log.
		fmt.Fprintf(e.Stderr, "continuityd: the daemon cannot start: %s\n", termsafe.Text(err.Error()))
		return cli.ExitFailed
	}
	hupCtx, stopHUP := context.WithCancel(ctx)
	defer stopHUP()
	go func() {
		for {
			select {
			case <-hup:
				log.Info("SIGHUP: reloading the configuration")
				if err := d.Reload(); errors.Is(err, daemon.ErrNotRunning) {
					return
				} else if err != nil && opts.Load == nil {
					log.Warn("reload", "err", err)
				}
			case <-hupCtx.Done():
				return
			}
		}
	}()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: the daemon cannot run: %s\n", termsafe.Text(err.Error()))
		return cli.ExitFailed
	}
	log.Info("stopped cleanly")
	return cli.ExitOK
}

// servePlacesOnly takes the default agent (a config without [[agent]]
// tables) out when it would work in / or the home directory (a user
// service starts there):
// neither is ever a place, and the daemon then serves only the places
// sessions adopt. It reports whether it did.
func servePlacesOnly(cfg *config.Config) bool {
	if len(cfg.Agents) != 1 || cfg.Agents[0].Name != config.DefaultAgent {
		return false
	}
	wd := place.Canonical(cfg.Agents[0].Workdir)
	home, _ := os.UserHomeDir()
	if wd != "/" && (home == "" || wd != place.Canonical(home)) {
		return false
	}
	cfg.Agents = nil
	return true
}

// setDefaultWorkdir points the embedded default's agent at dir, which
// must be an existing directory. A config file names its agents' workdirs
// itself, so --workdir goes with no --config only.
func setDefaultWorkdir(cfg *config.Config, cfgPath, dir string) error {
	if cfgPath != "" {
		return fmt.Errorf("run: --workdir is for the embedded default; with --config %s, set each agent's workdir in the file", cfgPath)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].Name != config.DefaultAgent {
		return fmt.Errorf("run: --workdir is for a config without [[agent]] tables; %s has them: set each agent's workdir there", cfg.Path)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("run: --workdir %q: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("run: --workdir %q is not a directory", dir)
	}
	if home, _ := os.UserHomeDir(); place.Canonical(abs) == "/" || home != "" && place.Canonical(abs) == place.Canonical(home) {
		return fmt.Errorf("run: --workdir %q: / and a home directory itself are never a place; name a project, or leave --workdir out to serve the projects sessions report from", dir)
	}
	for i := range cfg.Agents {
		cfg.Agents[i].Workdir = abs
	}
	return nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
