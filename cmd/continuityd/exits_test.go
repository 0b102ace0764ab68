package main

// The exit statuses the tests expect of the binary: the interface fixes
// them, so they are spelled here, not taken from the code under test.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2 // bad usage or bad config
	exitUnreachable = 3 // the daemon could not be reached
)
