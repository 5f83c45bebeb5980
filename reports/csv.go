package reports

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strconv"

	"github.com/stockbench/stockbench/results"
)

// SummaryCSV renders one line per run: the headline figures.
func SummaryCSV(r *results.Results) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"strategy", "scenario", "param", "value", "repeat", "duration_sec", "tps", "attempts_per_sec",
		"flow_p50_ms", "flow_p90_ms", "flow_p99_ms", "flow_p999_ms", "flow_max_ms", "confirmed_units", "oversold_units",
		"oversell_rate", "leaked_units", "lost_acks", "cancel_ack_violations", "invariant_violations", "drift_units",
		"server_cpu_pct", "core_lines", "ceiling_pct", "flows"})
	for _, run := range r.Runs {
		f := run.LatencyMS["flow"]
		a := run.Audit
		cpu := ""
		if v, ok := run.Counters["server_cpu_pct"]; ok {
			cpu = num(v)
		}
		w.Write([]string{run.Strategy, run.Scenario, run.Param, run.Value, strconv.Itoa(run.Repeat), num(run.DurationSec),
			num(run.TPS), num(run.AttemptsPerSec), num(f.P50), num(f.P90), num(f.P99), num(f.P999), num(f.Max),
			itoa(a.ConfirmedUnits), itoa(a.OversoldUnits), num(a.OversellRate), itoa(a.LeakedUnits), strconv.Itoa(a.LostAcks),
			strconv.Itoa(a.CancelAckViolations), strconv.Itoa(a.InvariantViolations), itoa(a.DriftUnits), cpu,
			strconv.Itoa(run.CoreLines), num(run.CeilingPct), itoa(run.Flows)})
	}
	w.Flush()
	return b.Bytes()
}

// SeriesCSV renders the per-second time series of every run.
func SeriesCSV(r *results.Results) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"strategy", "scenario", "value", "repeat", "second", "flows", "attempts", "errors", "flow_p99_ms"})
	for _, run := range r.Runs {
		for _, p := range run.Series {
			w.Write([]string{run.Strategy, run.Scenario, run.Value, strconv.Itoa(run.Repeat), strconv.Itoa(p.Second),
				itoa(p.Flows), itoa(p.Attempts), itoa(p.Errors), num(p.FlowP99MS)})
		}
	}
	w.Flush()
	return b.Bytes()
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
func itoa(x int64) string  { return strconv.FormatInt(x, 10) }

// WriteCSV writes summary.csv and series.csv into dir.
func WriteCSV(dir string, r *results.Results) error {
	if err := results.WriteFileAtomic(filepath.Join(dir, "summary.csv"), SummaryCSV(r)); err != nil {
		return err
	}
	return results.WriteFileAtomic(filepath.Join(dir, "series.csv"), SeriesCSV(r))
}
