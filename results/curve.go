package results

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
	// every rate held), and Why says how (analysis.CurveStep decides it).
	StoppedAt float64 `json:"stopped_at,omitempty"`
	Why       string  `json:"why,omitempty"`
}
