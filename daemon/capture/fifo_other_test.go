//go:build !unix

package capture

import "testing"

func mkfifo(t *testing.T, path string) { t.Skip("no FIFOs here") }
