package main

import (
	"flag"
	"slices"
	"testing"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/netpath"
)

// TestSweepAxis: a sweep records each value's place on a numeric axis from
// the typed setting it resolved to, and none when a value has no number.
func TestSweepAxis(t *testing.T) {
	tests := []struct {
		name   string
		param  string
		values []string
		wantX  []float64
		unit   string
	}{
		{"ints", "buyers", []string{"8", "64"}, []float64{8, 64}, ""},
		{"floats", "rate", []string{"100", "250.5"}, []float64{100, 250.5}, ""},
		{"durations in ms", "ttl", []string{"500ms", "2s"}, []float64{500, 2000}, "ms"},
		{"rtt profiles as MySQL RTT", "rtt", []string{"0.5ms", "same-zone"}, nil, "ms"},
		{"strings are categories", "skew", []string{"uniform", "zipf:1.1"}, nil, ""},
		{"faults are categories", "fault", []string{"redis-pause@1s+1s"}, nil, ""},
		// the service tier by its count of processes (what --param instances sets)
		{"service processes counted", "service", []string{"in-process", "process", "process:4"}, []float64{0, 1, 4}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
			var f runFlags
			f.register(fs)
			ax := newAxis()
			for _, v := range tt.values {
				if tt.param == "fault" {
					f.faults = nil
				}
				if err := fs.Set(tt.param, v); err != nil {
					t.Fatal(err)
				}
				o, err := f.options(map[string]bool{})
				if err != nil {
					t.Fatal(err)
				}
				ax.add(fs.Lookup(tt.param), o)
			}
			sw := ax.record(&results.Sweep{Param: tt.param, Values: tt.values})
			want := tt.wantX
			if tt.param == "rtt" {
				for _, v := range tt.values {
					p, err := netpath.Parse(v)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, float64(p.MySQL.RTT)/1e6)
				}
			}
			if !slices.Equal(sw.X, want) || (want != nil && sw.Unit != tt.unit) {
				t.Errorf("axis = %v %q, want %v %q", sw.X, sw.Unit, want, tt.unit)
			}
		})
	}
}
