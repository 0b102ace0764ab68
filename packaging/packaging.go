// Package packaging holds the service definitions of continuityd: the
// systemd units, the launchd job and the sysusers.d entry, as the templates
// and files under packaging/ that are embedded here.
//
// Those templates are the one source of truth. The files the packages ship
// (packaging/systemd/*.service, packaging/launchd/dev.continuityd.plist,
// and the config the packages build with packaging/gen) are the templates
// rendered with the package's paths (see Shipped; the package's tests fail when they drift),
// and `continuityd service install` renders the same templates with the
// running binary and the operator's config.
package packaging

import (
	"bytes"
	"embed"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/continuityd/continuityd/config"
)

// Names and places shared by the packages and `continuityd service`.
const (
	// ServiceName names the systemd unit (continuityd.service) and the
	// Windows service.
	ServiceName = "continuityd"
	// LaunchdLabel is the launchd job's label and its plist's base name.
	LaunchdLabel = "dev.continuityd"
	// SystemUser is the dedicated user (and group) of the system service.
	SystemUser = "continuityd"

	// PackagedBinary and PackagedConfig are where the .deb and .rpm install
	// the binary and the config the packaged system unit runs with.
	// PackagedDaemonBinary, installed beside it, runs the daemon-side
	// commands (`continuityd run` becomes it, keeping its PID).
	PackagedBinary       = "/usr/bin/continuityd"
	PackagedDaemonBinary = "/usr/bin/continuityd-daemon"
	PackagedConfig       = "/etc/continuityd/continuityd.toml"

	// SystemStateDir and SystemRuntimeDir are the directories the system
	// unit's StateDirectory= and RuntimeDirectory= create; they are
	// continuityd's FHS defaults.
	SystemStateDir   = "/var/lib/continuityd"
	SystemRuntimeDir = "/run/continuityd"
)

//go:embed templates/continuityd.service.tmpl templates/dev.continuityd.plist.tmpl sysusers/continuityd.conf man/continuityd.1
var files embed.FS

// The templates are parsed on first use, not at package initialisation:
// every process of the binary (each agent hook) would pay for them.
var (
	unitTmpl  = sync.OnceValue(func() *template.Template { return parse("templates/continuityd.service.tmpl") })
	plistTmpl = sync.OnceValue(func() *template.Template { return parse("templates/dev.continuityd.plist.tmpl") })
)

func parse(name string) *template.Template {
	text, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return template.Must(template.New(filepath.Base(name)).Option("missingkey=error").Funcs(template.FuncMap{
		"line": unitLine,
		"join": func(words []string) string { return strings.Join(words, " ") },
		"xml":  xmlText,
	}).Parse(string(text)))
}

// Sysusers is the sysusers.d(5) entry that creates SystemUser, as the
// packages install it to /usr/lib/sysusers.d/continuityd.conf.
func Sysusers() []byte {
	b, err := files.ReadFile("sysusers/continuityd.conf")
	if err != nil {
		panic(err)
	}
	return b
}

// ManPage is continuityd(1) in roff, which the packages install gzipped
// (packaging/gen makes the .gz).
func ManPage() []byte {
	b, err := files.ReadFile("man/continuityd.1")
	if err != nil {
		panic(err)
	}
	return b
}

// Unit describes a systemd unit for continuityd. Paths must be absolute.
type Unit struct {
	// UserUnit makes a unit for a per-user manager (systemd --user): no
	// User=, no file-system sandbox, WantedBy=default.target. Otherwise the
	// unit is a system service running as SystemUser in a sandbox.
	UserUnit bool
	// Packaged selects the comments of the units shipped in the packages.
	// A packaged user unit runs `run` alone: the daemon then reads
	// ~/.config/continuityd/continuityd.toml of whichever user runs it
	// when that file exists, and serves the places that user's sessions
	// adopt either way.
	Packaged bool

	// Binary is the continuityd executable.
	Binary string
	// Config is the config file passed to `run --config`; "" runs the
	// user's own file when it exists, else the embedded default.
	Config string
	// WorkingDirectory is where the daemon starts, which is the work
	// directory, a place when the config declares no agents; ""
	// leaves systemd's default (/ for the system, the home for a user).
	WorkingDirectory string

	// The paths the daemon writes to, for the system unit's sandbox: its
	// state directory, its socket's directory and the agents' work
	// directories. SystemStateDir and SystemRuntimeDir need not be given.
	StateDir  string
	SocketDir string
	Workdirs  []string
	// ReadPaths are files the daemon only reads (the config, token files);
	// they matter to the sandbox only when they are under a home directory.
	ReadPaths []string
}

