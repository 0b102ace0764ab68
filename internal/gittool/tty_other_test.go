//go:build !linux

package gittool_test

import (
	"os"
	"testing"
)

func openTTY(t *testing.T) *os.File {
	t.Skip("the pager cases need a Linux pseudo-terminal")
	return nil
}
