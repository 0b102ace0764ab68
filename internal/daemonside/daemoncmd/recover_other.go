//go:build !unix

package daemoncmd

import "errors"

// signalReload is not available where there is no SIGHUP; the operator
// restarts the service.
func signalReload(int) error {
	return errors.New("no reload signal on this system; restart the service")
}
