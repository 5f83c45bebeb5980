package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestOptionsEveryProblem: run's flags are checked all at once, each
// problem its own error naming its flag, before any server starts.
func TestOptionsEveryProblem(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string // one substring per expected error, in any order
	}{
		// The example: three problems, three errors.
		{"three at once", []string{"--buyers", "-1", "--rtt", "x", "--fault", "bad"}, []string{"--buyers -1", "--rtt", "--fault"}},
		// Typed checks and parse errors together.
		{"typed and parsed", []string{"--scenario", "sustained", "--stock", "0", "--mix", "confirm=2", "--queue", "-3", "--ttl", "0s"}, []string{"--stock 0", "--mix", "--queue -3", "--ttl 0s"}},
		// A clean set of flags: none.
		{"clean", []string{"--strategies", "rowlock", "--buyers", "10"}, nil},
		// Isolation levels by name only.
		{"isolation", []string{"--isolation", "serializable"}, []string{"--isolation"}},
		{"isolation rc", []string{"--isolation", "RC"}, nil},
		// A scenario file key checked like its flag.
		{"unknown scenario", []string{"--scenario", "flash,nope"}, []string{`--scenario "nope"`}},
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
			_, err := f.resolve(fs)
			var got problems
			if err != nil && !errors.As(err, &got) {
				got = problems{err}
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d errors, want %d: %v", len(got), len(c.want), errors.Join(got...))
			}
			for _, w := range c.want {
				found := false
				for _, e := range got {
					found = found || strings.Contains(e.Error(), w)
				}
				if !found {
					t.Errorf("no error names %q: %v", w, got)
				}
			}
		})
	}
}
