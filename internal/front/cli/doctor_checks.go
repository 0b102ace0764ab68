package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/front/agentconf"
	"github.com/continuityd/continuityd/internal/front/agentfiles"
	"github.com/continuityd/continuityd/internal/gittool"
	"github.com/continuityd/continuityd/internal/ops"
)

// fixBinaries is how both binaries get on PATH.
const fixBinaries = "go install ./cmd/... from a clone of continuityd, with $(go env GOPATH)/bin on PATH (or install the package)"

// binaries: both on PATH, since the agents' hooks run continuityd by name
// and it hands the daemon's commands to continuityd-daemon.
func (d *doctor) binaries() {
	var found, missing []string
	for _, name := range []string{agentconf.Binary, DaemonBinary} {
		p, err := exec.LookPath(name)
		switch {
		case errors.Is(err, exec.ErrDot):
			missing = append(missing, name+" (only in the current directory, which PATH names relatively)")
		case err != nil:
			missing = append(missing, name)
		default:
			found = append(found, name+" "+p)
		}
	}
	if len(missing) > 0 {
		d.add("binaries", checkFail, strings.Join(missing, " and ")+" not on PATH: the agents' hooks run continuityd by name", fixBinaries)
		return
	}
	d.add("binaries", checkOK, strings.Join(found, ", "), "")
}

// daemon: the daemon answers on the socket the client commands use.
func (d *doctor) daemon(ctx context.Context) {
	st, peer, sock, err := RunningDaemon(ctx, d.e, d.cf)
	var ue *client.UnreachableError
	var ae *client.APIError
	switch {
	case errors.As(err, &ue):
		d.add("daemon", checkFail, fmt.Sprintf("not reachable at %s: %s", ue.Socket, ue.Reason),
			"continuityd run   (in your project; or continuityd service start --user for an installed service)")
	case errors.As(err, &ae):
		d.add("daemon", checkFail, fmt.Sprintf("the daemon at %s refuses its status: %s %s", sock, ae.Code, ae.Message), "")
	case err != nil:
		d.add("daemon", checkFail, fmt.Sprintf("no status from %s: %v", sock, err), "")
	default:
		d.status, d.peerUID = st, peer.UID
		d.add("daemon", checkOK, fmt.Sprintf("continuityd %s, pid %d, at %s", st.Version, st.PID, sock), "")
	}
}

// skipped adds name as not checked, for want of a daemon.
func (d *doctor) skipped(name string) bool {
	if d.status == nil {
		d.add(name, checkSkip, "the daemon is not reachable", "")
		return true
	}
	return false
}

// agentHere is the agent whose place holds the current directory (or the
// one --agent names), if any.
func (d *doctor) agentHere() (ops.AgentStatus, bool) {
	var best ops.AgentStatus
	found := false
	for _, a := range d.status.Agents {
		if d.cf.Agent != "" {
			if a.Name == d.cf.Agent {
				return a, true
			}
			continue
		}
		if a.Workdir == "" || d.cwd == "" {
			continue
		}
		if rel, err := filepath.Rel(a.Workdir, d.cwd); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			if !found || len(a.Workdir) > len(best.Workdir) {
				best, found = a, true
			}
		}
	}
	return best, found
}

// place: the agent this directory's hooks and commands reach; agents
// refused for damaged files.
func (d *doctor) place() {
	if d.skipped("place") {
		return
	}
	for _, a := range d.status.Agents {
		if a.Damaged != "" {
			d.add("agent "+a.Name, checkFail, "not served: "+a.Damaged, "continuityd recover --agent "+a.Name)
		}
	}
	a, ok := d.agentHere()
	switch {
	case ok:
		d.add("place", checkOK, fmt.Sprintf("agent %s, working in %s", a.Name, a.Workdir), "")
	case d.cf.Agent != "":
		d.add("place", checkFail, fmt.Sprintf("the daemon serves no agent %s", d.cf.Agent), "continuityd status   (lists the agents)")
	default:
		d.add("place", checkWarn, fmt.Sprintf("no agent's place holds %s: an agent session here is adopted as a place only under [places] roots", d.cwd),
			fmt.Sprintf("continuityd run --workdir %s   (or an [[agent]] with this workdir in the config)", d.cwd))
	}
}

