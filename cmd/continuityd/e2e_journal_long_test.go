//go:build journal_long

package main

// The long run of TestJournalRandom: go test -tags journal_long -run
// TestJournalRandom ./cmd/continuityd/ (docs/TESTING.md).
func init() { journalRandomSteps = 200 }