// unitView is what the unit template sees.
type unitView struct {
	Unit
	User              string
	ExecStart         string
	ReadWritePaths    []string // unit syntax, "-" prefixed when they may be missing
	BindPaths         []string
	BindReadOnlyPaths []string
	HomeBinds         bool
}

// Render returns the unit file. The sandbox of a system unit makes the file
// system read-only but for ReadWritePaths= (the state directory, the socket
// directory and the work directories), and hides the home directories
// (ProtectHome=yes), unless one of those paths, or a ReadPath, is under
// /home, /root or /run/user: then the homes become an empty tmpfs
// (ProtectHome=tmpfs) in which exactly those paths are bound (BindPaths=,
// BindReadOnlyPaths=), so the service sees no other part of any home, and
// needs no access to the directories above its work directories.
func (u Unit) Render() ([]byte, error) {
	if err := u.check(); err != nil {
		return nil, err
	}
	v := unitView{Unit: u, User: SystemUser}
	args := []string{execWord(u.Binary), "run"}
	if u.Config != "" {
		args = append(args, "--config", execWord(u.Config))
	}
	v.ExecStart = strings.Join(args, " ")
	if !u.UserUnit {
		var write []string
		if u.StateDir != "" {
			write = append(write, u.StateDir)
		}
		if u.SocketDir != "" && !within(u.SocketDir, SystemRuntimeDir) {
			write = append(write, u.SocketDir)
		}
		write = append(write, u.Workdirs...)
		for _, p := range outermost(write) {
			switch {
			case underHome(p):
				v.BindPaths = append(v.BindPaths, listWord("-"+p))
			case p == SystemStateDir: // made by StateDirectory=, always there
				v.ReadWritePaths = append(v.ReadWritePaths, listWord(p))
			default:
				v.ReadWritePaths = append(v.ReadWritePaths, listWord("-"+p))
			}
		}
		for _, p := range outermost(u.ReadPaths) {
			if underHome(p) && !coveredBy(p, write) {
				v.BindReadOnlyPaths = append(v.BindReadOnlyPaths, listWord("-"+p))
			}
		}
		v.HomeBinds = len(v.BindPaths)+len(v.BindReadOnlyPaths) > 0
	}
	var b bytes.Buffer
	if err := unitTmpl().Execute(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// check refuses what a unit file cannot carry.
func (u Unit) check() error {
	if u.Binary == "" {
		return errors.New("packaging: no binary")
	}
	named := map[string]string{"binary": u.Binary, "config": u.Config, "working directory": u.WorkingDirectory,
		"state directory": u.StateDir, "socket directory": u.SocketDir}
	for _, w := range u.Workdirs {
		named["work directory "+w] = w
	}
	for _, r := range u.ReadPaths {
		named["file "+r] = r
	}
	for what, p := range named {
		if p == "" {
			continue
		}
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("packaging: the %s %q is not an absolute path", what, p)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("packaging: the %s %q holds a control character, which a unit file cannot carry", what, p)
		}
		if underHome(p) && strings.Contains(p, ":") {
			return fmt.Errorf("packaging: the %s %q holds a ':', which BindPaths= cannot carry", what, p)
		}
	}
	return nil
}

// homeRoots are the directories ProtectHome= covers.
var homeRoots = []string{"/home", "/root", "/run/user"}

func underHome(p string) bool {
	for _, h := range homeRoots {
		if within(p, h) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func coveredBy(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// outermost returns the cleaned paths in their order, without duplicates and
// without those inside another one of them.
func outermost(paths []string) []string {
	var out []string
	for i, p := range paths {
		p = filepath.Clean(p)
		inside := false
		for j, q := range paths {
			q = filepath.Clean(q)
			if i != j && within(p, q) && (p != q || j < i) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
}

// execWord quotes one word of ExecStart=: specifiers (%) and variables ($)
// are escaped, and a word with blanks, quotes or backslashes is quoted.
func execWord(s string) string {
	s = strings.NewReplacer("%", "%%", "$", "$$").Replace(s)
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// listWord quotes one path of a space-separated list such as ReadWritePaths=.
func listWord(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// unitLine escapes a value that takes the rest of its line.
func unitLine(s string) string { return strings.ReplaceAll(s, "%", "%%") }

func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Plist describes the launchd job of continuityd. Paths must be absolute.
type Plist struct {
	// Packaged selects the comment of the example plist shipped in the
	// release archives.
	Packaged bool
	// Binary is the continuityd executable; Config the file passed to
	// `run --config`, "" for the embedded default.
	Binary, Config string
	// WorkingDirectory is where the daemon starts (a place when the
	// config declares no agents); "" for /.
	WorkingDirectory string
	// UserName runs a system job (a LaunchDaemon) as that user; "" for a
	// LaunchAgent, which runs as the user who loads it.
	UserName string
	// LogPath receives the daemon's output; "" discards it.
	LogPath string
}

// Render returns the plist. The job is loaded at login (a LaunchAgent) or
// boot (a LaunchDaemon), and restarted after a failure.
func (p Plist) Render() ([]byte, error) {
	if p.Binary == "" {
		return nil, errors.New("packaging: no binary")
	}
	for _, s := range []string{p.Binary, p.Config, p.WorkingDirectory, p.LogPath} {
		if s != "" && !strings.HasPrefix(s, "/") {
			return nil, fmt.Errorf("packaging: %q is not an absolute path", s)
		}
	}
	view := struct {
		Plist
		Label string
	}{p, LaunchdLabel}
	var b bytes.Buffer
	if err := plistTmpl().Execute(&b, view); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// SystemConfig is the config the packages install to PackagedConfig: the
// commented default of `continuityd config default`, with the system
// service's state directory and socket set, and one agent "default" without
// a work directory (the operator declares the real agents), so that the
// packaged service never watches its own working directory.
func SystemConfig() ([]byte, error) {
	lines := strings.SplitAfter(string(config.DefaultTOML()), "\n")
	for key, value := range map[string]string{
		"state_dir": SystemStateDir,
		"socket":    SystemRuntimeDir + "/continuityd.sock",
	} {
		n := 0
		for i, l := range lines {
			if strings.HasPrefix(l, "# "+key+" = ") {
				lines[i] = key + " = " + strconv.Quote(value) + "\n"
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("packaging: the default config has %d commented %q lines, not the one to set for the system service", n, key)
		}
	}
	out := strings.Join(lines, "")
	header := `# /etc/continuityd/continuityd.toml: the config of the continuityd system
# service (continuityd.service, which runs as the user continuityd).
#
# It is ` + "`continuityd config default`" + ` with the system service's state
# directory and socket set, and one agent without a work directory at the
# end. Declare your agents there; the service may write only to its state
# directory, so either add each work directory with ` + "`systemctl edit continuityd`" + `
# ([Service] ReadWritePaths=/srv/agents/builder), or run
#   continuityd service install --config /etc/continuityd/continuityd.toml
# which writes a unit with every configured work directory. Check the file
# with ` + "`continuityd config check /etc/continuityd/continuityd.toml`" + `.
#
`
	footer := `
# The agents this service serves. Replace this one with yours (see the
# commented [[agent]] above). It has no work directory, so that the service
# does not watch its own working directory.
[[agent]]
name = "default"
workdir = ""
`
	return []byte(header + out + footer), nil
}

// Shipped returns the files under packaging/ that are rendered from the
// templates, by their path below packaging/: the system and user units of
// the .deb and .rpm, and the example launchd plist of the darwin archives.
// (The packages' config is made at build time by packaging/gen, because it
// follows config.DefaultTOML.)
func Shipped() (map[string][]byte, error) {
	out := map[string][]byte{}
	var err error
	add := func(name string, b []byte, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
		out[name] = b
	}
	b, e := Unit{Packaged: true, Binary: PackagedBinary, Config: PackagedConfig, StateDir: SystemStateDir}.Render()
	add("systemd/continuityd.service", b, e)
	b, e = Unit{Packaged: true, UserUnit: true, Binary: PackagedBinary}.Render()
	add("systemd/continuityd-user.service", b, e)
	b, e = Plist{Packaged: true, Binary: "/usr/local/bin/continuityd",
		Config: "/usr/local/etc/continuityd/continuityd.toml", LogPath: "/usr/local/var/log/continuityd.log"}.Render()
	add("launchd/"+LaunchdLabel+".plist", b, e)
	return out, err
}
