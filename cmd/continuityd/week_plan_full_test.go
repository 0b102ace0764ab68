//go:build linux && week

package main

// weekPlanNow is the hour-long compressed week (-tags week; see
// docs/TESTING.md).
var weekPlanNow = weekPlan{days: 7, stepsPerDay: 1500, samplesPerDay: 25, seed: 7, idleAfter: "60s"}
