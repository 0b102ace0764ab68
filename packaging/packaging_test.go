package packaging

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/config"
)

var update = flag.Bool("update", false, "rewrite the shipped files under packaging/ from the templates")

// TestShippedFilesAreRendered keeps the committed units and plist equal to
// the templates rendered with the package paths: they cannot drift.
func TestShippedFilesAreRendered(t *testing.T) {
	shipped, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range shipped {
		if *update {
			if err := os.WriteFile(name, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run `go test ./packaging -update` to write it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("packaging/%s differs from its template rendered with the package paths; run `go test ./packaging -update` after editing packaging/templates", name)
		}
	}
}

// directives reads a unit's Key=Value lines (comments skipped), by section.
func directives(t *testing.T, unit []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(unit), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("not a directive: %q", line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

func wantDirective(t *testing.T, d map[string][]string, key string, want ...string) {
	t.Helper()
	if got := d[key]; !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", key, got, want)
	}
}

// sampleSystemUnit is a system unit for a config with a state directory and
// two work directories, one of them under /home.
func sampleSystemUnit(binary string) Unit {
	return Unit{
		Binary:    binary,
		Config:    "/etc/continuityd/agents.toml",
		StateDir:  "/var/lib/continuityd",
		SocketDir: "/run/continuityd",
		Workdirs:  []string{"/srv/agents/builder", "/home/alice/src/reviewer", "/srv/agents/builder/sub"},
		ReadPaths: []string{"/etc/continuityd/agents.toml", "/root/qday.token"},
	}
}

func TestSystemUnitDirectives(t *testing.T) {
	b, err := sampleSystemUnit("/usr/local/bin/continuityd").Render()
	if err != nil {
		t.Fatal(err)
	}
	d := directives(t, b)
	for key, want := range map[string]string{
		"Service.Type":                     "notify",
		"Service.NotifyAccess":             "main",
		"Service.ExecStart":                "/usr/local/bin/continuityd run --config /etc/continuityd/agents.toml",
		"Service.User":                     "continuityd",
		"Service.Restart":                  "on-failure",
		"Service.RestartSec":               "2s",
		"Service.TimeoutStopSec":           "30s",
		"Service.StateDirectory":           "continuityd",
		"Service.RuntimeDirectory":         "continuityd",
		"Service.RuntimeDirectoryPreserve": "no",
		"Service.NoNewPrivileges":          "yes",
		"Service.ProtectSystem":            "strict",
		"Service.PrivateTmp":               "yes",
		"Service.ProtectKernelTunables":    "yes",
		"Service.ProtectControlGroups":     "yes",
		"Service.RestrictSUIDSGID":         "yes",
		"Service.LockPersonality":          "yes",
		"Service.UMask":                    "0077",
		// The work directory under /home is bound into an empty home tmpfs.
		"Service.ProtectHome":       "tmpfs",
		"Service.ReadWritePaths":    "/var/lib/continuityd -/srv/agents/builder",
		"Service.BindPaths":         "-/home/alice/src/reviewer",
		"Service.BindReadOnlyPaths": "-/root/qday.token",
		"Install.WantedBy":          "multi-user.target",
	} {
		wantDirective(t, d, key, want)
	}
	if _, ok := d["Service.WorkingDirectory"]; ok {
		t.Error("WorkingDirectory is set though none was given")
	}

	// No path under a home: the homes are hidden.
	u := sampleSystemUnit("/usr/bin/continuityd")
	u.Workdirs, u.ReadPaths = []string{"/srv/agents/builder"}, nil
	u.SocketDir = "/run/agents" // outside RuntimeDirectory=: must be writable
	b, err = u.Render()
	if err != nil {
		t.Fatal(err)
	}
	d = directives(t, b)
	wantDirective(t, d, "Service.ProtectHome", "yes")
	wantDirective(t, d, "Service.ReadWritePaths", "/var/lib/continuityd -/run/agents -/srv/agents/builder")
	for _, k := range []string{"Service.BindPaths", "Service.BindReadOnlyPaths"} {
		if v, ok := d[k]; ok {
			t.Errorf("%s = %q, want none", k, v)
		}
	}
}

func TestUserUnitDirectives(t *testing.T) {
	b, err := Unit{UserUnit: true, Binary: "/home/alice/bin/continuityd", Config: "/home/alice/.config/continuityd/continuityd.toml",
		WorkingDirectory: "/home/alice/src/builder", Workdirs: []string{"/home/alice/src/builder"}}.Render()
	if err != nil {
		t.Fatal(err)
	}
	d := directives(t, b)
	wantDirective(t, d, "Service.Type", "notify")
	wantDirective(t, d, "Service.ExecStart", "/home/alice/bin/continuityd run --config /home/alice/.config/continuityd/continuityd.toml")
	wantDirective(t, d, "Service.WorkingDirectory", "/home/alice/src/builder")
	wantDirective(t, d, "Service.Restart", "on-failure")
	wantDirective(t, d, "Service.NoNewPrivileges", "yes")
	wantDirective(t, d, "Install.WantedBy", "default.target")
	for _, k := range []string{"Service.User", "Service.ProtectSystem", "Service.ProtectHome", "Service.ReadWritePaths", "Unit.ConditionPathExists"} {
		if v, ok := d[k]; ok {
			t.Errorf("a user unit sets %s = %q", k, v)
		}
	}

	// The packaged user unit serves any user's places, with their own
	// config when they have one (run reads it): it starts without one.
	b, err = Unit{UserUnit: true, Packaged: true, Binary: PackagedBinary}.Render()
	if err != nil {
		t.Fatal(err)
	}
	d = directives(t, b)
	wantDirective(t, d, "Service.ExecStart", "/usr/bin/continuityd run")
	for _, k := range []string{"Unit.ConditionPathExists", "Service.WorkingDirectory"} {
		if v, ok := d[k]; ok {
			t.Errorf("the packaged user unit sets %s = %q", k, v)
		}
	}
}

func TestUnitEscaping(t *testing.T) {
	b, err := Unit{Binary: "/opt/my tools/continuityd", Config: "/etc/50%/$HOME.toml", StateDir: SystemStateDir,
		Workdirs: []string{"/srv/a b", `/srv/q"uote`}, WorkingDirectory: "/srv/100%"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	d := directives(t, b)
	wantDirective(t, d, "Service.ExecStart", `"/opt/my tools/continuityd" run --config /etc/50%%/$$HOME.toml`)
	wantDirective(t, d, "Service.ReadWritePaths", `/var/lib/continuityd "-/srv/a b" "-/srv/q\"uote"`)
	wantDirective(t, d, "Service.WorkingDirectory", "/srv/100%%")

	for _, bad := range []Unit{
		{Binary: "continuityd"},
		{Binary: "/bin/continuityd", Config: "relative.toml"},
		{Binary: "/bin/continuityd", Workdirs: []string{"/srv/new\nline"}},
		{Binary: "/bin/continuityd", Workdirs: []string{"/home/a:b"}},
		{},
	} {
		if _, err := bad.Render(); err == nil {
			t.Errorf("%+v rendered; want an error", bad)
		}
	}
}

func TestOutermost(t *testing.T) {
	got := outermost([]string{"/srv/a/b", "/srv/a", "/srv/a/", "/srv/ab", "/home/x"})
	want := []string{"/srv/a", "/srv/ab", "/home/x"}
	if !slices.Equal(got, want) {
		t.Errorf("outermost = %q, want %q", got, want)
	}
}

// trueBinary is an executable in dir that systemd-analyze can check.
func trueBinary(t *testing.T, dir string) string {
	t.Helper()
	src, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no `true` binary to point ExecStart at")
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "continuityd")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// verify runs `systemd-analyze verify` on unit, written as continuityd.service
// in a fresh directory, and fails on any complaint about it: systemd-analyze
// exits 0 on some (unknown keys, bad values), so its output is read too.
func verify(t *testing.T, name string, unit []byte, user bool) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd); the units are not verified")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "continuityd.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify"}
	env := append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
	if user {
		// A user manager needs a runtime directory, even to verify.
		rt := filepath.Join(dir, "runtime")
		if err := os.Mkdir(rt, 0o700); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--user")
		env = append(env, "XDG_RUNTIME_DIR="+rt)
	}
	cmd := exec.Command(sa, append(args, path)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var complaints []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "continuityd.service") {
			complaints = append(complaints, line)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s\n--- unit ---\n%s", name, err, out, unit)
	}
}

func TestSystemdAnalyzeVerifyGenerated(t *testing.T) {
	dir := t.TempDir()
	bin := trueBinary(t, dir)
	sys, err := sampleSystemUnit(bin).Render()
	if err != nil {
		t.Fatal(err)
	}
	verify(t, "generated system unit", sys, false)

	user, err := Unit{UserUnit: true, Binary: bin, Config: filepath.Join(dir, "continuityd.toml"), WorkingDirectory: dir}.Render()
	if err != nil {
		t.Fatal(err)
	}
	verify(t, "generated user unit", user, true)
}

// TestSystemdAnalyzeVerifyShipped verifies the committed units. Their
// /usr/bin/continuityd does not exist here, and verify refuses a missing
// ExecStart binary, so ExecStart is pointed at a real one; nothing else
// changes (and TestShippedFilesAreRendered pins the files themselves).
func TestSystemdAnalyzeVerifyShipped(t *testing.T) {
	bin := trueBinary(t, t.TempDir())
	for _, c := range []struct {
		file string
		user bool
	}{{"systemd/continuityd.service", false}, {"systemd/continuityd-user.service", true}} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("ExecStart="+PackagedBinary+" ")) {
			t.Fatalf("%s: ExecStart does not run %s", c.file, PackagedBinary)
		}
		b = bytes.ReplaceAll(b, []byte("ExecStart="+PackagedBinary+" "), []byte("ExecStart="+bin+" "))
		verify(t, c.file, b, c.user)
	}
}

func TestShippedSystemUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/continuityd.service")
	if err != nil {
		t.Fatal(err)
	}
	d := directives(t, b)
	wantDirective(t, d, "Service.ExecStart", "/usr/bin/continuityd run --config /etc/continuityd/continuityd.toml")
	wantDirective(t, d, "Service.ReadWritePaths", "/var/lib/continuityd")
	wantDirective(t, d, "Service.ProtectHome", "yes")
	wantDirective(t, d, "Service.User", "continuityd")
}

// TestSystemConfig checks the packages' config: the commented default with
// the system service's paths, strictly valid, serving one agent that watches
// nothing until the operator says where it works.
func TestSystemConfig(t *testing.T) {
	b, err := SystemConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(b, PackagedConfig)
	if err != nil {
		t.Fatalf("the packaged config does not decode: %v", err)
	}
	if cfg.Daemon.StateDir != SystemStateDir || cfg.Daemon.Socket != SystemRuntimeDir+"/continuityd.sock" {
		t.Errorf("state_dir %q, socket %q; want the system service's", cfg.Daemon.StateDir, cfg.Daemon.Socket)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].Name != config.DefaultAgent || cfg.Agents[0].Workdir != "" {
		t.Errorf("agents = %+v, want one agent %q without a work directory", cfg.Agents, config.DefaultAgent)
	}
	if !bytes.Contains(b, config.DefaultTOML()[:bytes.IndexByte(config.DefaultTOML(), '\n')]) {
		t.Error("the packaged config does not carry the commented default")
	}
}

