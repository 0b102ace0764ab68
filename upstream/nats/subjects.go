package nats

import (
	"encoding/json"
	"strings"

	"github.com/continuityd/continuityd/capsule"
)

// subjects builds the subject names under one prefix.
type subjects struct{ prefix string }

func (s subjects) write(agent, kind string) string {
	return s.prefix + ".writes." + agent + "." + kind
}
func (s subjects) writesOf(agent string) string { return s.prefix + ".writes." + agent + ".*" }
func (s subjects) writeAll() string             { return s.prefix + ".writes.*.*" }
func (s subjects) direction(agent string) string {
	return s.prefix + ".directions." + agent
}
func (s subjects) directionAll() string { return s.prefix + ".directions.*" }

// coveredBy reports whether every subject matching want is captured by one
// of the stream's subjects (want is ours; have may be wider, e.g. "x.>").
func coveredBy(want string, have []string) bool {
	for _, h := range have {
		if subjectSubset(want, h) {
			return true
		}
	}
	return false
}

// subjectSubset reports whether every subject matching pattern a also
// matches pattern b.
func subjectSubset(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range bt {
		if t == ">" {
			return len(at) > i // ">" needs at least one token
		}
		if i >= len(at) {
			return false
		}
		switch {
		case at[i] == ">":
			return false // a reaches deeper than b's fixed length
		case t == "*":
			// matches any single token of a, literal or "*"
		case at[i] != t:
			return false
		}
	}
	return len(at) == len(bt)
}

// encodeWrite is the message body of a write: the capsule.Write as JSON.
func encodeWrite(w capsule.Write) ([]byte, error) { return json.Marshal(w) }
