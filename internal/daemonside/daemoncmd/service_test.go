package daemoncmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/internal/front/cli"
)

// These tests install nothing: they check the arguments, the unit that
// `service install --print` renders, and the reading of systemctl's and
// launchctl's answers.

func TestParseServiceArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
		want serviceArgs
	}{
		{[]string{"install"}, true, serviceArgs{action: "install"}},
		{[]string{"install", "--user", "--config", "c.toml"}, true, serviceArgs{action: "install", user: true, config: "c.toml"}},
		{[]string{"--user", "status"}, true, serviceArgs{action: "status", user: true}},
		{[]string{"install", "--print"}, true, serviceArgs{action: "install", print: true}},
		{[]string{"restart", "--config", "c.toml"}, true, serviceArgs{action: "restart", config: "c.toml"}},
		{nil, false, serviceArgs{}},
		{[]string{"enable"}, false, serviceArgs{}},
		{[]string{"start", "stop"}, false, serviceArgs{}},
		{[]string{"status", "--print"}, false, serviceArgs{}},
		{[]string{"status", "--bogus"}, false, serviceArgs{}},
	} {
		var stderr bytes.Buffer
		got, ok := parseServiceArgs(&cli.Env{Stderr: &stderr}, c.args)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%q: got %+v, %v; want %+v, %v (stderr %q)", c.args, got, ok, c.want, c.ok, stderr.String())
		}
		if !ok && stderr.Len() == 0 {
			t.Errorf("%q: refused without a word on stderr", c.args)
		}
	}
}

func runService(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: os.Getenv}
	code = cmdService(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func TestServiceUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"bogus"}, {"status", "--print"}} {
		if code, _, _ := runService(t, args...); code != cli.ExitUsage {
			t.Errorf("service %q exited %d, want %d", args, code, cli.ExitUsage)
		}
	}
	var out bytes.Buffer
	cli.Main(cli.Program{DaemonSide: Run}, []string{"help"}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "\n  service ") {
		t.Errorf("the usage does not list the service command:\n%s", out.String())
	}
}

func TestServiceInstallPrint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("renders a systemd unit")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	cfgPath := filepath.Join(dir, "c.toml")
	cfg := "[daemon]\nstate_dir = " + quote(filepath.Join(dir, "state")) + "\nsocket = " + quote(filepath.Join(dir, "run", "s.sock")) +
		"\n\n[[agent]]\nname = \"builder\"\nworkdir = " + quote(work) + "\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	code, out, errs := runService(t, "install", "--print", "--config", cfgPath)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"ExecStart=" + bin + " run --config " + cfgPath + "\n",
		"Type=notify\n",
		"User=continuityd\n",
		"ReadWritePaths=-" + filepath.Join(dir, "state") + " -" + filepath.Join(dir, "run") + " -" + work + "\n",
		"ProtectHome=yes\n",
		"WantedBy=multi-user.target\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the unit lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nWorkingDirectory=") {
		t.Errorf("a config with agents sets WorkingDirectory:\n%s", out)
	}

	// The same config as a user service: no sandbox, no User=.
	code, out, errs = runService(t, "install", "--print", "--user", "--config", cfgPath)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "WantedBy=default.target\n") || strings.Contains(out, "\nUser=") || strings.Contains(out, "\nProtectSystem=") {
		t.Errorf("not a user unit:\n%s", out)
	}

	// A relative --config is made absolute, as the service needs it.
	t.Chdir(dir)
	code, out, errs = runService(t, "install", "--print", "--config", "c.toml")
	if code != cli.ExitOK || !strings.Contains(out, " run --config "+cfgPath+"\n") {
		t.Errorf("relative --config: exit %d, %s\n%s", code, errs, out)
	}
}

func TestServiceInstallDefaultAgent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("renders a systemd unit")
	}
	// No config: agent "default" works in the directory of the install,
	// so the service starts there.
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errs := runService(t, "install", "--print", "--user")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "WorkingDirectory="+dir+"\n") || !strings.Contains(out, " run\n") {
		t.Errorf("the unit does not run the embedded default in %s:\n%s", dir, out)
	}

	// From / or the home, which are never a place, the service serves
	// the places sessions adopt: it does not start in either on purpose.
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, d := range []string{"/", home} {
		t.Chdir(d)
		code, out, errs := runService(t, "install", "--print", "--user")
		if code != cli.ExitOK || strings.Contains(out, "\nWorkingDirectory=") || !strings.Contains(out, " run\n") {
			t.Errorf("install from %s: exit %d, %q\n%s", d, code, errs, out)
		}
	}
}

func TestServiceInstallBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[daemon]\nbogus = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runService(t, "install", "--print", "--config", bad)
	if code != cli.ExitUsage || out != "" || !strings.Contains(errs, "bogus") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d naming the key", code, out, errs, cli.ExitUsage)
	}
	if code, _, _ := runService(t, "install", "--print", "--config", filepath.Join(dir, "missing.toml")); code != cli.ExitUsage {
		t.Errorf("a missing config: exit %d, want %d", code, cli.ExitUsage)
	}
}

func quote(s string) string { return `"` + s + `"` }

func TestParseSystemctlShow(t *testing.T) {
	for _, c := range []struct {
		name, out string
		code      int
		summary   string
	}{
		{"running", `LoadState=loaded
ActiveState=active
SubState=running
MainPID=4242
Result=success
NRestarts=0
ExecMainStatus=0
UnitFileState=enabled
FragmentPath=/etc/systemd/system/continuityd.service
`, statusRunning, "continuityd.service (system): installed, running, pid 4242"},
		{"failed", `MainPID=0
NRestarts=10
ExecMainStatus=1
Result=exit-code
LoadState=loaded
ActiveState=failed
SubState=failed
`, statusNotRunning, "continuityd.service (system): installed, stopped: failed (exit-code), restarted 10 times"},
		{"waiting to restart", `LoadState=loaded
ActiveState=activating
SubState=auto-restart
MainPID=0
Result=exit-code
NRestarts=3
`, statusNotRunning, "continuityd.service (system): installed, stopped: restarting after a failure (exit-code), restarted 3 times"},
		{"starting", `LoadState=loaded
ActiveState=activating
SubState=start
MainPID=99
Result=success
NRestarts=0
`, statusNotRunning, "continuityd.service (system): installed, starting"},
		{"stopped", `LoadState=loaded
ActiveState=inactive
SubState=dead
MainPID=0
Result=success
NRestarts=0
UnitFileState=disabled
`, statusNotRunning, "continuityd.service (system): installed, stopped"},
		{"not installed", `LoadState=not-found
ActiveState=inactive
SubState=dead
MainPID=0
Result=success
NRestarts=0
UnitFileState=
`, statusNotInstalled, "continuityd.service (system): not installed"},
		{"masked", `LoadState=masked
ActiveState=inactive
SubState=dead
`, statusNotRunning, "continuityd.service (system): installed, stopped: masked (systemctl unmask continuityd.service)"},
	} {
		st := parseSystemctlShow("continuityd.service", "system", c.out)
		if st.code != c.code || st.summary != c.summary {
			t.Errorf("%s: got %d %q, want %d %q", c.name, st.code, st.summary, c.code, c.summary)
		}
		// The report is the summary alone, not systemctl's own text.
		if st.String() != c.summary+"\n" || strings.Contains(st.String(), "=") {
			t.Errorf("%s: the report is not the plain summary:\n%s", c.name, st)
		}
	}
}

func TestParseLaunchctlPrint(t *testing.T) {
	running := `gui/501/dev.continuityd = {
	active count = 1
	path = /Users/alice/Library/LaunchAgents/dev.continuityd.plist
	type = LaunchAgent
	state = running

	program = /usr/local/bin/continuityd
	arguments = {
		/usr/local/bin/continuityd
		run
	}

	runs = 1
	pid = 812
	immediate reason = speculative
	forks = 0
	last exit code = (never exited)
	properties = keepalive | runatload | inferred program
}
`
	st := parseLaunchctlPrint("gui/501/dev.continuityd", running)
	if st.code != statusRunning || st.summary != "gui/501/dev.continuityd: installed, running, pid 812, runs 1" {
		t.Errorf("running: got %d %q", st.code, st.summary)
	}
	if st.String() != st.summary+"\n" {
		t.Errorf("running: the report is not the plain summary:\n%s", st)
	}

	waiting := `gui/501/dev.continuityd = {
	active count = 0
	path = /Users/alice/Library/LaunchAgents/dev.continuityd.plist
	state = not running
	runs = 4
	last exit code = 2
}
`
	st = parseLaunchctlPrint("gui/501/dev.continuityd", waiting)
	if st.code != statusNotRunning || st.summary != "gui/501/dev.continuityd: installed, stopped (not running), last exit code 2, runs 4" {
		t.Errorf("not running: got %d %q", st.code, st.summary)
	}
}
