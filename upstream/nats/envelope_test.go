package nats

import (
	"strings"
	"testing"
)

// TestDecodeEnvelopeCleansNames: the names, phase and upstreams an
// envelope from the bucket carries reach resume, status, `continuityd
// fleet` and the log without raw control or invisible characters.
func TestDecodeEnvelopeCleansNames(t *testing.T) {
	env, err := decodeEnvelope([]byte(`{"v":1,"agent":"builder","machine":"evil\u001b]0;pwned\u0007host\u202e","instance":"i\u009b1",` +
		`"phase":"acting\u200b","upstreams":[{"name":"q\u001b[2J"}],"state":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if env.Machine != `evil\x1b]0;pwned\x07host` || env.Instance != `i\u009b1` || env.Phase != "acting" {
		t.Fatalf("machine %q instance %q phase %q", env.Machine, env.Instance, env.Phase)
	}
	if u := string(env.Upstreams); strings.Contains(u, `\u001b`) || !strings.Contains(u, `\\x1b[2J`) {
		t.Fatalf("upstreams %s", u)
	}
}
