package secretrules

import (
	"strings"
	"testing"
)

// benchTexts are the inputs of capsule/guard's BenchmarkCheckSecret: prose, 4 KB
// with a keyword ("key") on every line, 4 KB with none.
func benchTexts() []struct{ name, s string } {
	prose := "Swapped the callsites in checkout to the new billing client and ran the unit tests; " +
		"two failures remain in the refund path because the old client retried on 409 and the new one " +
		"does not. Next: add an explicit retry with backoff, then delete the shim. See repo@a1b2c3d."
	for len(prose) < 300 {
		prose += " More notes."
	}
	fill := func(line string) string {
		var b strings.Builder
		for b.Len() < 4096 {
			b.WriteString(line)
		}
		return b.String()[:4096]
	}
	return []struct{ name, s string }{
		{"prose300", prose[:300]},
		{"text4KB_keywords", fill("commit a1b2c3d: fix the parser for empty receipts; tests green; the upstream key rotation is tracked in OPS-1234.\n")},
		{"text4KB_plain", fill("commit a1b2c3d: fix the parser for empty receipts; tests green; the refund path still fails on 409.\n")},
	}
}

// BenchmarkFind compares Find with gitleaks' DetectString on the same
// texts: ours with each keyword prefilter, and gitleaks' detector.
func BenchmarkFind(b *testing.B) {
	sub, err := parse(rulesTOML, false)
	if err != nil {
		b.Fatal(err)
	}
	ac, err := parse(rulesTOML, true)
	if err != nil {
		b.Fatal(err)
	}
	d := reference(b)
	for _, bc := range benchTexts() {
		for _, impl := range []struct {
			name string
			find func(string) int
		}{
			{"substring", func(s string) int { return len(sub.Find(s)) }},
			{"ahocorasick", func(s string) int { return len(ac.Find(s)) }},
			{"gitleaks", func(s string) int { return len(d.DetectString(s)) }},
		} {
			b.Run(bc.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(bc.s)))
				b.ReportAllocs()
				for b.Loop() {
					if impl.find(bc.s) != 0 {
						b.Fatal("a finding in the benchmark text")
					}
				}
			})
		}
	}
}

// BenchmarkPrefilter isolates the keyword prefilter: which of the rules'
// keywords occur in the text.
func BenchmarkPrefilter(b *testing.B) {
	sub, _ := parse(rulesTOML, false)
	ac, _ := parse(rulesTOML, true)
	for _, bc := range benchTexts() {
		for _, impl := range []struct {
			name string
			s    *Set
		}{{"substring", sub}, {"ahocorasick", ac}} {
			b.Run(bc.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(bc.s)))
				for b.Loop() {
					impl.s.prefilter.Present(strings.ToLower(bc.s), nil)
				}
			})
		}
	}
}

// BenchmarkLoad is the cost of building the rule set (once per process
// with Default), against gitleaks' detector built from the same file.
func BenchmarkLoad(b *testing.B) {
	b.Run("substring", func(b *testing.B) {
		for b.Loop() {
			if _, err := parse(rulesTOML, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ahocorasick", func(b *testing.B) {
		for b.Loop() {
			if _, err := parse(rulesTOML, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gitleaks", func(b *testing.B) {
		for b.Loop() {
			reference(b)
		}
	})
}
