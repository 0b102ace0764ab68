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
	var ours []cost
	total, lines := 0, 0
	trace := stderr.String()
	sc := bufio.NewScanner(strings.NewReader(trace))
	for sc.Scan() {
		// init github.com/… @1.2 ms, 0.41 ms clock, 3528 bytes, 46 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		lines++
		if !strings.HasPrefix(f[1], "github.com/continuityd/continuityd") {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		ours = append(ours, cost{f[1], n})
		total += n
	}
	if lines == 0 {
		t.Fatalf("no inittrace lines in the hook's stderr:\n%s", trace)
	}
	if total > initBudget {
		sort.Slice(ours, func(i, j int) bool { return ours[i].bytes > ours[j].bytes })
		var b strings.Builder
		for _, c := range ours {
			fmt.Fprintf(&b, "\n  %8d bytes  %s", c.bytes, c.pkg)
		}
		t.Errorf("continuityd's packages allocate %d bytes at initialisation, over the %d budget; build these on first use:%s", total, initBudget, b.String())
	}
}