// hooks: which agents run continuityd's hooks, in which scope, all of them
// there, and whether their commands run.
func (d *doctor) hooks() {
	home := d.e.Getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	env := agentfiles.Env{Home: home, Dir: d.cwd, Getenv: d.e.Getenv}
	var installed, problems, fixes []string
	for _, agent := range []string{"claude-code", "codex"} {
		for _, scope := range agentfiles.Scopes {
			targets, err := agentfiles.Targets(agent, scope, env)
			if err != nil {
				continue
			}
			where := fmt.Sprintf("%s (%s scope, %s)", agent, scope, shown(home, targets[0].Path))
			var ours bool
			var missing, cmds []string
			for _, t := range targets {
				in, err := agentfiles.Inspect(t)
				if err != nil {
					problems = append(problems, shown(home, err.Error()))
					fixes = append(fixes, "fix the file, then: continuityd install "+agent+" --scope "+scope)
					continue
				}
				if agent == "claude-code" && t.Kind == agentfiles.ClaudeSettings {
					if p := pluginEnabled(t.Path); p != "" {
						installed = append(installed, fmt.Sprintf("claude-code (the plugin %s, %s scope)", p, scope))
					}
				}
				ours = ours || in.Ours
				missing = append(missing, in.Missing...)
				cmds = append(cmds, in.Commands...)
			}
			if !ours {
				continue
			}
			installed = append(installed, where)
			if len(missing) > 0 {
				problems = append(problems, where+": missing "+strings.Join(missing, "; "))
				fixes = append(fixes, "continuityd install "+agent+" --scope "+scope)
			}
			for _, c := range slices.Compact(slices.Sorted(slices.Values(cmds))) {
				if why := runs(c); why != "" {
					problems = append(problems, fmt.Sprintf("%s: %q does not run: %s", where, c, why))
					fixes = append(fixes, fixBinaries)
				}
			}
		}
	}
	switch {
	case len(problems) > 0:
		d.add("hooks", checkFail, strings.Join(problems, "; "), strings.Join(slices.Compact(fixes), "; "))
	case len(installed) == 0:
		d.add("hooks", checkFail, "no agent runs continuityd's hooks: neither Claude Code's settings nor Codex's config hold them, here or in your home",
			"continuityd install claude-code   (or: continuityd install codex)")
	default:
		d.add("hooks", checkOK, "installed for "+strings.Join(installed, ", ")+"; their commands run", "")
	}
}

// pluginEnabled is the continuityd plugin a Claude Code settings file
// enables, if any: its hooks come with it, not in the file.
func pluginEnabled(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var s struct {
		EnabledPlugins map[string]any `json:"enabledPlugins"`
	}
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	for k, v := range s.EnabledPlugins {
		if strings.HasPrefix(k, agentconf.ServerName+"@") && v == true {
			return k
		}
	}
	return ""
}

// runs says why a hook's command would not start ("" when it would): its
// program, looked up on this PATH (the agent's may differ) or at its path.
func runs(command string) string {
	f := strings.Fields(command)
	if len(f) == 0 {
		return "an empty command"
	}
	if strings.ContainsRune(f[0], '/') {
		fi, err := os.Stat(f[0])
		switch {
		case err != nil:
			return "no such file"
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return "not an executable file"
		}
		return ""
	}
	if _, err := exec.LookPath(f[0]); err != nil {
		return f[0] + " is not on PATH"
	}
	return ""
}

// roundTrip times what an agent waits for at each hook: continuityd hook
// starting and ending (on an event it passes to nobody), and the daemon
// answering.
func (d *doctor) roundTrip(ctx context.Context) {
	bin, err := exec.LookPath(agentconf.Binary)
	if err != nil {
		d.add("hook round trip", checkSkip, "continuityd is not on PATH", "")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	payload := fmt.Sprintf(`{"hook_event_name":"Notification","session_id":"continuityd-doctor","cwd":%q}`, d.cwd)
	cmd := exec.CommandContext(ctx, bin, "hook")
	cmd.Stdin = strings.NewReader(payload)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		d.add("hook round trip", checkFail, fmt.Sprintf("%s hook failed: %v %s", bin, err, strings.TrimSpace(string(out))), fixBinaries)
		return
	}
	detail := fmt.Sprintf("continuityd hook ran in %s", took.Round(time.Millisecond))
	if d.status != nil {
		if c, err := d.cf.Client(d.e); err == nil {
			t0 := time.Now()
			_, err := ops.Health.Do(ctx, c, ops.Args{})
			c.Close()
			if err == nil {
				answer := time.Since(t0)
				took += answer
				detail += fmt.Sprintf(", the daemon answered in %s", answer.Round(time.Millisecond))
			}
		}
	}
	budget := d.e.hookBudget()
	if took > budget {
		d.add("hook round trip", checkWarn, fmt.Sprintf("%s: over the %s an agent's hook may take (the hook cuts its work short to keep it)", detail, budget),
			"a loaded machine or a slow disk: see continuityd status")
		return
	}
	d.add("hook round trip", checkOK, fmt.Sprintf("%s (an agent waits at most %s)", detail, budget), "")
}

