package config

import (
	"fmt"
	"maps"
	"slices"
)

// DelxFleet is a Delx fleet an agent is a member of: its fleet_id, and
// where the fleet's invite token is (token_env or token_file, never the
// token itself). Delx remembers who joined, so the token may be left out
// once the agent is a member.
type DelxFleet struct {
	FleetID   string `toml:"fleet_id"`
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
}

// InviteToken returns the fleet's invite token, read like an upstream's
// token (see Upstream.Token) at every call; "" when the fleet names none
// (the agent has joined already).
func (f DelxFleet) InviteToken() (string, error) {
	if f.TokenEnv == "" && f.TokenFile == "" {
		return "", nil
	}
	return readToken(f.TokenEnv, f.TokenFile, "the fleet")
}

// delxFleets checks an agent's [agent.delx_fleet.UPSTREAM] tables: each
// names a delx upstream the agent ships to, a fleet_id, and at most one
// place for the fleet's invite token.
func (c *checker) delxFleets(key string, raw map[string]DelxFleet, agentUps []string, ups map[string]Upstream) map[string]DelxFleet {
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]DelxFleet, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p := joinKey(key, name)
		f := raw[name]
		u, declared := ups[name]
		switch {
		case !slices.Contains(agentUps, name):
			c.fail(p, fmt.Sprintf("the agent does not ship to upstream %q; add it to the agent's upstreams, or remove this table", name))
		case !declared || u.Kind != KindDelx:
			c.fail(p, fmt.Sprintf("upstream %q is not of kind \"delx\"; only Delx has fleets of agents", name))
		}
		idKey := joinKey(p, "fleet_id")
		switch {
		case f.FleetID == "":
			c.fail(p, "fleet_id is required: the id of the Delx fleet the agent is a member of")
		case len(f.FleetID) > maxIdentityValue:
			c.fail(idKey, fmt.Sprintf("is longer than %d characters", maxIdentityValue))
		case !headerSafe(f.FleetID):
			c.failGot(idKey, "must be visible ASCII characters without spaces, as Delx names the fleet", f.FleetID)
		}
		envKey, fileKey := joinKey(p, "token_env"), joinKey(p, "token_file")
		if f.TokenEnv != "" && f.TokenFile != "" {
			c.fail(fileKey, "set token_env or token_file (where the fleet's invite token is), not both")
		}
		if f.TokenEnv != "" && !envNamePattern.MatchString(f.TokenEnv) {
			c.fail(envKey, "must be the name of an environment variable (letters, digits and _), not the invite token itself")
		}
		if f.TokenFile != "" {
			f.TokenFile, _ = c.absPath(fileKey, f.TokenFile)
		}
		out[name] = f
	}
	return out
}
