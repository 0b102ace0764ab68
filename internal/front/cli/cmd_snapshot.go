package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/client"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// pathList is a repeatable --path flag. Each value is a name as the
// shell gave it, or, when it begins with a double quote, a name as
// termsafe.Name prints it ("\377.txt", "a\nb"): restore lines and
// work_lost's per-path command give names so, and pasted back they name
// the same file. It holds each name in its exact form (termsafe.Exact),
// the form the API takes: JSON cannot carry bytes that are not UTF-8.
type pathList []string

func (p *pathList) String() string { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error {
	name, err := termsafe.ParseExact(v)
	if err != nil {
		return err
	}
	*p = append(*p, termsafe.Exact(name))
	return nil
}

// cmdSnapshot is `snapshot list|take|show ID|diff [ID [ID2]]|restore ID`:
// the agent's work snapshots, taking one now, and rewinding the workdir
// to one.
func cmdSnapshot(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "snapshot", "list | take [--message TEXT] | show ID | diff [ID [ID2]] [--stat] [-- PATH...] | restore ID [--path P]... [--all] [--dry-run] [--agent A] [--json] | restore --lost LOSTID [--dry-run] [--agent A] [--json]")
	var cf ClientFlags
	cf.Register(fs)
	var paths pathList
	fs.Var(&paths, "path", "restore: only this path (a file or directory, relative to the workdir; a name that begins with \" is read with C escapes, as restore prints names: '\"\\377.txt\"'); repeat for more")
	lost := fs.String("lost", "", "restore: bring back the loss resume's work_lost names by this id (no snapshot id, no --path)")
	at := fs.String("at", "", "restore: with one --path, the version of that file that stood at this time (RFC 3339, or how long ago: 90s, 5m), from the version journal")
	version := fs.String("version", "", "restore: with one --path, this version of that file (an id history gives: v42)")
	all := fs.Bool("all", false, "restore: the whole tree, every agent's files and everyone's (without it and --path: only the files this agent changed since the snapshot)")
	dry := fs.Bool("dry-run", false, "restore: list what would change, change nothing")
	asJSON := fs.Bool("json", false, "the daemon's JSON answer")
	stat := fs.Bool("stat", false, "diff: each changed file with its lines added and deleted, not the diff")
	message := fs.String("message", "", "take: the snapshot's message, shown in list and show (one line, at most 500 characters)")
	pos, filter, err := ParseFlagsSplit(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) == 0 {
		return Missing(e, "snapshot", "the action: list, take, show ID, diff [ID [ID2]] or restore ID")
	}
	sub, rest := pos[0], pos[1:]
	nargs := map[string][2]int{"list": {0, 0}, "take": {0, 0}, "show": {1, 1}, "diff": {0, 2}, "restore": {1, 1}}
	n, ok := nargs[sub]
	if !ok {
		return UnknownSub(e, "snapshot", sub)
	}
	if sub == "restore" && *lost != "" {
		if len(paths) > 0 || *all {
			fmt.Fprintln(e.Stderr, "continuityd snapshot restore: --lost brings back the paths of that loss: give no --path or --all with it")
			return ExitUsage
		}
		n = [2]int{0, 0} // the loss names its snapshot
	}
	if sub == "restore" && (*at != "" || *version != "") {
		return restoreVersion(ctx, e, cf, rest, paths, *at, *version, *dry, *all || *lost != "", *asJSON)
	}
	if sub != "diff" {
		rest, filter = append(rest, filter...), nil // -- PATH... is diff's
	}
	if len(rest) < n[0] || len(rest) > n[1] {
		return snapshotArgs(e, sub, rest, n[1])
	}
	if sub != "restore" && (len(paths) > 0 || *dry || *all || *lost != "") {
		fmt.Fprintf(e.Stderr, "continuityd snapshot %s: --path, --all, --lost and --dry-run go with restore\n", sub)
		return ExitUsage
	}
	if sub != "diff" && *stat {
		fmt.Fprintf(e.Stderr, "continuityd snapshot %s: --stat and -- PATH... go with diff\n", sub)
		return ExitUsage
	}
	if sub != "take" && *message != "" {
		fmt.Fprintf(e.Stderr, "continuityd snapshot %s: --message goes with take\n", sub)
		return ExitUsage
	}
	if *all && len(paths) > 0 {
		fmt.Fprintln(e.Stderr, "continuityd snapshot restore: --all restores the whole tree and --path only the paths named: give one of them")
		return ExitUsage
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	switch sub {
	case "list":
		return snapshotList(ctx, e, c, *asJSON)
	case "take":
		return snapshotTake(ctx, e, c, *message, *asJSON)
	case "show":
		return snapshotShow(ctx, e, c, rest[0], *asJSON)
	case "diff":
		return snapshotDiff(ctx, e, c, rest, *stat, filter, *asJSON)
	default:
		if *lost != "" {
			return restoreLost(ctx, e, c, *lost, ops.LostRestoreRequest{DryRun: *dry}, *asJSON)
		}
		return snapshotRestore(ctx, e, c, rest[0], ops.RestoreRequest{Paths: paths, All: *all, DryRun: *dry}, *asJSON)
	}
}

// snapshotArgs says what is wrong with the count of sub's arguments: the
// ID missing, or one too many (at most max).
func snapshotArgs(e *Env, sub string, rest []string, max int) int {
	if len(rest) > max {
		return TooMany(e, "snapshot "+sub, rest[max])
	}
	what := "the snapshot ID (continuityd snapshot list lists them)"
	if sub == "restore" {
		what = "the snapshot ID (continuityd snapshot list lists them), or --lost ID for a loss resume names"
	}
	return Missing(e, "snapshot "+sub, what)
}

func snapshotList(ctx context.Context, e *Env, c *client.Client, asJSON bool) int {
	if asJSON {
		out, err := ops.Snapshots.Do(ctx, c, ops.Args{})
		return printRaw(e, out, err)
	}
	ans, _, err := ops.Snapshots.Call(ctx, c, ops.Args{})
	if err != nil {
		return Fail(e, err)
	}
	if len(ans.Snapshots) == 0 {
		fmt.Fprintln(e.Stdout, "no snapshots yet")
		return ExitOK
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tTRIGGER\tSEQ\tADDED\tMODIFIED\tDELETED\tSKIPPED\tMESSAGE")
	for _, s := range ans.Snapshots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", termsafe.Name(short(s.ID)), s.Time.Local().Format(time.DateTime), termsafe.Name(s.Trigger), s.Seq, s.Added, s.Modified, s.Deleted, s.Skipped, termsafe.Line(s.Message))
	}
	tw.Flush()
	return ExitOK
}

func snapshotShow(ctx context.Context, e *Env, c *client.Client, id string, asJSON bool) int {
	if asJSON {
		out, err := ops.SnapshotShow.Do(ctx, c, ops.Args{ID: id})
		return printRaw(e, out, err)
	}
	d, _, err := ops.SnapshotShow.Call(ctx, c, ops.Args{ID: id})
	if err != nil {
		return Fail(e, err)
	}
	fmt.Fprintf(e.Stdout, "snapshot %s (%s, seq %d) at %s\n", termsafe.Name(d.ID), termsafe.Line(d.Trigger), d.Seq, d.Time.Local().Format(time.DateTime))
	if d.Parent != "" {
		fmt.Fprintf(e.Stdout, "parent %s\n", termsafe.Name(d.Parent))
	}
	if d.Message != "" {
		fmt.Fprintf(e.Stdout, "message: %s\n", termsafe.Line(d.Message))
	}
	if cv := d.Conversation; cv != nil {
		// Which turn of the conversation the code matches.
		fmt.Fprintf(e.Stdout, "conversation: session %s, last message %s\n", termsafe.Name(orNone(cv.Session)), termsafe.Name(orNone(cv.Message)))
	}
	if d.ParentGone {
		fmt.Fprintf(e.Stdout, "its parent was dropped by retention: %d added, %d modified, %d deleted\n", d.Added, d.Modified, d.Deleted)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	for _, f := range d.Files {
		lines := fmt.Sprintf("+%d -%d", f.LinesAdded, f.LinesDeleted)
		if f.Binary {
			lines = "binary"
		}
		by := f.By // whose change: agent, agent:NAME, outside
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termsafe.Name(f.Status), lines, termsafe.Line(by), termsafe.Name(f.Path))
	}
	tw.Flush()
	if more := d.Added + d.Modified + d.Deleted - len(d.Files); d.FilesCut && more > 0 {
		fmt.Fprintf(e.Stdout, "(%d more changed %s not listed)\n", more, capsule.Plural(more, "file", "files"))
	}
	for _, s := range d.SkippedFiles {
		fmt.Fprintf(e.Stdout, "skipped (%s, %d bytes): %s\n", termsafe.Line(s.Reason), s.Size, termsafe.Name(s.Path))
	}
	if d.SkippedMore > 0 {
		fmt.Fprintf(e.Stdout, "skipped: %d more\n", d.SkippedMore)
	}
	for _, w := range d.Withheld {
		fmt.Fprintf(e.Stdout, "withheld from the fleet (%s): %s\n", w.Reason, w.Path)
	}
	return ExitOK
}

// snapshotDiff prints the diff of ID against its parent, or, with two ids,
// what changed from ID to ID2; with none, the newest against its parent.
// With stat it lists the changed files with their line counts; paths limit
// it to those files and directories.
func snapshotDiff(ctx context.Context, e *Env, c *client.Client, ids []string, stat bool, paths []string, asJSON bool) int {
	a := ops.Args{ID: ops.Latest, Query: url.Values{}}
	switch len(ids) {
	case 1:
		a.ID = ids[0]
	case 2:
		a.ID = ids[1]
		a.Query.Set("against", ids[0])
	}
	if stat {
		a.Query.Set("stat", "1")
	}
	for _, p := range paths {
		a.Query.Add("path", p)
	}
	if asJSON {
		out, err := ops.SnapshotDiff.Do(ctx, c, a)
		return printRaw(e, out, err)
	}
	d, _, err := ops.SnapshotDiff.Call(ctx, c, a)
	if err != nil {
		return Fail(e, err)
	}
	fmt.Fprint(e.Stdout, termsafe.Text(d.Diff))
	if d.Cut {
		fmt.Fprintln(e.Stderr, "continuityd snapshot diff: the diff was cut at its bound (1 MiB); give fewer changes or compare nearer snapshots")
	}
	return ExitOK
}

func snapshotRestore(ctx context.Context, e *Env, c *client.Client, id string, req ops.RestoreRequest, asJSON bool) int {
	body, err := ops.SnapshotRestore.Encode(&req)
	if err != nil {
		return Fail(e, err)
	}
	a := ops.Args{ID: id, Body: body}
	if asJSON {
		out, err := ops.SnapshotRestore.Do(ctx, c, a)
		return printRaw(e, out, err)
	}
	r, _, err := ops.SnapshotRestore.Call(ctx, c, a)
	if err != nil {
		return Fail(e, err)
	}
	return printRestore(e, r)
}

// restoreLost brings back the loss id (work_lost[].id).
func restoreLost(ctx context.Context, e *Env, c *client.Client, id string, req ops.LostRestoreRequest, asJSON bool) int {
	body, err := ops.WorkLostRestore.Encode(&req)
	if err != nil {
		return Fail(e, err)
	}
	a := ops.Args{ID: id, Body: body}
	if asJSON {
		out, err := ops.WorkLostRestore.Do(ctx, c, a)
		return printRaw(e, out, err)
	}
	r, _, err := ops.WorkLostRestore.Call(ctx, c, a)
	if err != nil {
		return Fail(e, err)
	}
	return printRestore(e, r)
}

// printRestore prints what a restore changed, each name as termsafe.Name
// prints it (the names come in their exact form).
func printRestore(e *Env, r *ops.RestoreAnswer) int {
	verb := map[string]string{ops.StatusAdded: "restore", ops.StatusModified: "restore", ops.StatusDeleted: "remove"}
	if len(r.Changes) == 0 {
		fmt.Fprintln(e.Stdout, "nothing to change: the files already match the snapshot")
	}
	for _, ch := range r.Changes {
		fmt.Fprintf(e.Stdout, "%s %s\n", verb[ch.Status], termsafe.ShowExact(ch.Path))
	}
	for _, rf := range r.Refused {
		fmt.Fprintf(e.Stdout, "left alone %s: %s\n", termsafe.ShowExact(rf.Path), termsafe.Line(rf.Reason))
	}
	for _, l := range r.LeftAlone {
		fmt.Fprintf(e.Stdout, "left alone %s: changed by %s\n", termsafe.ShowExact(l.Path), termsafe.Name(l.By))
	}
	if r.Scope == ops.ScopeMine {
		fmt.Fprintln(e.Stdout, "(only the files this agent changed since the snapshot; --all restores the whole tree)")
	}
	switch {
	case r.DryRun:
		fmt.Fprintln(e.Stdout, "(dry run: nothing changed)")
	case r.Safety != "":
		fmt.Fprintf(e.Stdout, "the tree as it was is snapshot %s; undo with: continuityd snapshot restore %s --all\n", termsafe.Name(short(r.Safety)), termsafe.Name(short(r.Safety)))
	}
	return ExitOK
}

// orNone is s, or "(unknown)" when empty.
func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// short is a snapshot id as people read it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

var _ flag.Value = (*pathList)(nil)
