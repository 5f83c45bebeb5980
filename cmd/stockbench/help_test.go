package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestHelp: `stockbench COMMAND -h` (and --help) exits 0 and prints on
// stdout what the command takes, what it does and an example.
func TestHelp(t *testing.T) {
	cases := []struct {
		cmd  string
		args string // what the usage line must name
	}{
		{"run", "[flags]"},                // flags only
		{"sweep", "--param NAME=V1,V2,…"}, // the grid
		{"calibrate", "[flags]"},          // flags only
		{"report", "DIR"},                 // the results directory
		{"compare", "OLD NEW"},            // two files
		{"merge", "OUT DIR…"},             // generators' results
		{"prepare", "--backend external"}, // the stores the generators share
		{"curve", "--slo p99=50ms"},       // rates and the SLO
		{"faults", "--only COLUMNS"},      // the matrix's columns
		{"audit", "--mysql-dsn DSN"},      // the stores to grade
		{"down", "stockbench down"},       // nothing
		{"version", "stockbench version"}, // nothing
	}
	for _, c := range cases {
		for _, args := range [][]string{{c.cmd, "-h"}, {c.cmd, "--help"}, {"help", c.cmd}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errb bytes.Buffer
				code := Main(context.Background(), args, &out, &errb)
				if code != exitOK {
					t.Fatalf("exit %d, stderr %q", code, errb.String())
				}
				s := out.String()
				for _, want := range []string{"usage: stockbench " + c.cmd, c.args, "example:\n  stockbench " + c.cmd} {
					if !strings.Contains(s, want) {
						t.Errorf("help lacks %q:\n%s", want, s)
					}
				}
				if errb.Len() != 0 {
					t.Errorf("help wrote to stderr: %q", errb.String())
				}
			})
		}
	}
}

// TestHelpUnknown: `help` of a command that does not exist is the
// unknown-command error, exit 2.
func TestHelpUnknown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"help", "runn"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown command "runn"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestBadWeightsAndArgs: weights that do not mean what they say, and stray
// arguments to commands that take none, are errors (exit 2, one line).
func TestBadWeightsAndArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		// A weight above 1 used to be renormalised silently.
		{"weight above 1", []string{"run", "--weights", "consistency=2"}, "--weights"},
		// Weights that sum to more than 1.
		{"sum above 1", []string{"run", "--weights", "consistency=0.5,throughput=0.5,latency=0.5"}, "sum to 1.5"},
		// Weights that sum to less than 1.
		{"sum below 1", []string{"run", "--weights", "consistency=0.5"}, "want 1"},
		// version takes no argument.
		{"version with argument", []string{"version", "extra"}, "unexpected argument"},
		// report takes one directory.
		{"report with two dirs", []string{"report", "a", "b"}, "usage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(context.Background(), c.args, &out, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			msg := strings.TrimSpace(errb.String())
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Fatalf("stderr %q, want one line saying %q", msg, c.want)
			}
		})
	}
}

// TestMeasuredOf: after Ctrl-C the message counts the finished runs
// against the planned ones and says how far the cut run got.
func TestMeasuredOf(t *testing.T) {
	two := []registry.Entry{{Name: "rowlock"}, {Name: "cas"}}
	plans := []runner.Plan{{Options: runner.Options{Strategies: two, Scenarios: []string{"sustained"}, Repeat: 2, Params: scenarios.Params{Duration: 20 * time.Second}}}}
	cases := []struct {
		name string
		runs []results.Run
		want string
	}{
		// Cut before any strategy ran.
		{"nothing ran", nil, "0 of 4 planned run(s) finished"},
		// Cut between runs: every run in the file finished.
		{"between runs", []results.Run{{Strategy: "rowlock", Scenario: "sustained", DurationSec: 20}}, "1 of 4 planned run(s) finished"},
		// Cut inside a run: it is not counted as finished, and its share is said.
		{"inside a run", []results.Run{{Strategy: "rowlock", Scenario: "sustained", DurationSec: 20},
			{Strategy: "rowlock", Scenario: "sustained", DurationSec: 4.3, Interrupted: true}},
			"1 of 4 planned run(s) finished; rowlock on sustained cut after 4.3 s of its measured phase (of 20s planned), settled and audited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := measuredOf(&results.Results{Runs: c.runs, Interrupted: true}, plans); got != c.want {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}
