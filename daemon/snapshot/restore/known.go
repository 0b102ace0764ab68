package restore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// checkKnown refuses a restore limited to paths when one of them names
// nothing: no change below it, no file the fleet withheld (refused), and
// neither the snapshot's tree (target) nor the tree as it is (now) holds
// it. A restore of such a path would
// change nothing and say "nothing to change", and the person who mistyped
// it, or whose name did not come through, would believe the file was
// restored. clean are the paths as checkPaths returned them, in the order
// the request gave them (paths[i] in the refusal).
func (rs *Restorer) checkKnown(ctx context.Context, clean []string, changes []repo.Change, refused []Refusal, now, target string, id string) error {
	var quiet []int // the paths no change lies below
	for i, p := range clean {
		under := func(q string) bool { return q == p || strings.HasPrefix(q, p+"/") }
		below := slices.ContainsFunc(changes, func(c repo.Change) bool { return under(c.Path) }) ||
			slices.ContainsFunc(refused, func(r Refusal) bool { return under(r.Path) })
		if !below {
			quiet = append(quiet, i)
		}
	}
	if len(quiet) == 0 {
		return nil
	}
	want := make([]string, len(quiet))
	for j, i := range quiet {
		want[j] = clean[i]
	}
	held := map[string]bool{}
	for _, tree := range []string{target, now} {
		// Without -r a path below a directory is still found (ls-tree
		// descends the directories a path names); a directory is listed
		// as itself.
		out, err := rs.git.Run(ctx, repo.Call{Args: append([]string{"ls-tree", "-z", "--name-only", "--full-tree", tree, "--"}, want...)})
		if err != nil {
			return fmt.Errorf("snapshot store: %w", err)
		}
		for name := range bytes.SplitSeq(out, []byte{0}) {
			held[string(name)] = true
		}
	}
	for _, i := range quiet {
		if !held[clean[i]] {
			return capsule.Refuse(capsule.CodeNotFound, fmt.Sprintf("paths[%d]", i),
				"%s is in neither snapshot %s nor the workdir's files that snapshots hold: nothing of that name to restore", termsafe.Name(clean[i]), repo.Short(id))
		}
	}
	return nil
}
