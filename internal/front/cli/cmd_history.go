package cli

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// cmdHistory is `history PATH [--json]`: a file's versions from the
// version journal.
func cmdHistory(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet(e, "history", "PATH [--agent A] [--json]")
	var cf ClientFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "the daemon's JSON answer")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return ExitUsage
	}
	switch {
	case len(pos) == 0:
		return Missing(e, "history", "the file (PATH, relative to the workdir or absolute)")
	case len(pos) > 1:
		return TooMany(e, "history", pos[1])
	}
	name, err := termsafe.ParseExact(pos[0])
	if err != nil {
		return Fail(e, err)
	}
	if !filepath.IsAbs(name) {
		// A path given from a subdirectory of the workdir names the file
		// there: the daemon takes absolute paths inside the workdir.
		if abs, err := filepath.Abs(name); err == nil {
			name = abs
		}
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	return printAnswer(ctx, e, c, ops.History.Op(), ops.Args{Query: url.Values{"path": {termsafe.Exact(name)}}}, *asJSON)
}

// restoreVersion is `snapshot restore --path P --at TIME|--version V
// [--dry-run]`: one version of one file from the version journal.
func restoreVersion(ctx context.Context, e *Env, cf ClientFlags, rest []string, paths pathList, at, version string, dry, other, asJSON bool) int {
	const cmd = "continuityd snapshot restore"
	switch {
	case at != "" && version != "":
		fmt.Fprintln(e.Stderr, cmd+": give one of --at and --version")
		return ExitUsage
	case len(rest) > 0 || other:
		fmt.Fprintln(e.Stderr, cmd+": --at and --version restore a version of one file from the version journal: give no snapshot id, --all or --lost with them")
		return ExitUsage
	case len(paths) != 1:
		fmt.Fprintln(e.Stderr, cmd+": --at and --version take exactly one --path (the file; `continuityd history PATH` lists its versions)")
		return ExitUsage
	}
	name, err := termsafe.ParseExact(paths[0])
	if err != nil {
		return Fail(e, err)
	}
	if !filepath.IsAbs(name) {
		if abs, err := filepath.Abs(name); err == nil {
			name = abs
		}
	}
	req := ops.VersionRestoreRequest{Path: termsafe.Exact(name), At: at, Version: version, DryRun: dry}
	body, err := ops.HistoryRestore.Encode(&req)
	if err != nil {
		return Fail(e, err)
	}
	c, err := cf.Client(e)
	if err != nil {
		return Fail(e, err)
	}
	defer c.Close()
	a := ops.Args{Body: body}
	if asJSON {
		out, err := ops.HistoryRestore.Do(ctx, c, a)
		return printRaw(e, out, err)
	}
	r, _, err := ops.HistoryRestore.Call(ctx, c, a)
	if err != nil {
		return Fail(e, err)
	}
	v := r.Version
	fmt.Fprintf(e.Stdout, "version %s of %s (%s, %d bytes, by %s)\n", termsafe.Name(v.ID), termsafe.ShowExact(req.Path),
		v.At.Local().Format("2006-01-02 15:04:05.000"), v.Size, termsafe.Name(v.By))
	return printRestore(e, &r.RestoreAnswer)
}
