//go:build !linux

package cli

// inotify is Linux's: elsewhere there is nothing to check.
func (d *doctor) inotify() {}
