package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/continuityd/continuityd/upstream/delxtest"
)

// TestSignallingRefusesAnImpostor: something other than the daemon listens
// on the configured socket (here a Go HTTP server in the test process) and
// answers /v1/status naming another process's PID, a sleeping child. Both
// commands that SIGHUP the daemon, `delx register` and `recover
// --accept-loss`, read who is really on the socket (SO_PEERCRED), refuse
// naming the socket and both PIDs, and the child is never signalled.
func TestSignallingRefusesAnImpostor(t *testing.T) {
	fake := delxtest.New(delxtest.Options{RegistrationKey: e2eRegKey})
	t.Cleanup(fake.Close)
	w := newWorkspace(t)
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\nsocket = %q\n\n[upstream.delx]\nkind = \"delx\"\nurl = %q\n\n"+
		"[[agent]]\nname = \"a1\"\nupstreams = [\"local\", \"delx\"]\n", w.state, w.socket, fake.URL())
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// a1's files are damaged, so that recover --accept-loss gets as far
	// as asking the daemon to reload.
	agentDir := filepath.Join(w.state, "agents", "a1")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, "residency.db"), []byte(strings.Repeat("not a bbolt file\n", 512)), 0o600); err != nil {
		t.Fatal(err)
	}

	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })

	l, err := net.Listen("unix", w.socket)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := json.Marshal(map[string]any{"version": "impostor", "pid": victim.Process.Pid, "socket": w.socket,
		"state_dir": w.state, "agents": []map[string]any{{"name": "a1", "damaged": "residency.db: damaged"}}})
	srv := &http.Server{Handler: http.HandlerFunc(func(wr http.ResponseWriter, r *http.Request) {
		wr.Header().Set("Content-Type", "application/json")
		wr.Write(status)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	pid := strconv.Itoa(victim.Process.Pid)
	for _, args := range [][]string{
		{"delx", "register", "--agent", "a1", "--config", w.config},
		{"recover", "--agent", "a1", "--accept-loss", "--config", w.config},
	} {
		code, out, errOut := cli(t, []string{"DELX_REGISTRATION_KEY=" + e2eRegKey}, "", args...)
		if code != 1 || !strings.Contains(errOut, w.socket) || !strings.Contains(errOut, "pid "+pid) ||
			!strings.Contains(errOut, "pid "+strconv.Itoa(os.Getpid())) {
			t.Errorf("%s: exit %d, want 1 and an error naming the socket, pid %s and pid %d\nstdout: %s\nstderr: %s",
				args[0], code, pid, os.Getpid(), out, errOut)
		}
	}
	// Had either command signalled the child, that SIGHUP would have been
	// pending before this SIGTERM, and the lower signal is taken first:
	// the child's end says which came.
	victim.Process.Signal(syscall.SIGTERM)
	victim.Wait()
	if ws := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("the child named by the impostor ended by %v, not by the test's SIGTERM", victim.ProcessState)
	}
}
