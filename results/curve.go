package results

import (
	"fmt"

	"github.com/stockbench/stockbench/inventory"
)

// Curve is the outcome of `stockbench curve`: each strategy driven open loop
// at increasing arrival rates until its flow P99 passed the SLO or errors
// appeared. The runs themselves are in Results.Runs with param "rate".
type Curve struct {
	// SLOP99MS is the latency bound: flow P99 in milliseconds.
	SLOP99MS float64 `json:"slo_p99_ms"`
	// Strategies are in run order.
	Strategies []CurvePoint `json:"strategies"`
}

// CurvePoint is one strategy's result on the curve.
type CurvePoint struct {
	Strategy string `json:"strategy"`
	// MaxRate is the highest offered rate (arrivals/s) whose run held the
	// SLO with no errors; 0 when even the lowest did not.
	MaxRate float64 `json:"max_rate"`
	// StoppedAt is the first rate that broke the SLO or had errors (0 when
	// every rate held), and Why says how.
	StoppedAt float64 `json:"stopped_at,omitempty"`
	Why       string  `json:"why,omitempty"`
}

// CurveVerdict says whether a curve run held the SLO: "" when it did, else
// why not (P99 past the bound, errors, dropped arrivals, no flows).
func CurveVerdict(run Run, sloMS float64) string {
	var errs int64
	for _, m := range run.Counts {
		for cls, n := range m {
			if inventory.Outcome(cls).Failed() {
				errs += n
			}
		}
	}
	p99 := run.LatencyMS["flow"].P99
	switch {
	case run.Flows == 0:
		return "no completed flows"
	case errs > 0:
		return fmt.Sprintf("%d errors", errs)
	case run.Harness.OpenDropped > 0:
		return fmt.Sprintf("%d arrivals dropped", run.Harness.OpenDropped)
	case p99 > sloMS:
		return fmt.Sprintf("P99 %.1f ms > %.0f ms", p99, sloMS)
	}
	return ""
}
