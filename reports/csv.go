package reports

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strconv"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// summaryCSV renders one line per run: the headline figures, the
// headline anomaly classes (audit.HeadlineClasses, each rate beside
// its class), then the other classes and the UNSAFE total at the end,
// so columns only ever get added at the end.
func summaryCSV(r *results.Results) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := []string{"strategy", "scenario", "param", "value", "repeat", "duration_sec", "tps", "attempts_per_sec",
		"flow_p50_ms", "flow_p90_ms", "flow_p99_ms", "flow_p999_ms", "flow_max_ms", "confirmed_units"}
	for _, c := range audit.HeadlineClasses() {
		head = append(head, c.Key)
		if c.RateKey != "" {
			head = append(head, c.RateKey)
		}
	}
	head = append(head, "server_cpu_pct", "core_lines", "ceiling_pct", "flows")
	for _, c := range audit.OtherClasses() {
		head = append(head, c.Key)
	}
	w.Write(append(head, "anomalies"))
	for _, run := range r.Runs {
		f := run.LatencyMS["flow"]
		a := run.Audit
		cpu := ""
		if v := run.Harness.ServerCPUPct; v != nil {
			cpu = num(*v)
		}
		line := []string{run.Strategy, run.Scenario, run.Param, run.Value, strconv.Itoa(run.Repeat), num(run.DurationSec),
			num(run.TPS), num(run.AttemptsPerSec), num(f.P50), num(f.P90), num(f.P99), num(f.P999), num(f.Max),
			itoa(a.ConfirmedUnits)}
		for _, c := range audit.HeadlineClasses() {
			line = append(line, itoa(c.Of(a)))
			if c.RateKey != "" {
				line = append(line, num(a.OversellRate))
			}
		}
		line = append(line, cpu, strconv.Itoa(run.CoreLines), num(run.CeilingPct), itoa(run.Flows))
		for _, c := range audit.OtherClasses() {
			line = append(line, itoa(c.Of(a)))
		}
		w.Write(append(line, itoa(a.Count())))
	}
	w.Flush()
	return b.Bytes()
}

// seriesCSV renders the per-second time series of every run.
func seriesCSV(r *results.Results) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"strategy", "scenario", "value", "repeat", "second", "flows", "attempts", "errors", "flow_p99_ms",
		// The stores' own counters of the second (empty when not sampled).
		"mysql_row_lock_time_ms", "mysql_row_lock_waits", "mysql_commits", "mysql_rollbacks", "mysql_threads_running",
		"mysql_buffer_pool_reads", "redis_ops_per_sec", "redis_cpu_pct", "redis_clients", "redis_used_bytes"})
	for _, run := range r.Runs {
		for _, p := range run.Series {
			row := []string{run.Strategy, run.Scenario, run.Value, strconv.Itoa(run.Repeat), strconv.Itoa(p.Second),
				itoa(p.Flows), itoa(p.Attempts), itoa(p.Errors), num(p.FlowP99MS)}
			if st := p.Stores; st != nil {
				row = append(row, num(st.MySQLRowLockTimeMS), itoa(st.MySQLRowLockWaits), itoa(st.MySQLCommits), itoa(st.MySQLRollbacks),
					itoa(st.MySQLThreadsRunning), itoa(st.MySQLBufferPoolReads), num(st.RedisOpsPerSec), num(st.RedisCPUPct),
					itoa(st.RedisClients), itoa(st.RedisUsedBytes))
			} else {
				row = append(row, make([]string, 10)...)
			}
			w.Write(row)
		}
	}
	w.Flush()
	return b.Bytes()
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
func itoa(x int64) string  { return strconv.FormatInt(x, 10) }

// writeCSV writes summary.csv and series.csv into dir.
func writeCSV(dir string, r *results.Results) error {
	if err := results.WriteFileAtomic(filepath.Join(dir, "summary.csv"), summaryCSV(r)); err != nil {
		return err
	}
	return results.WriteFileAtomic(filepath.Join(dir, "series.csv"), seriesCSV(r))
}
