package reports

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stockbench/stockbench/inventory"
)

// Table writes the classic comparison table, aligned for a terminal.
func Table(w io.Writer, r *Results) {
	rows := [][]string{{"strategy", "scenario", "TPS", "P99 ms", "confirmed", "oversold", "oversell %", "leaked", "lost acks", "violations", "drift"}}
	for _, run := range r.Runs {
		a := run.Audit
		rows = append(rows, []string{run.Strategy, label(run), f1(run.TPS), f2(run.LatencyMS["flow"].P99),
			fmt.Sprint(a.ConfirmedUnits), fmt.Sprint(a.OversoldUnits), pct(a.OversellRate), fmt.Sprint(a.LeakedUnits),
			fmt.Sprint(a.LostAcks + a.CancelAckViolations), fmt.Sprint(a.InvariantViolations), fmt.Sprint(a.DriftUnits)})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range rows {
		for i, c := range row {
			if i == 0 || i == 1 {
				fmt.Fprintf(w, "%-*s  ", widths[i], c)
			} else {
				fmt.Fprintf(w, "%*s  ", widths[i], c)
			}
		}
		fmt.Fprintln(w)
	}
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }

func spread(s Spread, f func(float64) string) string {
	return f(s.Min) + " / " + f(s.Median) + " / " + f(s.Max)
}
func f2(x float64) string  { return fmt.Sprintf("%.2f", x) }
func pct(x float64) string { return fmt.Sprintf("%.3f", 100*x) }

// Summary renders summary.md.
func Summary(r *Results) string {
	var b strings.Builder
	b.WriteString("# stockbench results\n\n")
	if r.Interrupted {
		b.WriteString("**Interrupted:** the run was stopped early; figures cover what was measured.\n\n")
	}
	fmt.Fprintf(&b, "Backend %s · MySQL %s · Redis %s · %d cores (%s) · %s\n\n",
		r.Env.Backend, r.Env.MySQLVersion, r.Env.RedisVersion, r.Env.Cores, r.Env.CPUModel, r.Env.StartedAt)
	b.WriteString("## Comparison\n\n")
	b.WriteString("| strategy | scenario | TPS | P99 (ms) | oversell % | server CPU % | core lines |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		cpu := "n/a"
		if v, ok := run.Counters["server_cpu_pct"]; ok {
			cpu = f1(v)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d |\n", run.Strategy, label(run), f1(run.TPS),
			f2(run.LatencyMS["flow"].P99), pct(run.Audit.OversellRate), cpu, run.CoreLines)
	}
	b.WriteString("\nTPS counts completed reserve+confirm flows per second of the measured phase; P99 is of the whole flow, pay delay excluded; oversell % is oversold units / confirmed units, counted by the auditor from the orders and inventory tables.\n")

	if recs := Recommend(r, WeightsOf(r)); len(recs) > 0 {
		fmt.Fprintf(&b, "\n## Recommendation for this workload\n\nWeights: %s. Every figure below was measured in this run.\n\n", WeightsOf(r))
		b.WriteString("| rank | strategy | score | consistency | throughput | latency | complexity |\n|---:|---|---:|---:|---:|---:|---:|\n")
		for _, rec := range recs {
			fmt.Fprintf(&b, "| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", rec.Rank, rec.Strategy, rec.Score,
				rec.Consistency, rec.Throughput, rec.Latency, rec.Complexity)
		}
		b.WriteString("\n")
		for _, rec := range recs {
			fmt.Fprintf(&b, "%d. %s\n", rec.Rank, rec.Reason)
		}
	}

	if len(r.Aggregates) > 0 {
		b.WriteString("\n## Spread over repeats (min / median / max)\n\n| strategy | scenario | runs | TPS | P99 (ms) | oversell % | server CPU % |\n|---|---|---:|---|---|---|---|\n")
		for _, a := range r.Aggregates {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", a.Strategy, a.Scenario, a.Repeats, spread(a.TPS, f1),
				spread(a.FlowP99MS, f2), spread(a.OversellRate, pct), spread(a.ServerCPUPct, f1))
		}
	}
	if c := r.Calibration; c != nil {
		fmt.Fprintf(&b, "\n## Calibration (raw ceilings, concurrency %d, %g s each)\n\n", c.Concurrency, c.DurationSec)
		fmt.Fprintf(&b, "| probe | ops/s |\n|---|---:|\n| Redis EVALSHA, reserve-shaped script, one key | %.0f |\n| MySQL conditional UPDATE, one hot row | %.0f |\n| MySQL SELECT … FOR UPDATE + UPDATE txn, one hot row | %.0f |\n\n",
			c.RedisEvalshaOps, c.MySQLHotUpdateOps, c.MySQLHotTxnOps)
		b.WriteString("| strategy | scenario | reserve attempts/s | % of its store's ceiling |\n|---|---|---:|---:|\n")
		for _, run := range r.Runs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", run.Strategy, label(run), f1(run.AttemptsPerSec), f1(run.CeilingPct))
		}
	}

	b.WriteString("\n## Audit\n\n| strategy | scenario | confirmed | oversold | leaked | lost acks | cancel-ack violations | invariant violations | Redis drift |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		a := run.Audit
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d |\n", run.Strategy, label(run), a.ConfirmedUnits, a.OversoldUnits,
			a.LeakedUnits, a.LostAcks, a.CancelAckViolations, a.InvariantViolations, a.DriftUnits)
	}
	for _, run := range r.Runs {
		if len(run.Audit.Violations) > 0 {
			fmt.Fprintf(&b, "\n%s (%s) violations:\n", run.Strategy, label(run))
			for _, v := range run.Audit.Violations {
				fmt.Fprintf(&b, "- %s\n", v)
			}
		}
	}

	writeTwoAudits(&b, r)

	b.WriteString("\n## Latency (ms)\n\n| strategy | scenario | operation | count | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		for _, op := range []string{"reserve", "confirm", "cancel", "flow"} {
			p := run.LatencyMS[op]
			if p.Count == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", run.Strategy, label(run), op, p.Count, f2(p.P50), f2(p.P90), f2(p.P99), f2(p.P999), f2(p.Max))
		}
	}

	b.WriteString("\n## Outcomes by operation\n\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "- **%s** (%s): ", run.Strategy, label(run))
		var parts []string
		for _, op := range sortedKeys(run.Counts) {
			var cs []string
			for _, cls := range sortedKeys(run.Counts[op]) {
				cs = append(cs, fmt.Sprintf("%s %d", cls, run.Counts[op][cls]))
			}
			parts = append(parts, op+" ("+strings.Join(cs, ", ")+")")
		}
		b.WriteString(strings.Join(parts, "; "))
		if len(run.Counters) > 0 {
			var cs []string
			for _, k := range sortedKeys(run.Counters) {
				cs = append(cs, fmt.Sprintf("%s %.4g", k, run.Counters[k]))
			}
			b.WriteString("; counters: " + strings.Join(cs, ", "))
		}
		b.WriteString("\n")
		for _, e := range run.Errors {
			fmt.Fprintf(&b, "  - error: %s\n", e)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WeightsOf reads the recommendation weights recorded in the results'
// config, or returns the defaults.
func WeightsOf(r *Results) Weights {
	if s, ok := r.Config["weights"].(string); ok {
		if w, err := ParseWeights(s); err == nil {
			return w
		}
	}
	return DefaultWeights
}

// WriteSummary writes summary.md into dir.
func WriteSummary(dir string, r *Results) error {
	return writeAtomic(filepath.Join(dir, "summary.md"), []byte(Summary(r)))
}

// label names a run's scenario, with the swept value for a sweep run.
func label(run Run) string {
	if run.Param != "" {
		return run.Scenario + " " + run.Param + "=" + run.Value
	}
	return run.Scenario
}

// writeTwoAudits writes, for runs graded twice, the audit at the end of load
// and after settle side by side, and what settle repaired.
func writeTwoAudits(b *strings.Builder, r *Results) {
	graded := false
	for _, run := range r.Runs {
		graded = graded || run.AuditEndOfLoad != nil
	}
	if !graded {
		return
	}
	b.WriteString("\n## Audit at the end of load and after settle\n\nThe stores are graded twice: when the load ends, before any strategy code repairs anything, and after the strategy's Settle. Acks contradicted = lost confirm acks + reserve acks no store holds + cancel acks whose order is confirmed or still reserved.\n\n")
	b.WriteString("| strategy | scenario | graded | anomalies | oversold | phantom | leaked | acks contradicted | refused after reserve | drift | orphan res. | stale res. | invariant violations |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		if run.AuditEndOfLoad == nil {
			continue
		}
		for _, g := range []struct {
			when string
			a    inventory.Audit
		}{{"end of load", *run.AuditEndOfLoad}, {"after settle", run.Audit}} {
			a := g.a
			fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", run.Strategy, label(run), g.when,
				a.Anomalies, a.OversoldUnits, a.PhantomUnits, a.LeakedUnits, a.LostAcks+a.ReserveAckViolations+a.CancelAckViolations,
				a.RefusedAfterReserve, a.DriftUnits, a.OrphanReservations, a.StaleReservations, a.InvariantViolations)
		}
	}
	for _, run := range r.Runs {
		if len(run.SettleRepaired) == 0 {
			continue
		}
		keys := make([]string, 0, len(run.SettleRepaired))
		for k := range run.SettleRepaired {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %+d", k, run.SettleRepaired[k])
		}
		fmt.Fprintf(b, "\n%s (%s): settle repaired %s.\n", run.Strategy, label(run), strings.Join(parts, ", "))
	}
}
