//go:build !linux && !darwin && !windows

package daemoncmd

import (
	"fmt"
	"runtime"

	"github.com/continuityd/continuityd/internal/front/cli"
)

// `continuityd service` knows systemd, launchd and the Windows service
// control manager; elsewhere it says so.

const (
	managedName  = "continuityd"
	replaceStops = true
)

var errUnsupported = fmt.Errorf("continuityd service does not support %s: run `continuityd run` from your init system", runtime.GOOS)

func checkPlatform(string) error                    { return errUnsupported }
func checkPrivileges(serviceArgs) error             { return nil }
func renderDefinition(*serviceSpec) ([]byte, error) { return nil, errUnsupported }
func installNotes(*serviceSpec) []string            { return nil }
func prepareInstall(*cli.Env, *serviceSpec) error   { return nil }
func installHint(serviceArgs) string                { return "" }
func notInstalledNote(serviceArgs) string           { return "" }
func logHint(serviceArgs) string                    { return "" }
func queryState(serviceArgs) (serviceState, error)  { return serviceState{}, errUnsupported }

func installedDefinition(serviceArgs) (string, []byte, bool, error) {
	return "", nil, false, errUnsupported
}
