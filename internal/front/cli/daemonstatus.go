package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/safesocket"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// printHealth prints, below status's table, each agent's workdir and how
// its watch, transcripts and snapshots are doing, and how the last
// configuration reload went: what a person needs to see that something
// does not work.
func printHealth(w io.Writer, st *ops.StatusAnswer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range st.Agents {
		if a.Damaged != "" {
			continue
		}
		workdir := a.Workdir
		if workdir == "" {
			workdir = "(none: nothing is watched)"
		}
		fmt.Fprintf(tw, "\nagent %s\t%s\n", termsafe.Line(a.Name), termsafe.Line(workdir))
		for _, c := range a.Components {
			state := c.State
			if c.Detail != "" {
				state += ": " + c.Detail
			}
			fmt.Fprintf(tw, "  %s\t%s\n", termsafe.Line(c.Name), termsafe.Line(state))
		}
	}
	tw.Flush()
	if r := st.LastReload; r != nil {
		at := r.At.UTC().Format(time.RFC3339)
		switch r.Outcome {
		case "ok":
			fmt.Fprintf(w, "\nlast reload: ok at %s\n", at)
		default:
			// A config error may name several problems, one a line.
			lines := strings.Split(strings.TrimRight(r.Error, "\n"), "\n")
			fmt.Fprintf(w, "\nlast reload: %s at %s: %s\n", termsafe.Line(r.Outcome), at, termsafe.Line(lines[0]))
			for _, l := range lines[1:] {
				fmt.Fprintf(w, "  %s\n", termsafe.Line(l))
			}
		}
	}
}

// RunningDaemon asks the daemon the client flags name for its status, for
// commands that change files the daemon reads and then tell it so
// (recover, delx register). socket is where it asked; peer is who answered
// there, as the kernel says; st is nil when no daemon answered (err says
// why).
func RunningDaemon(ctx context.Context, e *Env, cf ClientFlags) (st *ops.StatusAnswer, peer safesocket.Cred, socket string, err error) {
	c, err := cf.Client(e)
	if err != nil {
		return nil, peer, "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	method, path, q, err := ops.Status.Route(ops.Args{})
	if err != nil {
		return nil, peer, c.Socket, err
	}
	out, peer, err := c.DoPeer(ctx, method, path, q, nil)
	if err != nil {
		return nil, peer, c.Socket, err
	}
	if st, err = ops.Status.Decode(out); err != nil {
		return nil, peer, c.Socket, err
	}
	return st, peer, c.Socket, nil
}

// DaemonPID is the PID a command may signal: the one the status names,
// only when it is the process that answered on the socket (the kernel's
// word, not the answer's) and that process runs as this user (root may
// signal a daemon run as its own service user). Whatever else listens on
// the socket path and names some other process is refused, with the
// socket and both PIDs named: signalling on its word would let it have
// any process of ours killed.
func DaemonPID(st *ops.StatusAnswer, peer safesocket.Cred, socket string) (int, error) {
	if st.PID != peer.PID {
		return 0, fmt.Errorf("the process answering on %s (pid %d, uid %d) names pid %d as the daemon: not signalling a process it does not prove to be",
			socket, peer.PID, peer.UID, st.PID)
	}
	if uid := os.Getuid(); uid != 0 && peer.UID != uint32(uid) {
		return 0, fmt.Errorf("the process answering on %s (pid %d) runs as uid %d, not as this user (uid %d): not signalling it",
			socket, peer.PID, peer.UID, uid)
	}
	return st.PID, nil
}
