package runner

import (
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestLocalSwitchExercised: a local-fail fault counts as applied only when a
// strategy read the switch while it was on; other faults are left as they
// are.
func TestLocalSwitchExercised(t *testing.T) {
	local := results.FaultEvent{Spec: "local-fail@2s+2s", Kind: "local-fail", Target: "local", Applied: true}
	pause := results.FaultEvent{Spec: "redis-pause@1s+1s", Kind: "pause", Target: "redis", Applied: true}
	late := results.FaultEvent{Spec: "local-fail@9s+1s", Kind: "local-fail", Target: "local", Error: "not applied: context canceled"}
	cases := []struct {
		name  string
		reads []bool // the switch's state at each read by a strategy
		in    []results.FaultEvent
		want  []bool // Applied after
	}{
		{"never read (no local table)", nil, []results.FaultEvent{local, pause}, []bool{false, true}},
		{"read only while off", []bool{false, false}, []results.FaultEvent{local}, []bool{false}},
		{"read while on", []bool{false, true, false}, []results.FaultEvent{local, pause}, []bool{true, true}},
		{"never took effect stays so", []bool{true}, []results.FaultEvent{late}, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l localSwitch
			for _, on := range c.reads {
				l.Store(on)
				if got := l.Load(); got != on {
					t.Fatalf("Load = %v after Store(%v)", got, on)
				}
			}
			got := l.exercised(append([]results.FaultEvent(nil), c.in...))
			for i, f := range got {
				if f.Applied != c.want[i] {
					t.Errorf("%s: applied %v, want %v", f.Spec, f.Applied, c.want[i])
				}
				if !f.Applied && !strings.HasPrefix(f.Error, "not applied") {
					t.Errorf("%s: not applied without a reason: %q", f.Spec, f.Error)
				}
			}
			if got[len(got)-1] == late && got[len(got)-1].Error != late.Error {
				t.Errorf("the original reason was replaced: %q", got[len(got)-1].Error)
			}
		})
	}
}
