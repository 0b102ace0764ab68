package daemoncmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/residency"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/front/cli"
)

// cmdRecover is the operator's way on for an agent the daemon refused
// because its files are damaged. Without --accept-loss it only says what
// it finds; with it, the damaged file is moved aside (kept), numbering goes
// on past every sequence number already used, and a running daemon is
// asked to reload so it serves the agent again.
func cmdRecover(ctx context.Context, e *cli.Env, args []string) int {
	fs := cli.NewFlagSet(e, "recover", "[--agent A] [--config FILE] [--accept-loss]")
	var cf cli.ClientFlags
	cf.Register(fs)
	accept := fs.Bool("accept-loss", false, "accept losing what the damaged file held: move it aside and go on")
	if pos, err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage
	} else if len(pos) > 0 {
		return cli.TooMany(e, "recover", pos[0])
	}
	cfg, name, code := configAgent(e, cf, "recover", "qday")
	if code != cli.ExitOK {
		return code
	}
	dir := cfg.AgentDir(name)
	if !*accept {
		return inspectAgent(e, name, dir)
	}
	acc, err := residency.AcceptLoss(dir, time.Now())
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd recover: agent %s: %v\n", name, err)
		return cli.ExitFailed
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
		return cli.ExitFailed
	}
	fmt.Fprintln(e.Stdout, said)
	return cli.ExitOK
}

// configAgent loads the configuration the flags name (or the embedded
// default) and picks the agent: the one named, or the only one. code is
// ExitUsage, said on stderr, when either fails; an agent the embedded
// default does not have (the tour's builder) is said to need a config with
// an upstream of kind.
func configAgent(e *cli.Env, cf cli.ClientFlags, command, kind string) (cfg *config.Config, name string, code int) {
	cfg, err := cli.LoadConfig(e, cf.Config)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd: %v\n", err)
		return nil, "", cli.ExitUsage
	}
	if name, err = pickAgent(cfg, cf.Agent); err != nil {
		fmt.Fprintf(e.Stderr, "continuityd %s: %v\n", command, err)
		if cfg.Path == "" {
			cli.NeedsConfig(e.Stderr, command, kind)
		}
		return nil, "", cli.ExitUsage
	}
	return cfg, name, cli.ExitOK
}

// pickAgent picks the agent: the one named, or the only one.
func pickAgent(cfg *config.Config, name string) (string, error) {
	if name != "" {
		if _, ok := cfg.Agent(name); !ok {
			return "", fmt.Errorf("no agent %q in %s", name, configName(cfg))
		}
		return name, nil
	}
	if len(cfg.Agents) != 1 {
		names := make([]string, 0, len(cfg.Agents))
		for _, a := range cfg.Agents {
			names = append(names, a.Name)
		}
		return "", fmt.Errorf("%s has %d agents (%s): name one with --agent", configName(cfg), len(names), strings.Join(names, ", "))
	}
	return cfg.Agents[0].Name, nil
}

// configName names the configuration in messages: its file, or the
// embedded default.
func configName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "the embedded default"
	}
	return cfg.Path
}

// inspectAgent says what Open would say of the agent's files, changing
// nothing: exit 1 when they are damaged.
func inspectAgent(e *cli.Env, name, dir string) int {
	in, err := residency.Inspect(dir)
	if err != nil {
		if strings.Contains(err.Error(), "locked by another process") {
			fmt.Fprintf(e.Stdout, "agent %s is open in a running continuityd, so it was not refused: nothing to recover\n", name)
			return cli.ExitOK
		}
		fmt.Fprintf(e.Stderr, "continuityd recover: agent %s: %v\n", name, err)
		return cli.ExitFailed
	}
	if in.Damage == nil {
		fmt.Fprintf(e.Stdout, "agent %s: nothing is damaged (seq %d in residency.db, %d log records past it, closed cleanly: %v)\n",
			name, in.Seq, len(in.Unapplied), in.Clean)
		return cli.ExitOK
	}
	fmt.Fprintf(e.Stdout, "agent %s is damaged.\nfile:  %s\nfound: %s\nlost:  %s\n\nTo accept the loss and go on: continuityd recover --agent %s --accept-loss\n",
		name, in.Damage.Path, in.Damage.Found, in.Damage.Lost, name)
	return cli.ExitFailed
}

// reloadDaemon asks a running daemon that refused the agent to reload,
// and says what it did or what the operator should do. err is set, and
// nothing signalled, when what answers on the socket is not the daemon it
// claims to be.
func reloadDaemon(ctx context.Context, e *cli.Env, cf cli.ClientFlags, name string) (string, error) {
	hint := "reload continuityd to serve the agent again (systemctl reload continuityd, or send SIGHUP to its pid)"
	st, peer, socket, err := cli.RunningDaemon(ctx, e, cf)
	if errors.Is(err, client.ErrUnreachable) {
		return "no daemon answers on " + socket + ": the agent is served at its next start", nil
	}
	if err != nil {
		return hint, nil
	}
	for _, a := range st.Agents {
		if a.Name == name && a.Damaged != "" {
			pid, err := cli.DaemonPID(st, peer, socket)
			if err != nil {
				return "", err
			}
			if err := signalReload(pid); err != nil {
				return fmt.Sprintf("could not ask the daemon (pid %d) to reload (%v): %s", pid, err, hint), nil
			}
			return fmt.Sprintf("asked the daemon (pid %d) to reload; `continuityd status` shows the agent once it is served", pid), nil
		}
	}
	return hint, nil
}
