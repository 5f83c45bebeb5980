package analysis

import (
	"testing"
)

func TestParseWeights(t *testing.T) {
	cases := []struct {
		in      string
		want    Weights
		wantErr bool
	}{
		// Two dimensions, the rest weigh 0.
		{"consistency=0.5,throughput=0.5", Weights{Consistency: 0.5, Throughput: 0.5}, false},
		// One dimension alone.
		{"latency=1", Weights{Latency: 1}, false},
		// All four, spaces allowed.
		{"consistency=0.4, throughput=0.25, latency=0.2, complexity=0.15", DefaultWeights, false},
		// A weight above 1 is refused, not renormalised.
		{"consistency=2", Weights{}, true},
		// Weights that do not sum to 1 are refused, not renormalised.
		{"consistency=1,throughput=1", Weights{}, true},
		{"consistency=0.3,throughput=0.3", Weights{}, true},
		// An unknown dimension.
		{"speed=1", Weights{}, true},
		// All zero.
		{"consistency=0", Weights{}, true},
		// A negative weight.
		{"consistency=-1,latency=2", Weights{}, true},
		// A dimension named twice.
		{"latency=0.5,latency=0.5", Weights{}, true},
	}
	for _, c := range cases {
		got, err := ParseWeights(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && got != c.want {
			t.Errorf("ParseWeights(%q) = %+v, %v", c.in, got, err)
		}
	}
	// String round-trips, at full precision.
	w := Weights{Consistency: 1.0 / 3, Throughput: 1.0 / 3, Latency: 1.0 / 3}
	if got, err := ParseWeights(w.String()); err != nil || got != w {
		t.Errorf("ParseWeights(%q) = %+v, %v", w.String(), got, err)
	}
}
