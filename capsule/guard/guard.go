package guard

import (
	"fmt"
	"strings"

	"github.com/continuityd/continuityd/internal/secretrules"
)

// Limits the guards enforce. The Q-Day seed fixes the public status and
// commitment numbers; the rest are continuityd's and documented in README.md.
const (
	MaxOpenCommitments   = 12   // TOO_MANY_OPEN_LOOPS beyond this
	MinCommitmentTitle   = 3    // characters
	MaxCommitmentTitle   = 200  // characters
	MinDropReason        = 8    // characters
	MinBecause           = 24   // characters; MOTIVE_REQUIRED below
	MaxDecisionField     = 2000 // chosen, because, passed_over
	MaxFocus             = 4000 // so a sealed capsule's goal always fits
	MaxWorkingStateField = 4000 // next_action, last_result, waiting_for
	MaxResultRef         = 500
	MaxStopReason        = 500
	MaxStatusNextAction  = 280
	MaxStatusReason      = 140
	MaxStatusTool        = 40
	MaxStatusRoute       = 120
	MaxSignalString      = 1024 // any string field of a signal
	MaxBodyBytes         = 64 << 10
)

// More limits, continuityd's own, for input the seed leaves open.
const (
	// MaxCommitmentID bounds a commitment id in close and drop; the store
	// mints short ids, so anything longer is a client bug, not an id.
	MaxCommitmentID = 128
	// MaxDropReason bounds a drop reason, like a stop reason.
	MaxDropReason = 500
	// MaxCapsuleBytes bounds a capsule body. The published schema leaves
	// written_at and ttl_days unbounded, so some limit is needed; this one
	// is far above any capsule a person would write (every capped field at
	// its maximum in three-byte characters is about 90 KiB), so a
	// schema-valid capsule is refused for size only when it is absurd.
	MaxCapsuleBytes = 512 << 10
	// MaxJSONDepth bounds nesting in any body. Our own shapes are at most
	// four levels deep; the bound keeps the token walk cheap on hostile input.
	MaxJSONDepth = 32
)

// DefaultLinkDomains are the only domains a public status may link to unless
// configured otherwise.
func DefaultLinkDomains() []string { return []string{"qdaybunker.fun", "dexscreener.com"} }

// Options configures a Guard.
type Options struct {
	// AllowedLinkDomains are the domains a public status may link to (each
	// also allows its subdomains). Nil or empty means DefaultLinkDomains().
	AllowedLinkDomains []string
	// CapsuleSchema validates capsules against the published schema:
	// capsule/schema.Compile's. Nil: the Guard refuses every capsule
	// (CodeInternal), and checks everything else as usual.
	CapsuleSchema CapsuleSchema
}

// Guard stands between input and the disk: it decodes request bodies
// strictly, enforces every stateless rule of the Q-Day seed and the capsule
// schema, and refuses credential-shaped values. Building one compiles the
// secret rules (tens of milliseconds), so a daemon builds it once and
// shares it. A Guard is immutable after New and safe for
// concurrent use.
type Guard struct {
	linkDomains []string         // lower case, no leading or trailing dot
	rules       *secretrules.Set // gitleaks' default rule set, shared by every Guard; see secrets.go
	extraRules  []secretRule     // continuityd's own rules; see secrets.go
	extraIndex  *triggerIndex    // which of extraRules' triggers a text holds
	schema      *capsuleSchema   // the Continuity Capsule v1 schema; see schema.go
}

// New builds a Guard: it loads gitleaks' default rules, compiles
// continuityd's own secret rules and reads the embedded capsule schema's
// tree (opts.CapsuleSchema validates against it). It does no network I/O.
func New(opts Options) (*Guard, error) {
	domains := opts.AllowedLinkDomains
	if len(domains) == 0 {
		domains = DefaultLinkDomains()
	}
	g := &Guard{}
	for _, d := range domains {
		nd, err := normalizeLinkDomain(d)
		if err != nil {
			return nil, err
		}
		g.linkDomains = append(g.linkDomains, nd)
	}
	rules, err := secretrules.Default()
	if err != nil {
		return nil, fmt.Errorf("capsule: loading the secret rules: %w", err)
	}
	g.rules = rules
	g.extraRules = ownSecretRules()
	g.extraIndex = newTriggerIndex(g.extraRules)
	sch, err := newCapsuleSchema(opts.CapsuleSchema)
	if err != nil {
		return nil, fmt.Errorf("capsule: reading the capsule schema: %w", err)
	}
	g.schema = sch
	return g, nil
}

// LinkDomains returns the domains a public status may link to, normalized.
func (g *Guard) LinkDomains() []string { return append([]string(nil), g.linkDomains...) }

// normalizeLinkDomain lower-cases a configured domain and checks it is a
// bare host name: a scheme, a path or a port would never match a link's
// host and would silently allow nothing, so they are configuration errors.
func normalizeLinkDomain(d string) (string, error) {
	nd := strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".")
	if nd == "" {
		return "", fmt.Errorf("capsule: an allowed link domain is empty")
	}
	for _, r := range nd {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r >= 0x80) {
			return "", fmt.Errorf("capsule: allowed link domain %q is not a bare host name", d)
		}
	}
	return nd, nil
}
