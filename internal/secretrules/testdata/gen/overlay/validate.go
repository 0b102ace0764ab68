// Package utils is NOT gitleaks' code: it is a stand-in for gitleaks'
// cmd/generate/config/utils/validate.go that the generator in ../main.go
// swaps in with `go run -overlay` when it runs gitleaks' own rule
// generator. gitleaks' rule functions hand their true and false positives
// to Validate (and ValidateWithPaths); this version writes them out, one
// JSON object a line, to the file named by $SECRETRULES_EXAMPLES, and
// returns the rule with its keywords normalised as gitleaks' Validate
// does, so the generator still writes the very gitleaks.toml it ships. Everything else in package utils stays gitleaks' own.
package utils

import (
	"encoding/json"
	"os"
	"sort"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

type example struct {
	Rule string `json:"rule"`
	Kind string `json:"kind"` // "tp" or "fp"
	Path string `json:"path,omitempty"`
	Text string `json:"text"`
}

func record(examples []example) {
	f, err := os.OpenFile(os.Getenv("SECRETRULES_EXAMPLES"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, e := range examples {
		if err := enc.Encode(e); err != nil {
			panic(err)
		}
	}
}

func fromList(rule, kind string, texts []string) []example {
	var out []example
	for _, t := range texts {
		out = append(out, example{Rule: rule, Kind: kind, Text: t})
	}
	return out
}

func fromPaths(rule, kind string, texts map[string]string) []example {
	var out []example
	for p, t := range texts {
		out = append(out, example{Rule: rule, Kind: kind, Path: p, Text: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// normalize lower-cases and de-duplicates the rule's keywords, as gitleaks'
// own Validate does on its way (the generated gitleaks.toml depends on it).
func normalize(rule *config.Rule) {
	seen := map[string]bool{}
	var kws []string
	for _, k := range rule.Keywords {
		k = strings.ToLower(k)
		if !seen[k] {
			seen[k] = true
			kws = append(kws, k)
		}
	}
	rule.Keywords = kws
}

// Validate records the rule's examples instead of checking them.
func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	normalize(&rule)
	record(append(fromList(rule.RuleID, "tp", truePositives), fromList(rule.RuleID, "fp", falsePositives)...))
	return &rule
}

// ValidateWithPaths records the rule's examples and their paths.
func ValidateWithPaths(rule config.Rule, truePositives map[string]string, falsePositives map[string]string) *config.Rule {
	normalize(&rule)
	record(append(fromPaths(rule.RuleID, "tp", truePositives), fromPaths(rule.RuleID, "fp", falsePositives)...))
	return &rule
}
