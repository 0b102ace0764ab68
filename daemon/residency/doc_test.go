package residency

import (
	"slices"
	"testing"
)

func TestAppendBounded(t *testing.T) {
	for _, tc := range []struct {
		xs, v, want []int
	}{
		{nil, []int{1}, []int{1}},
		{[]int{1, 2}, []int{3}, []int{1, 2, 3}},
		{[]int{1, 2, 3}, []int{4}, []int{2, 3, 4}},
		{[]int{1, 2, 3}, []int{4, 5}, []int{3, 4, 5}},
		{[]int{1, 2, 3}, []int{4, 5, 6, 7}, []int{5, 6, 7}},
		{nil, []int{4, 5, 6, 7}, []int{5, 6, 7}},
	} {
		in := slices.Clone(tc.xs)
		got := appendBounded(in, 3, tc.v...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("appendBounded(%v, 3, %v) = %v, want %v", tc.xs, tc.v, got, tc.want)
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("appendBounded(%v, 3, %v) changed its input to %v", tc.xs, tc.v, in)
		}
		if len(tc.xs)+len(tc.v) > 3 && len(in) > 0 && &got[0] == &in[0] {
			t.Errorf("appendBounded(%v, 3, %v) kept the input's array past the bound", tc.xs, tc.v)
		}
	}
}
