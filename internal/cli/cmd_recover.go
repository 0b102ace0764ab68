package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/client"
)

// cmdRecover is the operator's way on for an agent the daemon refused
// because its files are damaged. Without --accept-loss it only says what
// it finds; with it, the damaged file is moved aside (kept), numbering goes
// on past every sequence number already used, and a running daemon is
// asked to reload so it serves the agent again.
func cmdRecover(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "recover", "[--agent A] [--config FILE] [--accept-loss]")
	var cf ClientFlags
	cf.Register(fs)
	accept := fs.Bool("accept-loss", false, "accept losing what the damaged file held: move it aside and go on")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "recover", pos[0])
	}
	cfg, name, code := ConfigAgent(e, cf, "recover", "qday")
	if code != ExitOK {
		return code
	}
	dir := cfg.AgentDir(name)
	if !*accept {
		return inspectAgent(e, name, dir)
	}
	acc, err := residency.AcceptLoss(dir, time.Now())
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd recover: agent %s: %v\n", name, err)
		return ExitFailed
	}
	for _, p := range acc.MovedAside {
		fmt.Fprintf(e.Stdout, "moved aside: %s\n", p)
	}
	if acc.Fresh {
		fmt.Fprintf(e.Stdout, "agent %s starts a new residency (new id, so new Idempotency-Keys); the upstreams keep what they received\n", name)
	} else {
		fmt.Fprintf(e.Stdout, "agent %s goes on at seq %d (past every seq its log may have used)\n", name, acc.NextSeq)
	}
	cf.Config = cfg.Path
	if cf.Socket == "" && cf.Config == "" {
		cf.Socket = cfg.Daemon.Socket
	}
	said, err := reloadDaemon(ctx, e, cf, name)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd recover: the loss is accepted, but %v; reload continuityd yourself\n", err)
		return ExitFailed
	}
	fmt.Fprintln(e.Stdout, said)
	return ExitOK
}

// ConfigAgent loads the configuration the flags name (or the embedded
// default) and picks the agent: the one named, or the only one. code is
// ExitUsage, said on stderr, when either fails; an agent the embedded
// default does not have (the tour's builder) is said to need a config with
// an upstream of kind.
func ConfigAgent(e *Env, cf ClientFlags, command, kind string) (cfg *config.Config, name string, code int) {
	cfg, err := LoadConfig(e, cf.Config)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %v\n", err)
		return nil, "", ExitUsage
	}
	if name, err = pickAgent(cfg, cf.Agent); err != nil {
		fmt.Fprintf(e.Stderr, "continuityd %s: %v\n", command, err)
		if cfg.Path == "" {
			NeedsConfig(e.Stderr, command, kind)
		}
		return nil, "", ExitUsage
	}
	return cfg, name, ExitOK
}

// pickAgent picks the agent: the one named, or the only one.
func pickAgent(cfg *config.Config, name string) (string, error) {
	if name != "" {
		if _, ok := cfg.Agent(name); !ok {
			return "", fmt.Errorf("no agent %q in %s", name, ConfigName(cfg))
		}
		return name, nil
	}
	if len(cfg.Agents) != 1 {
		names := make([]string, 0, len(cfg.Agents))
		for _, a := range cfg.Agents {
			names = append(names, a.Name)
		}
		return "", fmt.Errorf("%s has %d agents (%s): name one with --agent", ConfigName(cfg), len(names), strings.Join(names, ", "))
	}
	return cfg.Agents[0].Name, nil
}

// ConfigName names the configuration in messages: its file, or the
// embedded default.
func ConfigName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "the embedded default"
	}
	return cfg.Path
}

// inspectAgent says what Open would say of the agent's files, changing
// nothing: exit 1 when they are damaged.
func inspectAgent(e *Env, name, dir string) int {
	in, err := residency.Inspect(dir)
	if err != nil {
		if strings.Contains(err.Error(), "locked by another process") {
			fmt.Fprintf(e.Stdout, "agent %s is open in a running continuityd, so it was not refused: nothing to recover\n", name)
			return ExitOK
		}
		fmt.Fprintf(e.Stderr, "continuityd recover: agent %s: %v\n", name, err)
		return ExitFailed
	}
	if in.Damage == nil {
		fmt.Fprintf(e.Stdout, "agent %s: nothing is damaged (seq %d in residency.db, %d log records past it, closed cleanly: %v)\n",
			name, in.Seq, len(in.Unapplied), in.Clean)
		return ExitOK
	}
	fmt.Fprintf(e.Stdout, "agent %s is damaged.\nfile:  %s\nfound: %s\nlost:  %s\n\nTo accept the loss and go on: continuityd recover --agent %s --accept-loss\n",
		name, in.Damage.Path, in.Damage.Found, in.Damage.Lost, name)
	return ExitFailed
}

// reloadDaemon asks a running daemon that refused the agent to reload,
// and says what it did or what the operator should do. err is set, and
// nothing signalled, when what answers on the socket is not the daemon it
// claims to be.
func reloadDaemon(ctx context.Context, e *Env, cf ClientFlags, name string) (string, error) {
	hint := "reload continuityd to serve the agent again (systemctl reload continuityd, or send SIGHUP to its pid)"
	st, peer, socket, err := RunningDaemon(ctx, e, cf)
	if errors.Is(err, client.ErrUnreachable) {
		return "no daemon answers on " + socket + ": the agent is served at its next start", nil
	}
	if err != nil {
		return hint, nil
	}
	for _, a := range st.Agents {
		if a.Name == name && a.Damaged != "" {
			pid, err := DaemonPID(st, peer, socket)
			if err != nil {
				return "", err
			}
			if err := SignalReload(pid); err != nil {
				return fmt.Sprintf("could not ask the daemon (pid %d) to reload (%v): %s", pid, err, hint), nil
			}
			return fmt.Sprintf("asked the daemon (pid %d) to reload; `continuityd status` shows the agent once it is served", pid), nil
		}
	}
	return hint, nil
}
