package reports

import (
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// TestSummaryShowsBothAudits: a run graded at the end of load and after
// settle shows both grades side by side and what settle repaired; a run
// graded once (an older results.json) adds no section.
func TestSummaryShowsBothAudits(t *testing.T) {
	eol := audit.Audit{Anomalies: 3, DriftUnits: 2, OrphanReservations: 1}
	after := audit.Audit{}
	run := results.Run{Strategy: "outbox", Scenario: "sustained", Audit: after, AuditEndOfLoad: &eol,
		SettleRepaired: audit.Repaired(eol, after)}
	got := Summary(analysis.Analyze(&results.Results{Runs: []results.Run{run}}))
	for _, want := range []string{
		"## Audit at the end of load and after settle",
		"| outbox | sustained | end of load | 3 | 0 | 0 | 0 | 0 | 0 | 2 | 0 | 0 | 0 | 0 | 1 | 0 |",
		"| outbox | sustained | after settle | 0 |",
		"outbox (sustained): settle repaired anomalies +3, drift_units +2, orphan_reservations +1.",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("summary lacks %q:\n%s", want, got)
		}
	}
	run.AuditEndOfLoad, run.SettleRepaired = nil, nil
	if got := Summary(analysis.Analyze(&results.Results{Runs: []results.Run{run}})); strings.Contains(got, "end of load") {
		t.Fatalf("a run graded once shows two grades:\n%s", got)
	}
}
