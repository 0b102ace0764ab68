package delx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/continuityd/continuityd/upstream"
)

// RegistrationPath is Delx's registration endpoint, on the MCP endpoint's
// host: POST {"agent_id","registration_key","source"}.
const RegistrationPath = "/api/v1/agents/register"

// RegistrationURL derives the registration endpoint from the MCP endpoint
// (https://api.delx.ai/v1/mcp → https://api.delx.ai/api/v1/agents/register).
func RegistrationURL(mcpURL string) (string, error) {
	u, err := url.Parse(mcpURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errors.New("the url must be an absolute http(s) URL")
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: RegistrationPath}).String(), nil
}

// Registration is one call to the registration endpoint.
type Registration struct {
	URL     string // the registration endpoint
	AgentID string // the agent_id asked for
	Key     string // the registration key; never logged, never in an error
	Source  string // who registers ("continuityd")
	// Timeout bounds the call (default DefaultTimeout).
	Timeout time.Duration
	// HTTPClient is optional (tests); redirects are never followed, as the
	// body carries the key.
	HTTPClient *http.Client
}

// RegisterError is a registration Delx refused or could not answer.
// Its text never holds the key or a token.
type RegisterError struct {
	Status     int           // HTTP status; 0 when there was no answer
	Code       string        // the error code of the answer's body, if any
	RetryAfter time.Duration // of a 429
	Msg        string
}

func (e *RegisterError) Error() string {
	var b strings.Builder
	b.WriteString("registration failed")
	if e.Status != 0 {
		fmt.Fprintf(&b, ": Delx answered %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// maxRegistrationAnswer bounds the answer read.
const maxRegistrationAnswer = 1 << 20

// Register registers r.AgentID with Delx and returns the identity it
// issued: the agent_id, identity_auth.token and session_id of the answer
// (the agent_id Delx returns wins over the one asked for).
func Register(ctx context.Context, r Registration) (Identity, error) {
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	body, err := json.Marshal(map[string]string{"agent_id": r.AgentID, "registration_key": r.Key, "source": r.Source})
	if err != nil {
		return Identity{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		return Identity{}, errors.New("the registration url is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	hc := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if r.HTTPClient != nil {
		hc.Transport, hc.Timeout = r.HTTPClient.Transport, r.HTTPClient.Timeout
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error carries the URL (no secret: the key is in the body).
		return Identity{}, &RegisterError{Msg: scrub(err.Error(), r.Key)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistrationAnswer))
	if err != nil {
		return Identity{}, &RegisterError{Status: resp.StatusCode, Msg: "reading the answer failed"}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		re := &RegisterError{Status: resp.StatusCode}
		if ue := upstream.FromHTTP(resp.StatusCode, resp.Header, raw, time.Now()); ue != nil {
			re.Code, re.RetryAfter = ue.Code, ue.RetryAfter
			if ue.Err != nil {
				re.Msg = scrub(ue.Err.Error(), r.Key)
			}
		}
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			re.Msg = strings.TrimPrefix(re.Msg+"; check the registration key", "; ")
		}
		return Identity{}, re
	}
	var ans struct {
		AgentID      string `json:"agent_id"`
		SessionID    string `json:"session_id"`
		IdentityAuth struct {
			Token string `json:"token"`
		} `json:"identity_auth"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return Identity{}, &RegisterError{Status: resp.StatusCode, Msg: "the answer is not the JSON object Delx documents"}
	}
	id := Identity{AgentID: ans.AgentID, SessionID: ans.SessionID, Token: strings.TrimSpace(ans.IdentityAuth.Token)}
	if id.AgentID == "" {
		id.AgentID = r.AgentID
	}
	if err := id.check(); err != nil {
		return Identity{}, &RegisterError{Status: resp.StatusCode, Msg: "the answer lacks a usable identity: " + err.Error()}
	}
	return id, nil
}

// scrub prepares server or transport text for an error: the key is cut
// out, credential shapes redacted, the rest shortened.
func scrub(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[registration key]")
	}
	return upstream.CleanMessage(s)
}