func TestPlist(t *testing.T) {
	b, err := Plist{Binary: "/Users/a&b/bin/continuityd", Config: "/Users/a&b/c<d>.toml", WorkingDirectory: "/Users/a&b/src",
		LogPath: "/Users/a&b/Library/Logs/continuityd.log"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<?xml ")) {
		t.Errorf("the plist does not start with the XML declaration:\n%s", b)
	}
	// Well formed, and the strings come back unescaped.
	var strs []string
	dec := xml.NewDecoder(bytes.NewReader(b))
	var inString bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plist is not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inString = tok.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(tok))
			}
		case xml.EndElement:
			inString = false
		}
	}
	for _, want := range []string{LaunchdLabel, "/Users/a&b/bin/continuityd", "run", "--config", "/Users/a&b/c<d>.toml", "/Users/a&b/src"} {
		if !slices.Contains(strs, want) {
			t.Errorf("the plist has no <string>%s</string>; strings: %q", want, strs)
		}
	}
	if _, err := (Plist{Binary: "bin/continuityd"}).Render(); err == nil {
		t.Error("a relative binary rendered")
	}
}

func TestSysusers(t *testing.T) {
	if !bytes.Contains(Sysusers(), []byte("\nu "+SystemUser+" - ")) {
		t.Errorf("the sysusers entry does not create %s:\n%s", SystemUser, Sysusers())
	}
	b, err := os.ReadFile("sysusers/continuityd.conf")
	if err != nil || !bytes.Equal(b, Sysusers()) {
		t.Errorf("Sysusers is not packaging/sysusers/continuityd.conf (%v)", err)
	}
}
