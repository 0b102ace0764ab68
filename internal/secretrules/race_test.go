//go:build race

package secretrules

// raceEnabled: the race detector is on (see TestDifferentialRuleExamples).
const raceEnabled = true
