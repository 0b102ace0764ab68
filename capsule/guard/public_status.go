package guard

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// The public status is PUBLIC: the Q-Day office shows it to anyone. So on
// top of the general secret guard it gets the seed's stricter content
// rules, and every violation, whatever it is, answers INVALID_PUBLIC_STATUS
// naming the field, with nothing saved.

// maxEpochMillis is 9999-12-31T23:59:59.999Z in epoch milliseconds, the last
// instant an ISO time can write with a four-digit year.
const maxEpochMillis = 253402300799999

// Public-status-only shapes the seed names: "sk-…, Bearer …, long hex or
// base64 runs". A public text first passes the secret guard's shared rule
// list (g.secretRule: gitleaks' set and continuityd's own); these run after
// it and refuse only what that list leaves on purpose, so they are not a
// copy of it: an sk- or Bearer value too short for the shared rules (8
// characters here, 20 and 16 there; sk-abcdefghij), any 32+ hex run and a
// 40+ base64 one. A 40-hex git SHA is fine in a receipt, but not on a
// public board.
var (
	publicSKRe     = lazyregexp.New(`\bsk-[A-Za-z0-9_-]{8,}`)
	publicBearerRe = lazyregexp.New(`(?i)\bbearer[ \t]+([^\s]{8,})`)
	publicHexRe    = lazyregexp.New(`[0-9A-Fa-f]{32,}`)
	publicB64Re    = lazyregexp.New(`[A-Za-z0-9+/_-]{40,}={0,2}`)
	// An email address: local part, @, a host with at least one dot and a
	// letter-only top-level label. "repo@a1b2c3d" (a receipt) is not one.
	emailRe = lazyregexp.New(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b`)
	// A link is a scheme:// URL or a www. host; bare words with dots
	// (main.go, qdaybunker.fun) are not links.
	schemeLinkRe = lazyregexp.New(`(?i)\b[a-z][a-z0-9+.-]*://([^\s/?#\\]*)`)
	wwwLinkRe    = lazyregexp.New(`(?i)(?:^|[^A-Za-z0-9.-])(www\.[^\s/?#\\]*)`)
)

// publicStatusFields are the fields of a public status.
var publicStatusFields = map[string]bool{
	"phase": true, "next_action": true, "reason": true, "until": true,
	"tool": true, "route": true, "experiment": true,
}

func (g *Guard) decodePublicStatus(raw json.RawMessage) (*capsule.PublicStatus, *capsule.Error) {
	ps, err := readPublicStatus(raw)
	if err != nil {
		return nil, err
	}
	texts := publicStatusTexts(ps)
	if err := checkPublicStatusShape(ps, texts); err != nil {
		return nil, err
	}
	for _, t := range texts {
		if err := g.checkPublicText("public_status."+t.name, t.value); err != nil {
			return nil, err
		}
	}
	if len(ps.Until) > 0 && ps.Until[0] == '"' {
		var s string
		_ = json.Unmarshal(ps.Until, &s) // checkUntil parsed it already
		if err := g.checkPublicText("public_status.until", s); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// readPublicStatus decodes the members of a public status, checking only
// that each is known and of its JSON type (and until a valid time): the
// content rules come afterwards.
func readPublicStatus(raw json.RawMessage) (*capsule.PublicStatus, *capsule.Error) {
	const code, path = capsule.CodeInvalidPublicStatus, "public_status"
	ms, err := decodeObject(raw, code, path)
	if err != nil {
		return nil, err
	}
	ps := &capsule.PublicStatus{}
	for _, m := range ms {
		p := joinPath(path, m.name)
		if !publicStatusFields[m.name] {
			return nil, unknownField(code, path, m.name)
		}
		if m.name == "until" {
			if msg := checkUntil(m.value); msg != "" {
				return nil, capsule.Refuse(code, p, "%s", msg)
			}
			ps.Until = append(json.RawMessage(nil), m.value...)
			continue
		}
		s, err := decodeString(m.value, code, p)
		if err != nil {
			return nil, err
		}
		switch m.name {
		case "phase":
			ps.Phase = s
		case "next_action":
			ps.NextAction = s
		case "reason":
			ps.Reason = s
		case "tool":
			ps.Tool = s
		case "route":
			ps.Route = s
		case "experiment":
			ps.Experiment = s
		}
	}
	return ps, nil
}

// publicText is one text field of a public status and its length limit
// (0: the general one).
type publicText struct {
	name  string
	value string
	max   int
}

// publicStatusTexts lists the text fields of ps, in the order they are
// checked.
func publicStatusTexts(ps *capsule.PublicStatus) []publicText {
	return []publicText{
		{"next_action", ps.NextAction, MaxStatusNextAction},
		{"reason", ps.Reason, MaxStatusReason},
		{"tool", ps.Tool, MaxStatusTool},
		{"route", ps.Route, MaxStatusRoute},
		{"experiment", ps.Experiment, 0},
	}
}

// checkPublicStatusShape checks the form of a public status: a known phase,
// a next action, texts (of ps) within their lengths, a path-template route
// and a uuid experiment.
func checkPublicStatusShape(ps *capsule.PublicStatus, texts []publicText) *capsule.Error {
	const code = capsule.CodeInvalidPublicStatus
	switch ps.Phase {
	case "acting", "waiting", "resting":
	case "":
		return capsule.Refuse(code, "public_status.phase", "is required: acting, waiting or resting")
	default:
		return capsule.Refuse(code, "public_status.phase", "must be acting, waiting or resting")
	}
	if strings.TrimSpace(ps.NextAction) == "" {
		return capsule.Refuse(code, "public_status.next_action", "is required: say what the agent is doing")
	}
	for _, t := range texts {
		if err := checkText(t.value, t.max, code, "public_status."+t.name); err != nil {
			return err
		}
	}
	if ps.Route != "" {
		if msg := checkRoute(ps.Route); msg != "" {
			return capsule.Refuse(code, "public_status.route", "%s", msg)
		}
	}
	if ps.Experiment != "" && !isUUID(ps.Experiment) {
		return capsule.Refuse(code, "public_status.experiment", "must be a uuid (8-4-4-4-12 hex digits)")
	}
	return nil
}

// checkUntil accepts an ISO time (a JSON string in RFC 3339 form, with or
// without fractional seconds, or without seconds at all) or epoch
// milliseconds (a non-negative JSON integer up to year 9999). It returns
// why raw is refused, or "".
func checkUntil(raw json.RawMessage) string {
	const want = "must be an ISO time such as 2026-08-08T11:04:00Z, or epoch milliseconds"
	switch jsonKind(raw) {
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return want
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
			if _, err := time.Parse(layout, s); err == nil {
				return ""
			}
		}
		return want
	case "number":
		digits := string(raw)
		for i := 0; i < len(digits); i++ {
			if digits[i] < '0' || digits[i] > '9' {
				return "epoch milliseconds must be a non-negative integer"
			}
		}
		if v, err := strconv.ParseUint(digits, 10, 64); err != nil || v > maxEpochMillis {
			return "epoch milliseconds must not be later than the year 9999"
		}
		return ""
	default:
		return want
	}
}

// checkRoute accepts a path template: /office/{agent}, /lab/:id. It returns
// why r is refused, or "".
func checkRoute(r string) string {
	switch {
	case !strings.HasPrefix(r, "/"):
		return "must be a path template starting with /"
	case strings.HasPrefix(r, "//"):
		return "must be a path template, not a host (it starts with //)"
	case strings.Contains(r, "?"):
		return "must be a path template without a query (?)"
	case strings.Contains(r, "#"):
		return "must be a path template without a fragment (#)"
	case strings.Contains(r, `\`):
		return "must be a path template without backslashes"
	case strings.IndexFunc(r, unicode.IsSpace) >= 0:
		return "must be a path template without whitespace"
	}
	return ""
}

// checkPublicText applies the seed's content rules to one public string:
// no credential shape (general guard, then the stricter public shapes), no
// email address, no link outside the allowed domains.
func (g *Guard) checkPublicText(field, s string) *capsule.Error {
	const code = capsule.CodeInvalidPublicStatus
	if s == "" {
		return nil
	}
	rule := g.secretRule(s)
	if rule == "" {
		rule = publicSecretShape(s)
	}
	if rule != "" {
		return capsule.Refuse(code, field,
			"looks like a credential (rule %s); the public status is public, so the write was refused and nothing was stored", rule)
	}
	if emailRe.MatchString(s) {
		return capsule.Refuse(code, field, "carries an email address; the public status is public, so nothing was stored")
	}
	if msg := g.checkLinks(s); msg != "" {
		return capsule.Refuse(code, field, "%s; nothing was stored", msg)
	}
	return nil
}

// publicSecretShape returns the public-status rule a string breaks, or "".
func publicSecretShape(s string) string {
	if publicSKRe.MatchString(s) {
		return "public-sk-key"
	}
	for _, m := range publicBearerRe.FindAllStringSubmatch(s, -1) {
		if hasLetterAndDigit(m[1]) || classes(m[1]) >= 3 {
			return "public-bearer-token"
		}
	}
	if publicHexRe.MatchString(s) {
		return "public-long-hex"
	}
	for _, run := range publicB64Re.FindAllString(s, -1) {
		if looksLikeBase64Secret(run) {
			return "public-long-base64"
		}
	}
	return ""
}

// looksLikeBase64Secret tells a 40+ character base64 or base64url run of
// random bytes from an identifier or a path that happens to use the same
// alphabet: random data mixes all three letter and digit classes, several
// of each, and has few separators (about 2 in 64 characters), where
// CamelCaseNames have no digits and paths/snake_case have many separators.
func looksLikeBase64Secret(run string) bool {
	var upper, lower, digit, sep int
	for i := 0; i < len(run); i++ {
		switch c := run[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= '0' && c <= '9':
			digit++
		case c == '=':
		default:
			sep++
		}
	}
	return upper >= 3 && lower >= 3 && digit >= 3 && sep*8 <= len(run)
}

// checkLinks returns why s links outside the allowed domains, or "".
func (g *Guard) checkLinks(s string) string {
	outside := "links outside the allowed domains (" + strings.Join(g.linkDomains, ", ") + ")"
	var hosts []string
	for _, m := range schemeLinkRe.FindAllStringSubmatch(s, -1) {
		hosts = append(hosts, m[1])
	}
	for _, m := range wwwLinkRe.FindAllStringSubmatch(s, -1) {
		hosts = append(hosts, m[1])
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return "carries a link with a user name or password in it"
		}
		if !g.allowedHost(h) {
			return outside
		}
	}
	return ""
}

// allowedHost reports whether the host part of a link (maybe with a port
// and trailing punctuation) is an allowed domain or a subdomain of one.
func (g *Guard) allowedHost(h string) bool {
	h = strings.TrimRight(h, ".,;:!?)]}>'\"*")
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h, "]") {
		h = h[:i] // a port
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return false
	}
	for _, d := range g.linkDomains {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}
