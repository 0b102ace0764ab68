package daemoncmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/front/cli"
	"github.com/continuityd/continuityd/upstream/delx"
)

// registrationKeyEnv holds the Delx registration key (interface.md).
const registrationKeyEnv = "DELX_REGISTRATION_KEY"

const delxUsage = "register [--agent A] [--upstream NAME] [--config FILE] [--agent-id ID] [--key-file FILE] [--force]"

// cmdDelx is `continuityd delx register`: register an agent with Delx and
// keep the identity it returns in the agent's state directory, where the
// daemon reads it at every call.
func cmdDelx(ctx context.Context, e *cli.Env, args []string) int {
	fs := cli.NewFlagSet(e, "delx", delxUsage)
	var cf cli.ClientFlags
	cf.Register(fs)
	upName := fs.String("upstream", "", "the delx upstream by `NAME` (may be left out when the agent ships to one)")
	agentID := fs.String("agent-id", "", "the agent_id to ask Delx for, an `ID` (without it: the agent's name)")
	keyFile := fs.String("key-file", "", "read the registration key from this `FILE` (mode 0600) instead of $"+registrationKeyEnv)
	force := fs.Bool("force", false, "register again: Delx issues a new identity and the one kept is replaced")
	switch pos, err := cli.ParseFlags(fs, args); {
	case err != nil:
		return cli.ExitUsage
	case len(pos) == 0:
		return cli.Missing(e, "delx", "the action: register")
	case pos[0] != "register":
		return cli.UnknownSub(e, "delx", pos[0])
	case len(pos) > 1:
		return cli.TooMany(e, "delx register", pos[1])
	}
	usageErr := func(err error) int {
		fmt.Fprintf(e.Stderr, "continuityd delx register: %v\n", err)
		return cli.ExitUsage
	}
	cfg, name, code := configAgent(e, cf, "delx register", "delx")
	if code != cli.ExitOK {
		return code
	}
	ac, _ := cfg.Agent(name)
	up, uc, err := delxUpstream(cfg, ac, *upName)
	if err != nil {
		code := usageErr(err)
		if cfg.Path == "" {
			cli.NeedsConfig(e.Stderr, "delx register", "delx")
		}
		return code
	}
	if _, ok := ac.Identity[up]; ok {
		return usageErr(fmt.Errorf("agent %s has its Delx identity for upstream %s in %s ([agent.identity.%s]), which wins over a registered one; remove that table to register here", name, up, configName(cfg), up))
	}
	path := delx.IdentityPath(cfg.AgentDir(name), up)
	if old, err := delx.ReadIdentityFile(path); err == nil && !*force {
		fmt.Fprintf(e.Stderr, "continuityd delx register: agent %s is registered already (agent_id %s, session_id %s, kept in %s); registering again makes Delx issue a new identity: pass --force to do so\n",
			name, old.AgentID, old.SessionID, path)
		return cli.ExitFailed
	} else if err != nil && !errors.Is(err, delx.ErrNotRegistered) && !*force {
		fmt.Fprintf(e.Stderr, "continuityd delx register: agent %s: %v\n", name, err)
		return cli.ExitFailed
	}
	key, err := registrationKey(e, *keyFile)
	if err != nil {
		return usageErr(err)
	}
	regURL := uc.RegistrationURL
	if regURL == "" {
		if regURL, err = delx.RegistrationURL(uc.URL); err != nil {
			return usageErr(fmt.Errorf("upstream %s: %v", up, err))
		}
	}
	if *agentID == "" {
		*agentID = name
	}
	id, err := delx.Register(ctx, delx.Registration{URL: regURL, AgentID: *agentID, Key: key, Source: "continuityd", Timeout: uc.Timeout.Duration})
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd delx register: agent %s at %s: %v\n", name, regURL, err)
		return cli.ExitFailed
	}
	stored := delx.StoredIdentity{AgentID: id.AgentID, SessionID: id.SessionID, Token: id.Token, Upstream: up,
		RegistrationURL: regURL, RegisteredAt: time.Now().UTC().Truncate(time.Second)}
	if err := delx.WriteIdentityFile(path, stored); err != nil {
		fmt.Fprintf(e.Stderr, "continuityd delx register: Delx registered agent %s (agent_id %s) but keeping its identity failed: %v\n", name, id.AgentID, err)
		return cli.ExitFailed
	}
	// The token is never printed: where it is kept is enough.
	fmt.Fprintf(e.Stdout, "registered agent %s with Delx (upstream %s)\nagent_id:   %s\nsession_id: %s\nidentity:   %s (mode 0600; the token is there)\n",
		name, up, id.AgentID, id.SessionID, path)
	if cf.Socket == "" && cf.Config == "" {
		cf.Socket = cfg.Daemon.Socket
	}
	said, err := kickDaemon(ctx, e, cf, cfg, name)
	if err != nil {
		fmt.Fprintf(e.Stderr, "continuityd delx register: the identity is kept, but %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintln(e.Stdout, said)
	return cli.ExitOK
}

// delxUpstream picks the delx upstream: the one named (which the agent must
// ship to), or the agent's only one.
func delxUpstream(cfg *config.Config, ac config.Agent, name string) (string, config.Upstream, error) {
	var mine []string
	for _, u := range ac.Upstreams {
		if uc, ok := cfg.UpstreamFor(u); ok && uc.Kind == config.KindDelx {
			mine = append(mine, u)
		}
	}
	switch {
	case name != "" && !slices.Contains(mine, name):
		return "", config.Upstream{}, fmt.Errorf("agent %s ships to no delx upstream %q in %s (its delx upstreams: %s)", ac.Name, name, configName(cfg), listOrNone(mine))
	case name != "":
	case len(mine) == 1:
		name = mine[0]
	case len(mine) == 0:
		return "", config.Upstream{}, fmt.Errorf("agent %s ships to no delx upstream in %s: add an [upstream.NAME] of kind \"delx\" to its upstreams", ac.Name, configName(cfg))
	default:
		return "", config.Upstream{}, fmt.Errorf("agent %s ships to %d delx upstreams (%s): name one with --upstream", ac.Name, len(mine), strings.Join(mine, ", "))
	}
	uc, _ := cfg.UpstreamFor(name)
	return name, uc, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// registrationKey reads the key from --key-file, else the environment.
func registrationKey(e *cli.Env, file string) (string, error) {
	if file != "" {
		return config.ReadSecretFile(file)
	}
	k := strings.TrimSpace(e.Getenv(registrationKeyEnv))
	if k == "" {
		return "", fmt.Errorf("no registration key: set $%s to the key Delx gave you, or pass --key-file FILE", registrationKeyEnv)
	}
	return k, nil
}

// kickDaemon asks a running daemon that serves the agent to retry its
// deliveries now (SIGHUP: a reload retries every upstream at once), and
// says what it did. The daemon reads the identity at every call, so this
// only cuts short the wait of a delivery that failed for want of it. err
// is set, and nothing signalled, when what answers on the socket is not
// the daemon it claims to be.
func kickDaemon(ctx context.Context, e *cli.Env, cf cli.ClientFlags, cfg *config.Config, name string) (string, error) {
	const later = "the daemon uses it at its next Delx call"
	st, peer, socket, err := cli.RunningDaemon(ctx, e, cf)
	if errors.Is(err, client.ErrUnreachable) {
		return "no daemon answers on " + socket + ": the identity is used once it runs", nil
	}
	if err != nil || st.StateDir != cfg.Daemon.StateDir {
		return later, nil
	}
	for _, a := range st.Agents {
		if a.Name == name {
			pid, err := cli.DaemonPID(st, peer, socket)
			if err != nil {
				return "", err
			}
			if err := signalReload(pid); err != nil {
				return fmt.Sprintf("%s (asking the daemon, pid %d, to retry at once failed: %v)", later, pid, err), nil
			}
			return fmt.Sprintf("asked the daemon (pid %d) to retry its deliveries with it now", pid), nil
		}
	}
	return later, nil
}
