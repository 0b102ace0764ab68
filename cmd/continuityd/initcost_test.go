package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// initBudget bounds what continuityd's own packages may allocate at
// package initialisation, all together. Every process of the binary pays
// it, and an agent starts `continuityd hook` many times a session: a
// regexp, template or table a package needs only for some command is
// built on first use (internal/lazyregexp, sync.OnceValue), not in a var.
// Before that rule the packages allocated 1.2 MB at start (the NATS
// subject prefix pattern alone expands {1,64} eight times); after it,
// about 12 KB.
const initBudget = 64 << 10

// allInitBudget bounds what all the hook process's packages allocate at
// initialisation, the standard library's and the dependencies' included.
// With the daemon's packages linked in (prometheus, procfs, protobuf,
// gob, nats.go, kardianos/service) they allocated 632 KB; the front,
// which hands the daemon's commands to continuityd-daemon, about 180 KB.
const allInitBudget = 256 << 10

// The hook process pays no package initialisation it does not use: the
// runtime's own inittrace (GODEBUG=inittrace=1) lists what each package's
// initialisation allocated, which does not depend on the machine's speed.
func TestHookPaysNoPackageInit(t *testing.T) {
	cmd := exec.Command(binary, "hook", "--socket", "/nonexistent/continuityd.sock")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "CONTINUITYD_STATE_DIR="+t.TempDir())
	cmd.Stdin = strings.NewReader(`{}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("continuityd hook: %v\n%s", err, stderr.String())
	}
	type cost struct {
		pkg   string
		bytes int
	}
	var ours, all []cost
	total, allTotal, lines := 0, 0, 0
	trace := stderr.String()
	sc := bufio.NewScanner(strings.NewReader(trace))
	for sc.Scan() {
		// init github.com/… @1.2 ms, 0.41 ms clock, 3528 bytes, 46 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		lines++
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		all = append(all, cost{f[1], n})
		allTotal += n
		if !strings.HasPrefix(f[1], "github.com/continuityd/continuityd") {
			continue
		}
		ours = append(ours, cost{f[1], n})
		total += n
	}
	if lines == 0 {
		t.Fatalf("no inittrace lines in the hook's stderr:\n%s", trace)
	}
	// costliest lists the costliest packages first, for the message.
	costliest := func(cs []cost, n int) string {
		sort.Slice(cs, func(i, j int) bool { return cs[i].bytes > cs[j].bytes })
		var b strings.Builder
		for i, c := range cs {
			if i == n {
				fmt.Fprintf(&b, "\n  … and %d more", len(cs)-n)
				break
			}
			fmt.Fprintf(&b, "\n  %8d bytes  %s", c.bytes, c.pkg)
		}
		return b.String()
	}
	if total > initBudget {
		t.Errorf("continuityd's packages allocate %d bytes at initialisation, over the %d budget; build these on first use:%s", total, initBudget, costliest(ours, len(ours)))
	}
	if allTotal > allInitBudget {
		t.Errorf("the hook process's packages allocate %d bytes at initialisation, over the %d budget; a command that needs these belongs in continuityd-daemon (internal/daemonside/daemoncmd), or they are built on first use:%s", allTotal, allInitBudget, costliest(all, 20))
	}
}
