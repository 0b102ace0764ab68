package delx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/continuityd/continuityd/internal/atomicfile"
	"github.com/continuityd/continuityd/internal/safefile"
)

// Identity is one agent's Delx identity: what Delx's registration issued
// for it. Every call for the agent carries it: AgentID and Token as the
// x-delx-agent-id / x-delx-agent-token headers, SessionID as the session_id
// of leave_hive_note and close_session, AgentID as the agent_id of
// leave_hive_note and resume_session.
type Identity struct {
	AgentID   string
	SessionID string
	Token     string
	// FleetID is the Delx fleet the agent belongs to ("" none): its
	// capsules are written to the fleet too, and it may read its fellow
	// members' (ReadMember). InviteToken is the fleet's invite token, sent
	// beside fleet_id so Delx joins the agent ("" once it has joined). Both
	// travel only as tool arguments to the configured Delx endpoint.
	FleetID     string
	InviteToken string
}

// check says what makes id unusable, never repeating the token.
func (id Identity) check() error {
	switch {
	case id.AgentID == "" || !validHeaderValue(id.AgentID):
		return errors.New("its agent_id is empty or has characters a header cannot carry")
	case id.SessionID == "" || !validHeaderValue(id.SessionID):
		return errors.New("its session_id is empty or has characters a header cannot carry")
	case len(bytes.TrimSpace([]byte(id.Token))) == 0:
		return errors.New("its token is empty")
	case !validHeaderValue(id.Token):
		return errors.New("its token has characters a header cannot carry")
	case id.InviteToken != "" && id.FleetID == "":
		return errors.New("it has a fleet invite token but no fleet_id")
	case !validHeaderValue(id.FleetID) || strings.TrimSpace(id.FleetID) != id.FleetID:
		return errors.New("its fleet_id has characters Delx's ids do not")
	case !validHeaderValue(id.InviteToken):
		return errors.New("its fleet invite token has characters a token does not")
	}
	return nil
}

// StoredIdentity is the identity file `continuityd delx register` keeps in
// the agent's state directory (IdentityPath), mode 0600.
type StoredIdentity struct {
	AgentID         string    `json:"agent_id"`
	SessionID       string    `json:"session_id"`
	Token           string    `json:"token"`
	Upstream        string    `json:"upstream"`
	RegistrationURL string    `json:"registration_url"`
	RegisteredAt    time.Time `json:"registered_at"`
}

// Identity is the part of s the calls use.
func (s StoredIdentity) Identity() Identity {
	return Identity{AgentID: s.AgentID, SessionID: s.SessionID, Token: s.Token}
}

// IdentityPath is where the registered identity of an agent (whose state
// directory is agentDir) at the delx upstream named upstream is kept: one
// file per upstream, as an agent may ship to two Delx services.
func IdentityPath(agentDir, upstream string) string {
	return filepath.Join(agentDir, "delx-identity-"+upstream+".json")
}

// ErrNotRegistered is wrapped by ReadIdentityFile when there is no file.
var ErrNotRegistered = errors.New("not registered")

// maxIdentityFile bounds the identity file: it holds three short values.
const maxIdentityFile = 64 << 10

// ReadIdentityFile reads an identity file written by WriteIdentityFile. The
// file must be a regular file (not a link) private to this process's user;
// errors name the file and what is wrong, never its content.
func ReadIdentityFile(path string) (StoredIdentity, error) {
	f, fi, err := safefile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return StoredIdentity{}, fmt.Errorf("%w: no identity file %s", ErrNotRegistered, path)
	}
	if err != nil {
		return StoredIdentity{}, err
	}
	defer f.Close()
	if err := safefile.CheckPrivate(fi, path); err != nil {
		return StoredIdentity{}, err
	}
	b, err := safefile.ReadAll(f, fi, path, maxIdentityFile)
	if err != nil {
		return StoredIdentity{}, err
	}
	var s StoredIdentity
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		// The decoder's text may quote the content; the token must not
		// reach a log.
		return StoredIdentity{}, fmt.Errorf("%s is not a Delx identity file (JSON with agent_id, session_id and token); register again with --force", path)
	}
	if err := s.Identity().check(); err != nil {
		return StoredIdentity{}, fmt.Errorf("%s: %v; register again with --force", path, err)
	}
	return s, nil
}

// WriteIdentityFile keeps s at path, atomically and durably, mode 0600,
// creating the agent's directory (mode 0700) when it is missing.
func WriteIdentityFile(path string, s StoredIdentity) error {
	if err := s.Identity().check(); err != nil {
		return fmt.Errorf("the identity Delx returned is unusable: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}
