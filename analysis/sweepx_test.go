package analysis

import (
	"maps"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestSweepX: the recorded axis wins over the values' text; a file that
// recorded none is read as before; a mismatched axis is no axis.
func TestSweepX(t *testing.T) {
	tests := []struct {
		name string
		sw   *results.Sweep
		want map[string]float64
		unit string
		ok   bool
	}{
		{"recorded", &results.Sweep{Param: "rtt", Values: []string{"same-zone", "cross-region"}, X: []float64{0.5, 60}, Unit: "ms"},
			map[string]float64{"same-zone": 0.5, "cross-region": 60}, "ms", true},
		{"legacy numbers", &results.Sweep{Param: "buyers", Values: []string{"1", "4"}}, map[string]float64{"1": 1, "4": 4}, "", true},
		{"legacy durations", &results.Sweep{Param: "ttl", Values: []string{"500ms", "2s"}}, map[string]float64{"500ms": 500, "2s": 2000}, "ms", true},
		{"categories", &results.Sweep{Param: "skew", Values: []string{"uniform", "hot:1"}}, nil, "", false},
		{"mismatched axis", &results.Sweep{Param: "buyers", Values: []string{"1", "4"}, X: []float64{1}}, nil, "", false},
		{"no sweep", nil, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xs, unit, ok := SweepX(tt.sw)
			if ok != tt.ok || unit != tt.unit || !maps.Equal(xs, tt.want) {
				t.Errorf("SweepX = %v %q %v, want %v %q %v", xs, unit, ok, tt.want, tt.unit, tt.ok)
			}
		})
	}
}
