//go:build !windows

package daemoncmd

import (
	"context"
	"io"
)

// runUnderServiceManager runs the daemon under the Windows service control
// manager when that started the process; elsewhere service managers (systemd,
// launchd) run `continuityd run` as a plain foreground process, so it
// reports handled = false and the caller runs the daemon itself.
func runUnderServiceManager(context.Context, func(ctx context.Context, logTo io.Writer) int) (code int, handled bool) {
	return 0, false
}
