package main

import (
	"fmt"
	"os/exec"
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
		t.Errorf("cmd/continuityd links packages only continuityd-daemon may (move the command that needs them to internal/cli/daemoncmd, or the type it needs to internal/ops):\n  %s", strings.Join(found, "\n  "))
	}
	found := linked(t, "../continuityd-daemon", daemonOnly)
	for _, d := range daemonOnly {
		if !slices.ContainsFunc(found, func(f string) bool { return f == d || strings.HasPrefix(f, d+" (") }) {
			t.Errorf("continuityd-daemon does not link %s: the check above cannot see it", d)
		}
	}
}
