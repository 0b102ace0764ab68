package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// daemonOnly are packages (a trailing "/" matches what is under it) that
// only continuityd-daemon may link. Every package a binary links runs its
// initialisation in every process of it, and an agent starts the front at
// each hook: these initialise metrics, protobuf descriptors, gob's type
// tables, NATS's keys, the service managers' detection, a JSON Schema
// library's reflection of its own types, the MCP SDK; and the daemon's own
// packages (every one under daemon/) bring the store (bbolt) and the
// watcher (fsnotify) with them.
var daemonOnly = []string{
	"github.com/prometheus/",
	"github.com/nats-io/",
	"github.com/kardianos/service",
	"github.com/coreos/go-systemd/",
	"encoding/gob",
	"google.golang.org/protobuf/",
	"github.com/google/jsonschema-go/",
	"github.com/modelcontextprotocol/",
	"go.etcd.io/bbolt",
	"github.com/fsnotify/fsnotify",
	"github.com/continuityd/continuityd/capsule/schema",
	"github.com/continuityd/continuityd/daemon",
	"github.com/continuityd/continuityd/daemon/",
}

// testOnly are packages neither binary links: the OpenAPI validator the
// tests check the served document with.
var testOnly = []string{"github.com/pb33f/"}

// linked lists what of the packages named (daemonOnly, testOnly) the main
// package pkg links: each entry with the packages of it, "encoding/gob" or
// "github.com/prometheus/ (12 packages: …)".
func linked(t *testing.T, pkg string, named []string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	var found []string
	for _, d := range named {
		var of []string
		for _, dep := range deps {
			if dep == d || strings.HasSuffix(d, "/") && strings.HasPrefix(dep, d) {
				of = append(of, dep)
			}
		}
		switch {
		case len(of) == 1 && of[0] == d:
			found = append(found, d)
		case len(of) > 0:
			found = append(found, fmt.Sprintf("%s (%d packages: %s)", d, len(of), strings.Join(of, " ")))
		}
	}
	return found
}

// The front links none of the daemon's packages (the hook pays for
// nothing it does not use), and the check can fail: the daemon binary
// links each of them.
func TestFrontLinksNoDaemonPackage(t *testing.T) {
	if found := linked(t, ".", append(slices.Clone(daemonOnly), testOnly...)); len(found) > 0 {
		t.Errorf("cmd/continuityd links packages only continuityd-daemon may (move the command that needs them to internal/daemonside/daemoncmd, or the type it needs to internal/ops):\n  %s", strings.Join(found, "\n  "))
	}
	found := linked(t, "../continuityd-daemon", daemonOnly)
	for _, d := range daemonOnly {
		if !slices.ContainsFunc(found, func(f string) bool { return f == d || strings.HasPrefix(f, d+" (") }) {
			t.Errorf("continuityd-daemon does not link %s: the check above cannot see it", d)
		}
	}
}

// depawareFile lists every package the front links, one a line: the
// module's, its dependencies' and the standard library's, less the
// standard library's internal and vendored packages (those follow the Go
// release, not this code). A change that links a new package shows as a
// line added to it, in review; `go test -run TestFrontDependencies
// ./cmd/continuityd/ -update` rewrites it.
const depawareFile = "depaware.txt"

// frontDeps is what depawareFile lists for the front as it is built now.
func frontDeps(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{else}}std {{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if std, ok := strings.CutPrefix(l, "std "); ok {
			if strings.HasPrefix(std, "internal/") || strings.Contains(std, "/internal/") || strings.HasSuffix(std, "/internal") || strings.HasPrefix(std, "vendor/") {
				continue
			}
			l = std
		}
		lines = append(lines, l)
	}
	slices.Sort(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// The front's dependencies are the checked-in list's: a new one is a
// visible change of depaware.txt, not a silent one of the hook's cost.
// (The list is the Linux build's: another system's build links its own.)
func TestFrontDependencies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("depaware.txt lists the Linux build's packages")
	}
	got := frontDeps(t)
	if *update {
		if err := os.WriteFile(depawareFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(depawareFile)
	if err != nil {
		t.Fatalf("%v (go test -run TestFrontDependencies ./cmd/continuityd/ -update writes it)", err)
	}
	if diff := lineDiff(string(want), string(got)); diff != "" {
		t.Errorf("cmd/continuityd links other packages than %s lists (+ linked now, - no longer); if that is meant, rewrite it with go test -run TestFrontDependencies ./cmd/continuityd/ -update:\n%s", depawareFile, diff)
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
