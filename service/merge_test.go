package service

import "testing"

// TestMergeCounter: counts add up over instances; latencies, maxima and
// times take the largest.
func TestMergeCounter(t *testing.T) {
	cases := []struct {
		name string
		a, v float64
		want float64
	}{
		{"outbox_relayed", 10, 5, 15},
		{"redis_rebuilds", 0, 1, 1},
		{"outbox_lag_p99_ms", 900, 300, 900},
		{"ensure_lag_p50_ms", 3, 7, 7},
		{"outbox_local_backlog_max", 40, 70, 70},
		{"relay_lag_seconds", 2, 1, 2},
	}
	for _, c := range cases {
		if got := mergeCounter(c.name, c.a, c.v); got != c.want {
			t.Errorf("%s: merge(%v, %v) = %v, want %v", c.name, c.a, c.v, got, c.want)
		}
	}
}
