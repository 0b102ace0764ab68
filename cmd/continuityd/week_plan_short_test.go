//go:build linux && !week

package main

// weekPlanNow is the compressed week of the normal test run: the same
// generator as the hour-long one (-tags week), a few hundred events.
var weekPlanNow = weekPlan{days: 7, stepsPerDay: 40, samplesPerDay: 4, seed: 7}
