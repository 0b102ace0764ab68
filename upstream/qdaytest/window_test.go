package qdaytest

import (
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	cases := []struct {
		name   string
		times  []time.Time
		window time.Duration
		want   int
	}{
		{"none", nil, time.Second, 0},
		{"one", at(0), time.Second, 1},
		{"all in", at(0, 100, 200, 999), time.Second, 4},
		{"half-open edge", at(0, 1000), time.Second, 1},
		{"sliding", at(0, 100, 900, 1050, 1100, 1150, 2500), time.Second, 4}, // 900..1150
		{"burst later", at(0, 3000, 3001, 3002, 3003), 10 * time.Millisecond, 4},
		{"same instant", at(5, 5, 5), time.Nanosecond, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := maxInWindow(tc.times, tc.window); got != tc.want {
				t.Fatalf("maxInWindow = %d, want %d", got, tc.want)
			}
		})
	}
}
