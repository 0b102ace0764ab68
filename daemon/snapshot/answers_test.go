package snapshot

import (
	"testing"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
	"github.com/continuityd/continuityd/internal/ops"
)

// The store's parts name a file's status in repo's words and the API in
// internal/ops' words: the façade passes them through unconverted, so they
// must be the same words.
func TestStatusNamesAreTheAPIs(t *testing.T) {
	for _, c := range []struct{ repo, api string }{
		{repo.StatusAdded, ops.StatusAdded},
		{repo.StatusModified, ops.StatusModified},
		{repo.StatusDeleted, ops.StatusDeleted},
	} {
		if c.repo != c.api {
			t.Errorf("repo names a status %q, the API %q", c.repo, c.api)
		}
	}
}
