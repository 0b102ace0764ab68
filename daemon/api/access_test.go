package api

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/internal/safesocket"
)

// TestAgentAccessRules: root and the daemon's user always; with nobody
// named, the workdir's owner; with users or groups named, those (a group
// by the process's own gid too); anyone else is refused with
// AGENT_FORBIDDEN naming the agent; a request not over the socket (no
// peer) and a peer that could not be read are told apart.
func TestAgentAccessRules(t *testing.T) {
	self := uint32(os.Getuid())
	stranger := self + 4242
	if self == 0 {
		stranger = 4242
	}
	work := t.TempDir() // owned by this process's user
	plain := config.Agent{Name: "plain", Workdir: work}
	named := config.Agent{Name: "named", Workdir: work, Users: []string{"x"}, UIDs: []uint32{stranger}}
	grouped := config.Agent{Name: "grouped", Workdir: work, Groups: []string{"g"}, GIDs: []uint32{777777}}
	for _, c := range []struct {
		ac   config.Agent
		cred safesocket.Cred
		want bool
	}{
		{plain, safesocket.Cred{UID: 0}, true},
		{plain, safesocket.Cred{UID: self}, true},
		{plain, safesocket.Cred{UID: stranger, PID: -1}, false},
		{config.Agent{Name: "noworkdir"}, safesocket.Cred{UID: stranger, PID: -1}, false},
		{named, safesocket.Cred{UID: stranger, PID: -1}, true},
		{named, safesocket.Cred{UID: stranger + 1, PID: -1}, false},
		{grouped, safesocket.Cred{UID: stranger, GID: 777777, PID: -1}, true},
		{grouped, safesocket.Cred{UID: stranger, GID: 1, PID: -1}, false},
	} {
		if got := admits(c.ac, c.cred); got != c.want {
			t.Errorf("admits(%s, %+v) = %v, want %v", c.ac.Name, c.cred, got, c.want)
		}
	}

	var none *peer
	if err := none.mayUse(plain); err != nil {
		t.Errorf("no peer (loopback, in process): %v", err)
	}
	p := peerOf(context.WithValue(context.Background(), peerKey{}, peer{cred: safesocket.Cred{UID: stranger, PID: -1}}))
	err := p.mayUse(plain)
	var ce *capsule.Error
	if !errors.As(err, &ce) || ce.Code != capsule.CodeAgentForbidden || ce.Status != 403 || !strings.Contains(ce.Message, `"plain"`) {
		t.Errorf("a stranger's use of plain: %v", err)
	}
	unread := &peer{err: errors.New("no credentials")}
	if err := unread.mayUse(plain); !errors.As(err, &ce) || ce.Code != capsule.CodeAgentForbidden {
		t.Errorf("an unreadable peer: %v", err)
	}
}
