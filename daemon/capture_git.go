package daemon

import "context"

// gitCheck is filled in with the git receipts source.
func (c *capture) gitCheck(ctx context.Context, dir string) {}
