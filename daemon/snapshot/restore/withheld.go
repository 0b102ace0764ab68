package restore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
)

// leaveWithheld takes out of a restore's changes the files the snapshot's
// machine withheld from the fleet, and names each (under paths, when
// given) as left alone: this machine's copy is neither overwritten nor
// removed. A snapshot taken here withholds nothing.
func (rs *Restorer) leaveWithheld(ctx context.Context, target repo.Snapshot, paths []string, changes []repo.Change) ([]repo.Change, []Refusal, error) {
	if target.Commit == "" || target.Commit == target.ID {
		return changes, nil, nil
	}
	raw, err := rs.git.Run(ctx, repo.Call{Args: []string{"cat-file", "commit", target.Commit}})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot store: %w", err)
	}
	_, msg, _ := bytes.Cut(raw, []byte("\n\n"))
	withheld := map[string]string{}
	var left []Refusal
	for _, w := range repo.ParseWithheld(string(msg)) {
		if !underAny(w.Path, paths) {
			continue
		}
		withheld[w.Path] = w.Reason
		left = append(left, Refusal{Path: w.Path,
			Reason: "withheld from the fleet by the machine that took the snapshot (" + w.Reason + "); left as it is here"})
	}
	if len(withheld) == 0 {
		return changes, nil, nil
	}
	changes = slices.DeleteFunc(slices.Clone(changes), func(c repo.Change) bool { _, ok := withheld[c.Path]; return ok })
	return changes, left, nil
}

// underAny says whether rel is one of paths or lies below one; no paths
// means the whole tree.
func underAny(rel string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, p := range paths {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}
