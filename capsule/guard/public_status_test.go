package guard

import (
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// ps builds a checkpoint whose public status has the given extra members
// after a valid phase and next_action.
func ps(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"public_status":{"phase":"acting","next_action":"fixing the parser"` + extra + `}}`
}

// psNext builds a public status whose next_action is s.
func psNext(s string) string {
	return `{"public_status":{"phase":"waiting","next_action":` + js(s) + `}}`
}

func TestPublicStatusFields(t *testing.T) {
	const code = capsule.CodeInvalidPublicStatus
	runCheckpointCases(t, []bodyCase{
		{"minimal", ps(""), "", ""},
		{"every field", ps(`"reason":"tests are slow","until":"2026-08-08T11:04:00Z","tool":"go test","route":"/lab/{id}/runs","experiment":"` + goodUUID + `"`), "", ""},
		{"not an object", `{"public_status":"acting"}`, code, "public_status"},
		{"unknown field", ps(`"mood":"fine"`), code, "public_status.mood"},
		{"wrong type", ps(`"tool":5`), code, "public_status.tool"},
		{"phase missing", `{"public_status":{"next_action":"x"}}`, code, "public_status.phase"},
		{"phase empty", `{"public_status":{"phase":"","next_action":"x"}}`, code, "public_status.phase"},
		{"phase unknown", `{"public_status":{"phase":"sleeping","next_action":"x"}}`, code, "public_status.phase"},
		{"phase case", `{"public_status":{"phase":"Acting","next_action":"x"}}`, code, "public_status.phase"},
		{"phase resting", `{"public_status":{"phase":"resting","next_action":"x"}}`, "", ""},
		{"next_action missing", `{"public_status":{"phase":"acting"}}`, code, "public_status.next_action"},
		{"next_action blank", `{"public_status":{"phase":"acting","next_action":"  "}}`, code, "public_status.next_action"},
		{"next_action 279", psNext(rep("é", MaxStatusNextAction-1)), "", ""},
		{"next_action 280 (560 bytes)", psNext(rep("é", MaxStatusNextAction)), "", ""},
		{"next_action 281", psNext(rep("é", MaxStatusNextAction+1)), code, "public_status.next_action"},
		{"next_action 281 ascii", psNext(rep("a", MaxStatusNextAction+1)), code, "public_status.next_action"},
		{"reason 139", ps(`"reason":` + js(rep("é", MaxStatusReason-1))), "", ""},
		{"reason 140", ps(`"reason":` + js(rep("日", MaxStatusReason))), "", ""},
		{"reason 141", ps(`"reason":` + js(rep("日", MaxStatusReason+1))), code, "public_status.reason"},
		{"tool 39", ps(`"tool":` + js(rep("t", MaxStatusTool-1))), "", ""},
		{"tool 40", ps(`"tool":` + js(rep("é", MaxStatusTool))), "", ""},
		{"tool 41", ps(`"tool":` + js(rep("é", MaxStatusTool+1))), code, "public_status.tool"},
		{"route 119", ps(`"route":` + js("/"+rep("日", MaxStatusRoute-2))), "", ""},
		{"route 120", ps(`"route":` + js("/"+rep("r", MaxStatusRoute-1))), "", ""},
		{"route 121", ps(`"route":` + js("/"+rep("r", MaxStatusRoute))), code, "public_status.route"},
		{"route 120 multibyte", ps(`"route":` + js("/"+rep("é", MaxStatusRoute-1))), "", ""},
		{"route without slash", ps(`"route":"office/agents"`), code, "public_status.route"},
		{"route with query", ps(`"route":"/office?agent=builder"`), code, "public_status.route"},
		{"route with fragment", ps(`"route":"/office#top"`), code, "public_status.route"},
		{"route with host", ps(`"route":"//evil.example.net/office"`), code, "public_status.route"},
		{"route with scheme", ps(`"route":"https://qdaybunker.fun/office"`), code, "public_status.route"},
		{"route with space", ps(`"route":"/office/my agent"`), code, "public_status.route"},
		{"route with backslash", ps(`"route":"/office\\agents"`), code, "public_status.route"},
		{"route template", ps(`"route":"/office/:agent/runs/{run}"`), "", ""},
		{"experiment uuid", ps(`"experiment":"` + strings.ToUpper(goodUUID) + `"`), "", ""},
		{"experiment not a uuid", ps(`"experiment":"lab-42"`), code, "public_status.experiment"},
		{"experiment uuid without dashes", ps(`"experiment":"6f1c2b3a4d5e4f608a1b2c3d4e5f6a7b"`), code, "public_status.experiment"},
		{"experiment wrong type", ps(`"experiment":42`), code, "public_status.experiment"},
		{"control character", psNext("fixing\u0000"), code, "public_status.next_action"},
		{"escape sequence", ps(`"reason":"\u001b]0;title\u0007"`), code, "public_status.reason"},
	})
}

func TestPublicStatusUntil(t *testing.T) {
	const code, field = capsule.CodeInvalidPublicStatus, "public_status.until"
	u := func(v string) string { return ps(`"until":` + v) }
	runCheckpointCases(t, []bodyCase{
		{"rfc3339", u(`"2026-08-08T11:04:00Z"`), "", ""},
		{"rfc3339 offset", u(`"2026-08-08T11:04:00+02:00"`), "", ""},
		{"rfc3339 nano", u(`"2026-08-08T11:04:00.123456789Z"`), "", ""},
		{"without seconds", u(`"2026-08-08T11:04Z"`), "", ""},
		{"without seconds offset", u(`"2026-08-08T11:04-05:00"`), "", ""},
		{"date only", u(`"2026-08-08"`), code, field},
		{"no zone", u(`"2026-08-08T11:04:00"`), code, field},
		{"prose", u(`"tomorrow"`), code, field},
		{"empty string", u(`""`), code, field},
		{"impossible date", u(`"2026-02-30T11:04:00Z"`), code, field},
		{"epoch ms zero", u(`0`), "", ""},
		{"epoch ms", u(`1754650000000`), "", ""},
		{"epoch ms max - 1", u(`253402300799998`), "", ""},
		{"epoch ms max", u(`253402300799999`), "", ""},
		{"epoch ms max + 1", u(`253402300800000`), code, field},
		{"epoch ms huge", u(`99999999999999999999999`), code, field},
		{"negative", u(`-1`), code, field},
		{"negative zero", u(`-0`), code, field},
		{"fraction", u(`1754650000000.5`), code, field},
		{"exponent", u(`1.7e12`), code, field},
		{"bool", u(`true`), code, field},
		{"null", u(`null`), code, field},
		{"object", u(`{}`), code, field},
	})
}

func TestPublicStatusContent(t *testing.T) {
	const code = capsule.CodeInvalidPublicStatus
	runCheckpointCases(t, []bodyCase{
		{"sk prefix", psNext("using sk-abcdefgh12 now"), code, "public_status.next_action"},
		{"sk prefix letters only", psNext("key sk-abcdefghij"), code, "public_status.next_action"},
		{"bearer", psNext("calling with Bearer abc123def456"), code, "public_status.next_action"},
		{"bearer prose", psNext("Bearer authentication is next"), "", ""},
		{"hex 31", psNext("build " + fake(400, hexLower, 31)), "", ""},
		{"hex 32", psNext("build " + fake(401, hexLower, 32)), code, "public_status.next_action"},
		{"git sha 40 is too long for public", psNext("merged " + fake(402, hexLower, 40)), code, "public_status.next_action"},
		{"short sha", psNext("merged a1b2c3d into main"), "", ""},
		{"base64 39", psNext("blob " + fake(403, b64, 39)), "", ""},
		{"base64 40", psNext("blob " + "aZ3" + fake(404, b64, 37)), code, "public_status.next_action"},
		{"base64url 60", ps(`"reason":` + js("t="+"Qx9"+fake(405, b64url, 57))), code, "public_status.reason"},
		{"camel case identifier", psNext("running TestDecodeCheckpointRejectsUnknownFieldsQuickly"), "", ""},
		{"long path", ps(`"route":"/office/agents/builder-2/commitments/open/history/2026"`), "", ""},
		{"general guard", ps(`"tool":` + js("glpat-"+fake(406, alnum, 20))), code, "public_status.tool"},
		{"email", psNext("write to agent.smith@example.org"), code, "public_status.next_action"},
		{"email in reason", ps(`"reason":"ops@qdaybunker.fun asked"`), code, "public_status.reason"},
		{"receipt is not an email", psNext("shipped repo@a1b2c3d"), "", ""},
		{"link outside", psNext("see https://evil.example.net/x"), code, "public_status.next_action"},
		{"http link outside", psNext("see http://evil.example.net"), code, "public_status.next_action"},
		{"www outside", psNext("see www.evil.example.net"), code, "public_status.next_action"},
		{"lookalike domain", psNext("see https://evilqdaybunker.fun/office"), code, "public_status.next_action"},
		{"allowed as prefix of another host", psNext("see https://qdaybunker.fun.evil.net/"), code, "public_status.next_action"},
		{"credentials in link", psNext("see https://agent@qdaybunker.fun/office"), code, "public_status.next_action"},
		{"other scheme", psNext("cloning ssh://git.example.net/repo"), code, "public_status.next_action"},
		{"allowed domain", psNext("see https://qdaybunker.fun/office"), "", ""},
		{"allowed subdomain", psNext("live at https://office.qdaybunker.fun/."), "", ""},
		{"allowed with port and case", psNext("see HTTPS://Office.QdayBunker.FUN:443/x, then"), "", ""},
		{"allowed www", psNext("see www.dexscreener.com/solana"), "", ""},
		{"allowed in parens", psNext("chart (https://dexscreener.com)"), "", ""},
		{"bare domain is not a link", psNext("qdaybunker.fun and evil.example.net are words here"), "", ""},
		{"file names are not links", psNext("editing main.go and capsule/guard.go"), "", ""},
		{"until string content checked", ps(`"until":"2026-08-08T11:04:00Z"`), "", ""},
	})
}

func TestPublicStatusCustomDomains(t *testing.T) {
	g, err := New(Options{AllowedLinkDomains: []string{" Example.COM. ", "docs.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.LinkDomains(), ","); got != "example.com,docs.internal" {
		t.Fatalf("domains %q", got)
	}
	if _, err := g.DecodeCheckpoint([]byte(psNext("see https://www.example.com/x"))); err != nil {
		t.Fatal(err)
	}
	_, err = g.DecodeCheckpoint([]byte(psNext("see https://qdaybunker.fun/x")))
	e := wantRefusal(t, err, capsule.CodeInvalidPublicStatus, "public_status.next_action")
	if !strings.Contains(e.Message, "example.com, docs.internal") {
		t.Fatalf("message %q does not list the allowed domains", e.Message)
	}
	for _, bad := range []string{"", "https://example.com", "example.com/path", "exa mple.com"} {
		if _, err := New(Options{AllowedLinkDomains: []string{bad}}); err == nil {
			t.Errorf("New accepted domain %q", bad)
		}
	}
	d, err := New(Options{AllowedLinkDomains: []string{}})
	if err != nil || strings.Join(d.LinkDomains(), ",") != "qdaybunker.fun,dexscreener.com" {
		t.Fatalf("empty list: %v %v", d.LinkDomains(), err)
	}
}
