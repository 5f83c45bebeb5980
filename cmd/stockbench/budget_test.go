package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunBudgetFlags: run refuses a CPU budget it cannot honour or read,
// naming the flag, with exit 2 and nothing started.
func TestRunBudgetFlags(t *testing.T) {
	base := []string{"run", "--backend", "external", "--scenario", "sustained", "--duration", "5s", "--out", t.TempDir()}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown tier", []string{"--cpus", "web=1"}, `tier "web"`},
		{"no cores", []string{"--cpus", "mysql=0"}, "not a number of cores > 0"},
		{"not a core id", []string{"--cpuset", "mysql=a"}, "not a core id"},
		// the generators are other processes: their CPU is outside the budget
		{"several generators", []string{"--cpus", "harness=1", "--procs", "2"}, "--cpus/--cpuset: not with several generators"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(context.Background(), append(append([]string(nil), base...), tc.args...), &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q: want %q", errb.String(), tc.want)
			}
		})
	}
}
