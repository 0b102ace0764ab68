package cli

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdUI asks the daemon, over the socket (so that it knows who asks), for
// a one-time login URL of the web page and opens it in the browser where
// it can; --print only prints it, --revoke ends the sessions instead.
func cmdUI(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "ui", "[--print] [--revoke]")
	var cf ClientFlags
	cf.Register(fs)
	printOnly := fs.Bool("print", false, "print the URL, do not open a browser")
	revoke := fs.Bool("revoke", false, "end the web page's sessions (every one for root and the daemon's user, yours for anyone else)")
	if pos, err := ParseFlags(fs, args); err != nil {
		return ExitUsage
	} else if len(pos) > 0 {
		return TooMany(e, "ui", pos[0])
	}
	if *revoke {
		ans, code, ok := callOrPrint(ctx, e, cf, ops.UIRevoke, ops.Args{}, false)
		if !ok {
			return code
		}
		whose := "yours"
		if ans.All {
			whose = "every user's"
		}
		fmt.Fprintf(e.Stdout, "ended %d web page sessions (%s) and the login URLs not yet used\n", ans.Revoked, whose)
		return ExitOK
	}
	ans, code, ok := callOrPrint(ctx, e, cf, ops.UILogin, ops.Args{}, false)
	if !ok {
		return code
	}
	url := termsafe.Line(ans.URL)
	if !*printOnly && openBrowser(e, ans.URL) {
		fmt.Fprintf(e.Stderr, "opened the web page in your browser (%s); the URL works once, within %s:\n", pageListener(ans.Listener == "own"), ans.ExpiresIn)
	}
	fmt.Fprintln(e.Stdout, url)
	return ExitOK
}

// openBrowser opens url with xdg-open (open on macOS) when there is a
// display to open it on; false when it could not.
func openBrowser(e *Env, url string) bool {
	if e.Getenv("DISPLAY") == "" && e.Getenv("WAYLAND_DISPLAY") == "" && !darwin {
		return false
	}
	opener := "xdg-open"
	if darwin {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return false
	}
	return exec.Command(path, url).Run() == nil
}

// pageListener says what serves the page.
func pageListener(own bool) string {
	if own {
		return "a loopback listener the daemon opened for the page"
	}
	return "the loopback listener daemon.listen configures"
}
