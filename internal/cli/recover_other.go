//go:build !unix

package cli

import "errors"

// SignalReload is not available where there is no SIGHUP; the operator
// restarts the service.
func SignalReload(int) error {
	return errors.New("no reload signal on this system; restart the service")
}
