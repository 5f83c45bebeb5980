package main

import (
	"flag"
	"reflect"
	"testing"

	"github.com/stockbench/stockbench/scenarios"
)

// TestKnobFlags: every knob a scenario alone reads (Scenario.Reads) is a
// field of scenarios.Params and has a flag of `stockbench run` in
// knobFlags, so a misplaced flag is always caught and named.
func TestKnobFlags(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	params := reflect.TypeOf(scenarios.Params{})
	seen := 0
	for _, sc := range scenarios.All {
		for _, k := range sc.Reads() {
			seen++
			if _, ok := params.FieldByName(k); !ok {
				t.Errorf("%s reads %q: no such field of scenarios.Params", sc.Name(), k)
			}
			name, ok := knobFlags[k]
			if !ok || fs.Lookup(name) == nil {
				t.Errorf("%s reads %q: knobFlags gives %q, not a flag of run", sc.Name(), k, name)
			}
			if flagKnob(name) != k {
				t.Errorf("flagKnob(%q) = %q, want %q", name, flagKnob(name), k)
			}
		}
	}
	if seen == 0 || len(knobFlags) != seen {
		t.Errorf("scenarios read %d knobs, knobFlags maps %d", seen, len(knobFlags))
	}
}
