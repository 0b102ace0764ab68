package delxtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// serveRegister is the registration endpoint (see the package doc).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	idx := s.logRequest(Request{At: now, Method: r.Method, URL: r.URL.RequestURI()})
	rec := &statusRecorder{ResponseWriter: w, onStatus: func(code int) { s.setStatus(idx, code) }}
	reg := Registration{At: now}
	fail := func(status int, code, msg string) {
		reg.Result = "http_" + strconv.Itoa(status)
		s.recordRegistration(reg)
		writeJSON(rec, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST only")
		return
	}
	if s.opts.RegistrationKey == "" {
		fail(http.StatusNotFound, "NOT_FOUND", "registration is not enabled")
		return
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	if wait, _, limited := s.limit(ip, now); limited {
		reg.Result = "rate_limited"
		s.recordRegistration(reg)
		s.writeRateLimited(rec, rpcInfo{}, wait)
		return
	}
	var body struct {
		AgentID         *string `json:"agent_id"`
		RegistrationKey *string `json:"registration_key"`
		Source          *string `json:"source"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err != nil || dec.Decode(&body) != nil {
		fail(http.StatusBadRequest, "INVALID_REQUEST", "the body must be one JSON object with agent_id, registration_key and source")
		return
	}
	for name, v := range map[string]*string{"agent_id": body.AgentID, "registration_key": body.RegistrationKey, "source": body.Source} {
		if v == nil || *v == "" {
			fail(http.StatusBadRequest, "MISSING_FIELD", name+" is required")
			return
		}
	}
	reg.AgentID, reg.Source = *body.AgentID, *body.Source
	if *body.RegistrationKey != s.opts.RegistrationKey {
		fail(http.StatusUnauthorized, "INVALID_REGISTRATION_KEY", "the registration key is not valid")
		return
	}
	if !visibleASCII(reg.AgentID) || len(reg.AgentID) > 128 {
		fail(http.StatusBadRequest, "INVALID_AGENT_ID", "agent_id must be 1 to 128 visible ASCII characters")
		return
	}
	reg.Token, reg.SessionID = "dxt_"+randomHex(24), "sess_"+randomHex(12)
	reg.Result = "ok"
	s.mu.Lock()
	s.opts.AgentTokens[reg.AgentID] = reg.Token
	s.sessions[reg.SessionID] = reg.AgentID
	s.regs = append(s.regs, reg)
	s.mu.Unlock()
	writeJSON(rec, http.StatusOK, map[string]any{
		"ok":         true,
		"agent_id":   reg.AgentID,
		"session_id": reg.SessionID,
		"source":     reg.Source,
		"identity_auth": map[string]any{
			"token":   reg.Token,
			"headers": []string{HeaderAgentID, HeaderAgentToken},
		},
	})
}

func (s *Server) recordRegistration(r Registration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs = append(s.regs, r)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func visibleASCII(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
