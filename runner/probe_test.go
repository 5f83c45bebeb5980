package runner_test

import (
	"context"
	"testing"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestProbeDuringLoad: the mid-run probe catches naive breaking the
// stores' invariants while the load runs (and says when), and finds
// nothing on a safe strategy.
func TestProbeDuringLoad(t *testing.T) {
	cases := []struct {
		strategy string
		trips    bool
	}{
		{"naive", true},
		{"outbox", false},
	}
	for _, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			e, err := registry.Lookup(c.strategy)
			if err != nil {
				t.Fatal(err)
			}
			o := sustainedOptions()
			// One SKU of 5 units, many buyers: it sells out and is
			// restocked over and over, and naive's unlocked check-then-act
			// and read-modify-write restock collide with the buyers.
			o.SKUs, o.Buyers, o.Stock = 1, 32, 5
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
			if err != nil {
				t.Fatal(err)
			}
			p := run.Audit.Probe
			if p == nil || p.Snapshots == 0 {
				t.Fatalf("no probe snapshots during load: %+v", p)
			}
			if got := run.Audit.ProbeViolations > 0; got != c.trips {
				t.Fatalf("probe violations %d (report %+v), want tripped=%v", run.Audit.ProbeViolations, p, c.trips)
			}
			if c.trips {
				if p.First == nil || p.Worst == nil || p.Last == nil || p.Worst.Units <= 0 || p.First.AtSec > p.Last.AtSec || p.First.What == "" {
					t.Fatalf("violations without first/worst/last instants: %+v", p)
				}
				if run.AuditEndOfLoad.ProbeViolations != run.Audit.ProbeViolations {
					t.Fatalf("end-of-load audit %d mid-run violations, settled %d", run.AuditEndOfLoad.ProbeViolations, run.Audit.ProbeViolations)
				}
				t.Logf("naive: %d of %d snapshots broke an invariant; first at %.2f s (%s), worst %d units",
					p.Violations, p.Snapshots, p.First.AtSec, p.First.What, p.Worst.Units)
			}
		})
	}
}
