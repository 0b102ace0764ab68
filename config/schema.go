package config

import (
	"slices"
	"strings"

	"github.com/continuityd/continuityd/internal/suggest"
	"github.com/pelletier/go-toml/v2/unstable"
)

// keySpec describes one key the file may hold, for the two errors go-toml
// words in Go's terms rather than the user's: a value of the wrong type
// ("cannot decode TOML string into float64") and an unknown key (which is
// more useful with the keys that would have been right).
type keySpec struct {
	path  string // as schemaKey spells it
	want  string // completes "must be …"
	kinds []unstable.Kind
}

var (
	tableKinds   = []unstable.Kind{unstable.Table, unstable.InlineTable}
	arrayKinds   = []unstable.Kind{unstable.Array}
	stringKinds  = []unstable.Kind{unstable.String}
	numberKinds  = []unstable.Kind{unstable.Float, unstable.Integer}
	integerKinds = []unstable.Kind{unstable.Integer}
	boolKinds    = []unstable.Kind{unstable.Bool}
)

const wantDuration = `a duration string such as "30s" or "10m"`

// keySpecs must list every toml tag of rawConfig (decode.go); a test checks.
var keySpecs = []keySpec{
	{"daemon", "a table ([daemon])", tableKinds},
	{"daemon.state_dir", "a string", stringKinds},
	{"daemon.socket", "a string", stringKinds},
	{"daemon.socket_mode", `an octal string such as "0600"`, stringKinds},
	{"daemon.listen", "a string", stringKinds},
	{"daemon.log_level", "a string", stringKinds},
	{"daemon.log_format", "a string", stringKinds},
	{"daemon.shutdown_timeout", wantDuration, stringKinds},
	{"daemon.mcp_session_idle", wantDuration, stringKinds},
	{"daemon.mcp_max_sessions", "an integer", integerKinds},
	{"daemon.read_timeout", wantDuration, stringKinds},
	{"daemon.idle_timeout", wantDuration, stringKinds},
	{"daemon.write_timeout", wantDuration, stringKinds},
	{"daemon.timer_slack", wantDuration, stringKinds},
	{"agent", "an array of tables ([[agent]])", []unstable.Kind{unstable.ArrayTable, unstable.Array}},
	{"agent[]", "a table", tableKinds},
	{"agent[].name", "a string", stringKinds},
	{"agent[].workdir", "a string", stringKinds},
	{"agent[].upstreams", "an array of strings", arrayKinds},
	{"agent[].upstreams[]", "a string", stringKinds},
	{"agent[].transcript", "a string", stringKinds},
	{"agent[].identity", "a table of Delx identities ([agent.identity.UPSTREAM])", tableKinds},
	{"agent[].identity.*", "a table", tableKinds},
	{"agent[].identity.*.agent_id", "a string", stringKinds},
	{"agent[].identity.*.session_id", "a string", stringKinds},
	{"agent[].identity.*.token_env", "a string", stringKinds},
	{"agent[].identity.*.token_file", "a string", stringKinds},
	{"agent[].delx_fleet", "a table of Delx fleets ([agent.delx_fleet.UPSTREAM])", tableKinds},
	{"agent[].delx_fleet.*", "a table", tableKinds},
	{"agent[].delx_fleet.*.fleet_id", "a string", stringKinds},
	{"agent[].delx_fleet.*.token_env", "a string", stringKinds},
	{"agent[].delx_fleet.*.token_file", "a string", stringKinds},
	{"agent[].users", "an array of user names or numeric ids", arrayKinds},
	{"agent[].users[]", "a string (a user name or a numeric uid)", stringKinds},
	{"agent[].groups", "an array of group names or numeric ids", arrayKinds},
	{"agent[].groups[]", "a string (a group name or a numeric gid)", stringKinds},
	{"upstream", "a table of upstreams ([upstream.NAME])", tableKinds},
	{"upstream.*", "a table", tableKinds},
	{"upstream.*.kind", "a string", stringKinds},
	{"upstream.*.url", "a string", stringKinds},
	{"upstream.*.token_env", "a string", stringKinds},
	{"upstream.*.token_file", "a string", stringKinds},
	{"upstream.*.rate", "a number (requests per second)", numberKinds},
	{"upstream.*.burst", "an integer", integerKinds},
	{"upstream.*.timeout", wantDuration, stringKinds},
	{"upstream.*.registration_url", "a string", stringKinds},
	{"upstream.*.creds_file", "a string", stringKinds},
	{"upstream.*.nkey_file", "a string", stringKinds},
	{"upstream.*.ca_file", "a string", stringKinds},
	{"upstream.*.stream", "a string", stringKinds},
	{"upstream.*.bucket", "a string", stringKinds},
	{"upstream.*.subject_prefix", "a string", stringKinds},
	{"upstream.*.replicas", "an integer", integerKinds},
	{"upstream.*.conflict_window", wantDuration, stringKinds},
	{"upstream.*.snapshots", "true or false", boolKinds},
	{"guard", "a table ([guard])", tableKinds},
	{"guard.allowed_link_domains", "an array of strings", arrayKinds},
	{"guard.allowed_link_domains[]", "a string", stringKinds},
	{"outbox", "a table ([outbox])", tableKinds},
	{"outbox.max_pending", "an integer", integerKinds},
	{"outbox.min_backoff", wantDuration, stringKinds},
	{"outbox.max_backoff", wantDuration, stringKinds},
	{"outbox.max_retry_after", wantDuration, stringKinds},
	{"outbox.unauthorized_retry", wantDuration, stringKinds},
	{"outbox.resume_timeout", wantDuration, stringKinds},
	{"watch", "a table ([watch])", tableKinds},
	{"watch.enabled", "true or false", boolKinds},
	{"watch.ignore", "an array of strings", arrayKinds},
	{"watch.ignore[]", "a string", stringKinds},
	{"watch.ignore_dirs", "an array of strings", arrayKinds},
	{"watch.ignore_dirs[]", "a string", stringKinds},
	{"watch.quiet", wantDuration, stringKinds},
	{"watch.settle", wantDuration, stringKinds},
	{"watch.shell_max", wantDuration, stringKinds},
	{"watch.handoff_file", "a string", stringKinds},
	{"watch.capsule_file", "a string", stringKinds},
	{"policy", "a table ([policy])", tableKinds},
	{"policy.enabled", "true or false", boolKinds},
	{"policy.quiet", wantDuration, stringKinds},
	{"policy.max_delay", wantDuration, stringKinds},
	{"policy.min_interval", wantDuration, stringKinds},
	{"policy.thresholds", "an array of numbers", arrayKinds},
	{"policy.thresholds[]", "a number", numberKinds},
	{"policy.idle_after", wantDuration, stringKinds},
	{"policy.refresh", wantDuration, stringKinds},
	{"policy.public_status", "a string", stringKinds},
	{"policy.seal_on_compaction", "true or false", boolKinds},
	{"policy.seal_on_session_end", "true or false", boolKinds},
	{"transcripts", "a table ([transcripts])", tableKinds},
	{"transcripts.enabled", "true or false", boolKinds},
	{"transcripts.claude_home", "a string", stringKinds},
	{"transcripts.codex_home", "a string", stringKinds},
	{"transcripts.rescan", wantDuration, stringKinds},
	{"snapshots", "a table ([snapshots])", tableKinds},
	{"snapshots.enabled", "true or false", boolKinds},
	{"snapshots.max_file_size", "an integer (bytes)", integerKinds},
	{"snapshots.keep", "an integer", integerKinds},
	{"snapshots.keep_bytes", "an integer (bytes)", integerKinds},
	{"snapshots.on_explicit_checkpoint", "true or false", boolKinds},
	{"snapshots.fleet_withhold", "an array of strings", arrayKinds},
	{"snapshots.fleet_withhold[]", "a string", stringKinds},
	{"snapshots.journal", "true or false", boolKinds},
	{"snapshots.journal_keep_all", wantDuration, stringKinds},
	{"snapshots.journal_keep_hourly", wantDuration, stringKinds},
	{"snapshots.journal_share", "a number from 0.05 to 0.95", numberKinds},
	{"places", "a table ([places])", tableKinds},
	{"places.adopt", "true or false", boolKinds},
	{"places.roots", "an array of strings", arrayKinds},
	{"places.roots[]", "a string", stringKinds},
	{"places.max_watched", "an integer", integerKinds},
	{"places.idle_after", wantDuration, stringKinds},
}

