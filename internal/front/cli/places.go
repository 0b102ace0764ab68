package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// printPlaces shows status's places: each with its directory and whether
// it is watched, where moved state went, and the inotify watches in use
// beside the system's limit (a place that cannot be watched for want of
// watches is degraded; this says why before it happens).
func printPlaces(w io.Writer, st *ops.StatusAnswer) {
	if len(st.Places) > 0 {
		fmt.Fprintln(w, "\nplaces (projects sessions adopted; pick one with --agent NAME, or run the command inside it):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, p := range st.Places {
			state := "unwatched (idle; its next session watches it again)"
			if p.Watched {
				state = "watched"
			}
			last := "no session yet"
			if p.LastSession != nil {
				last = "last session " + time.Since(*p.LastSession).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", termsafe.Name(p.Name), termsafe.Name(p.Workdir), state, last)
		}
		tw.Flush()
	}
	for _, m := range st.Moved {
		fmt.Fprintf(w, "state of %s moved: %s is now %s, history and snapshots with it (%s)\n",
			termsafe.Name(m.Workdir), termsafe.Name(m.From), termsafe.Name(m.To), m.At.Format(time.RFC3339))
	}
	if u := st.Watches; u != nil {
		if u.Limit > 0 {
			fmt.Fprintf(w, "inotify watches: %d in use of the system's %d (fs.inotify.max_user_watches)\n", u.InUse, u.Limit)
		} else {
			fmt.Fprintf(w, "inotify watches: %d in use\n", u.InUse)
		}
	}
}
