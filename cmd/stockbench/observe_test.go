package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestObserveFlags: --abort-on, --threshold, --metrics-addr and
// --dashboard are parsed and checked with run's other flags, every
// problem at once.
func TestObserveFlags(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		want     []string // one substring per expected error
		abortOn  int
		checkEnd int
	}{
		{"thresholds", []string{"--abort-on", "anomaly", "--abort-on", "p99>500ms for 30s", "--threshold", "flows<100/s for 10s,errors>5/s"}, nil, 2, 2},
		{"bad thresholds", []string{"--abort-on", "p98>1ms", "--threshold", "flows<x/s"}, []string{"--abort-on", "--threshold"}, 0, 0},
		{"loopback endpoints", []string{"--metrics-addr", "127.0.0.1:9464", "--dashboard", "[::1]:8080"}, nil, 0, 0},
		{"public endpoints", []string{"--metrics-addr", "0.0.0.0:9464", "--dashboard", "10.0.0.1:8080"}, []string{"--metrics-addr", "--dashboard"}, 0, 0},
		{"with generators", []string{"--procs", "2", "--abort-on", "anomaly", "--dashboard", "127.0.0.1:8080"}, []string{"--abort-on: not with several", "--dashboard: not with several"}, 1, 0},
		{"metrics with generators", []string{"--procs", "2", "--metrics-addr", "127.0.0.1:9464"}, nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f runFlags
			f.register(fs)
			f.sh.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			o, err := f.resolve(fs)
			var got problems
			if err != nil && !errors.As(err, &got) {
				got = problems{err}
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d errors, want %d: %v", len(got), len(c.want), errors.Join(got...))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("error %d %q does not name %q", i, got[i], w)
				}
			}
			if len(o.AbortOn) != c.abortOn || len(o.Thresholds) != c.checkEnd {
				t.Fatalf("abort-on %v, threshold %v", o.AbortOn, o.Thresholds)
			}
		})
	}
}