func specOf(path string) (keySpec, bool) {
	k := schemaKey(path)
	for _, s := range keySpecs {
		if s.path == k {
			return s, true
		}
	}
	return keySpec{}, false
}

// knownKeys lists the keys the schema allows beside path (its siblings).
func knownKeys(path string) []string {
	parent := parentKey(schemaKey(path))
	var keys []string
	for _, s := range keySpecs {
		if parentKey(s.path) == parent && !strings.HasSuffix(s.path, "]") && lastPart(s.path) != "*" {
			keys = append(keys, lastPart(s.path))
		}
	}
	return keys
}

// unknownKeyMsg explains an unknown key: the closest known key when it looks
// like a typo, else the keys the table takes.
func unknownKeyMsg(path string, table bool) string {
	what := "unknown key"
	if table {
		what = "unknown table"
	}
	known := knownKeys(path)
	if len(known) == 0 {
		return what
	}
	if best, ok := suggest.Closest(lastPart(path), known); ok {
		return what + `; did you mean "` + best + `"?`
	}
	return what + "; known here: " + strings.Join(known, ", ")
}

// kindName says what a TOML value is, for "(got an array)".
func kindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable, unstable.Table:
		return "a table"
	case unstable.ArrayTable:
		return "an array of tables"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "a date/time"
	}
	return "something else"
}

// accepts reports whether a value of kind k has the type the key needs.
func (s keySpec) accepts(k unstable.Kind) bool {
	return slices.Contains(s.kinds, k)
}