// components: how the place's watch, transcripts and snapshots are doing.
func (d *doctor) components() {
	if d.status == nil {
		d.add("transcripts", checkSkip, "the daemon is not reachable", "")
		return
	}
	a, ok := d.agentHere()
	if !ok {
		d.add("transcripts", checkSkip, "no agent's place holds this directory", "")
		return
	}
	for _, c := range a.Components {
		switch c.Name {
		case "watch", "transcripts", "snapshots":
		default:
			continue
		}
		detail := c.State
		if c.Detail != "" {
			detail += ": " + c.Detail
		}
		switch c.State {
		case "ok":
			d.add(c.Name, checkOK, detail, "")
		case "off":
			d.add(c.Name, checkOK, "off in the config", "")
		default:
			d.add(c.Name, checkWarn, detail, "continuityd status   (and the daemon's log)")
		}
	}
}

// git: the snapshots need it.
func (d *doctor) git(ctx context.Context) {
	t, err := gittool.Find(ctx, "")
	if err != nil {
		d.add("git", checkFail, err.Error()+" (snapshots need it)", "install git (e.g. apt-get install git)")
		return
	}
	d.add("git", checkOK, fmt.Sprintf("git %s at %s", t.Version, t.Path), "")
}

// stateDir: the daemon's state directory (or, with no daemon, the one the
// hooks spool into) is writable, with room.
func (d *doctor) stateDir() {
	dir := stateDir(d.e, d.cf)
	if d.status != nil {
		dir = d.status.StateDir
		if uid := os.Getuid(); uid != 0 && uint32(uid) != d.peerUID {
			d.add("state directory", checkSkip, fmt.Sprintf("%s is the daemon's, which runs as uid %d: not checked from here", dir, d.peerUID), "")
			return
		}
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		d.add("state directory", checkWarn, dir+" does not exist yet: the daemon makes it at its first start", "continuityd run")
		return
	}
	f, err := os.CreateTemp(dir, ".continuityd-doctor-*")
	if err != nil {
		d.add("state directory", checkFail, fmt.Sprintf("%s is not writable: %v", dir, errors.Unwrap(err)),
			fmt.Sprintf("chmod u+rwx %s   (and chown it to the daemon's user)", dir))
		return
	}
	f.Close()
	os.Remove(f.Name())
	free := freeSpace(dir)
	switch {
	case free < 0:
		d.add("state directory", checkOK, dir+" is writable", "")
	case free < 64<<20:
		d.add("state directory", checkFail, fmt.Sprintf("%s is writable, but only %s is free: saves are refused when the disk is full", dir, bytesText(free)), "free space on the file system of "+dir)
	case free < 512<<20:
		d.add("state directory", checkWarn, fmt.Sprintf("%s is writable, %s free", dir, bytesText(free)), "free space on the file system of "+dir)
	default:
		d.add("state directory", checkOK, fmt.Sprintf("%s is writable, %s free", dir, bytesText(free)), "")
	}
}

// bytesText is n bytes for a person.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// upstreams: each upstream's delivery, worst first across the agents.
func (d *doctor) upstreams() {
	if d.skipped("upstreams") {
		return
	}
	type seen struct {
		u      capsule.UpstreamState
		agents []string
	}
	var order []string
	by := map[string]*seen{}
	rank := map[string]int{capsule.UpstreamOK: 0, "retrying": 1, "paused": 1, "unauthorized": 2, "rejected": 2}
	for _, a := range d.status.Agents {
		for _, u := range a.Upstreams {
			s := by[u.Name]
			if s == nil {
				s = &seen{u: u}
				by[u.Name] = s
				order = append(order, u.Name)
			} else if rank[u.State] > rank[s.u.State] {
				s.u = u
			}
			s.agents = append(s.agents, a.Name)
		}
	}
	for _, name := range order {
		s := by[name]
		u := s.u
		detail := fmt.Sprintf("%s (agents %s)", u.State, strings.Join(s.agents, ", "))
		if u.LastError != nil {
			detail += ": " + *u.LastError
		}
		switch u.State {
		case capsule.UpstreamOK:
			d.add("upstream "+name, checkOK, detail, "")
		case "unauthorized":
			d.add("upstream "+name, checkFail, detail, fmt.Sprintf("set the token of [upstream.%s] (token_env or token_file), then continuityd config check", name))
		case "rejected":
			d.add("upstream "+name, checkFail, fmt.Sprintf("%s; %d in the dead letter", detail, u.DeadLetter), "continuityd deadletter list --upstream "+name)
		default:
			d.add("upstream "+name, checkWarn, fmt.Sprintf("%s; %d pending", detail, u.Pending), "continuityd status   (it retries by itself)")
		}
	}
}
