package reports

import (
	_ "embed"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// comparison is the headline table shared by the terminal and summary.md,
// so the two never disagree: one row per strategy, scenario and sweep
// value, repeats folded into "median (min–max)". Column names follow the
// keys of results.json; the figures are right-aligned.
func comparison(a *analysis.Analysis) table {
	rs := a.Rows
	head, repeats := rowHead(rs)
	head = append(head, "TPS", "flow P99 ms", "flows")
	for _, c := range audit.HeadlineClasses() {
		head = append(head, c.Title)
		if c.RateTitle != "" {
			head = append(head, c.RateTitle)
		}
	}
	head = append(head, "other anomalies")
	head = append(head, "server CPU %", "core lines", "bound by", "safety")
	var rows [][]string
	for _, row := range rs {
		runs := row.Runs
		cells := []string{row.Strategy, rowLabel(row)}
		if repeats {
			cells = append(cells, fmt.Sprint(len(runs)))
		}
		count := func(f func(results.Run) int64) string {
			return fold(runs, func(r results.Run) float64 { return float64(f(r)) }, func(x float64) string { return fmt.Sprintf("%.0f", x) })
		}
		cells = append(cells,
			fold(runs, func(r results.Run) float64 { return r.TPS }, f1),
			fold(runs, func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }, f2),
			count(func(r results.Run) int64 { return r.Flows }))
		for _, c := range audit.HeadlineClasses() {
			cells = append(cells, count(func(r results.Run) int64 { return c.Of(r.Audit) }))
			if c.RateTitle != "" {
				cells = append(cells, fold(runs, func(r results.Run) float64 { return r.Audit.OversellRate }, pct))
			}
		}
		cells = append(cells, count(func(r results.Run) int64 {
			var n int64
			for _, c := range audit.OtherClasses() {
				n += c.Of(r.Audit)
			}
			return n
		}))
		cpu := "n/a"
		if row.HasCPU {
			cpu = fold(runs, results.ServerCPU, f1)
		}
		cells = append(cells, cpu, fmt.Sprint(row.CoreLines), row.BoundBy.Label(), row.Safety.Label())
		rows = append(rows, cells)
	}
	t := table{Head: head, Rows: rows, Align: verdictsAlign(len(head))}
	flagVerdicts(&t, a.Rows)
	return t
}

// flagVerdicts flags the last cell (the safety verdict) of each row of t
// whose analysed row is unsafe or unproven (a probe's is no verdict).
func flagVerdicts(t *table, rows []analysis.Row) {
	for i, row := range rows {
		if k := row.Safety.Kind; k == analysis.Unsafe || k == analysis.Unproven {
			t.flag(i, len(t.Head)-1)
		}
	}
}

// figuresAlign aligns a table of n columns whose first two (strategy,
// scenario) and last (a verdict) are words and the others figures.
func figuresAlign(n int) string { return "ll" + strings.Repeat("r", n-3) + "l" }

// verdictsAlign is figuresAlign for a table whose last two columns are
// verdicts (bound by, safety).
func verdictsAlign(n int) string { return "ll" + strings.Repeat("r", n-4) + "ll" }

// wrap breaks text at spaces into lines of at most width columns, each
// line after the first starting with indent.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		wl := utf8.RuneCountInString(word)
		switch {
		case i == 0:
		case n+1+wl > width:
			b.WriteString("\n" + indent)
			n = utf8.RuneCountInString(indent)
		default:
			b.WriteString(" ")
			n++
		}
		b.WriteString(word)
		n += wl
	}
	return b.String()
}

// rowHead is the first columns of a table of rows: strategy, scenario and,
// when any row has repeats, their count (repeats reports whether one has).
func rowHead(rs []analysis.Row) (head []string, repeats bool) {
	for _, row := range rs {
		repeats = repeats || len(row.Runs) > 1
	}
	head = []string{"strategy", "scenario"}
	if repeats {
		head = append(head, "runs")
	}
	return head, repeats
}

// fold formats f over the repeats: the value of a single run, or
// "median (min–max)" when the repeats differ.
func fold(runs []results.Run, f func(results.Run) float64, format func(float64) string) string {
	s := results.SpreadOf(runs, f)
	if len(runs) < 2 || s.Min == s.Max {
		return format(s.Median)
	}
	return format(s.Median) + " (" + format(s.Min) + "–" + format(s.Max) + ")"
}

// terminalWidth is the width the terminal table is made to fit.
const terminalWidth = 120

// terminal is the headline cut to what a terminal holds: the figures of
// the classic table and the anomaly total; each class apart, and the
// spread over repeats, are in summary.md and index.html. Cells are medians
// over repeats.
func terminal(a *analysis.Analysis) table {
	rs := a.Rows
	head, repeats := rowHead(rs)
	head = append(head, "TPS", "P99 ms", "flows", "oversold", "oversell %", "anomalies", "CPU %", "safety")
	var rows [][]string
	for _, row := range rs {
		med := func(f func(results.Run) float64) float64 { return results.SpreadOf(row.Runs, f).Median }
		cells := []string{row.Strategy, rowLabel(row)}
		if repeats {
			cells = append(cells, fmt.Sprint(len(row.Runs)))
		}
		cpu := "n/a"
		if row.HasCPU {
			cpu = f1(row.ServerCPU)
		}
		safety := string(row.Safety.Kind)
		if row.Safety.Kind == analysis.Unsafe {
			safety = "UNSAFE"
		}
		cells = append(cells, f1(row.TPS), f2(row.P99),
			fmt.Sprintf("%.0f", med(func(r results.Run) float64 { return float64(r.Flows) })),
			fmt.Sprintf("%.0f", med(func(r results.Run) float64 { return float64(r.Audit.OversoldUnits) })),
			pct(row.OversellRate), fmt.Sprint(row.Anomalies), cpu, safety)
		rows = append(rows, cells)
	}
	t := table{Head: head, Rows: rows, Align: figuresAlign(len(head))}
	flagVerdicts(&t, a.Rows)
	return t
}

// Table writes the headline for a terminal, within TerminalWidth columns
// (each anomaly class apart is in summary.md), then what made a strategy
// UNSAFE, the generators and the recommended order.
func Table(w io.Writer, a *analysis.Analysis) {
	r := a.Results
	terminal(a).terminal(w)
	if t, ok := costTable(a); ok {
		fmt.Fprintln(w, wrap(costCaption, terminalWidth, "  "))
		t.terminal(w)
	}
	uslLines(w, a)
	for _, row := range a.Rows {
		switch row.Safety.Kind {
		case analysis.Unproven:
			fmt.Fprintf(w, "UNPROVEN %s (%s): %s; no verdict on what it would have found\n",
				row.Strategy, rowLabel(row), row.Safety.Why())
		case analysis.Unsafe:
			fmt.Fprintf(w, "UNSAFE %s (%s): %s\n", row.Strategy, rowLabel(row), row.Safety.Why())
		}
	}
	notExercised(w, r)
	for _, run := range r.Runs {
		if n := run.Harness.OpenDropped; n > 0 {
			// An open loop that could not start its arrivals measured
			// less load than it offered: its flows/s is not the rate asked.
			fmt.Fprintln(w, wrap(fmt.Sprintf("DROPPED %s (%s): %d arrivals could not start (the open loop's buyers were all busy): its flows/s is what was served, below the rate offered",
				run.Strategy, label(run), n), terminalWidth, "  "))
		}
	}
	for _, p := range a.Problems {
		fmt.Fprintln(w, "note: "+p)
	}
	if n := networkLine(r); n != "" {
		fmt.Fprintln(w, n)
	}
	if b := budgetLine(r); b != "" {
		fmt.Fprintln(w, wrap(b, terminalWidth, "  "))
	}
	flashTable(w, r)
	generatorsNote(w, r)
	driftNote(w, a)
	if recs := a.Recommendation; len(recs) > 0 {
		var clean, unproven, unsafe []string
		for _, rec := range recs {
			switch {
			case rec.Safety.Kind == analysis.Unsafe:
				unsafe = append(unsafe, rec.Strategy)
			case rec.Safety.Kind == analysis.Unproven:
				unproven = append(unproven, rec.Strategy)
			case rec.Unsold > 0:
				clean = append(clean, rec.Strategy+" (did not sell out)")
			default:
				clean = append(clean, rec.Strategy)
			}
		}
		line := "recommended, best first: " + strings.Join(clean, ", ")
		if len(clean) == 0 {
			line = "recommended: none (no strategy was proven safe)"
		}
		if len(unproven) > 0 {
			line += "; then, UNPROVEN (see why above): " + strings.Join(unproven, ", ")
		}
		if len(unsafe) > 0 {
			line += "; then, UNSAFE: " + strings.Join(unsafe, ", ")
		}
		fmt.Fprintln(w, wrap(line, terminalWidth, "  "))
		fmt.Fprintf(w, "  (weights %s)\n", a.Weights)
	}
}

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func f1(x float64) string { return fmt.Sprintf("%.1f", x) }

// classTitles are the titles of every anomaly class, in order.
func classTitles() []string {
	out := make([]string, len(audit.Classes))
	for i, c := range audit.Classes {
		out[i] = c.Title
	}
	return out
}

// classCells are a's count of every anomaly class, in order.
func classCells(a audit.Audit) []string {
	out := make([]string, len(audit.Classes))
	for i, c := range audit.Classes {
		out[i] = fmt.Sprint(c.Of(a))
	}
	return out
}

func spread(s results.Spread, f func(float64) string) string {
	return f(s.Min) + " / " + f(s.Median) + " / " + f(s.Max)
}
func f2(x float64) string  { return fmt.Sprintf("%.2f", x) }
func pct(x float64) string { return fmt.Sprintf("%.3f", 100*x) }

// summaryView is what summary.md shows, computed once from the results;
// templates/summary.md.tmpl lays it out. A nil or empty section is left
// out.
type summaryView struct {
	Interrupted    bool
	Env            results.Env
	Network        string
	Budget         string
	Comparison     table
	Flash          *flashView
	Repeats        table
	Sweep          *sweepView
	Article        *articleView
	Recommendation *recommendationView
	Faults         *faultsView
	Drift          driftView
	Spread         table
	Calibration    *calibrationView
	Audit          table
	Violations     []runNotes
	TwoAudits      *twoAuditsView
	Generators     *generatorsView
	Latency        table
	Outcomes       []outcomeView
	Problems       []string
	// Isolation is the level the MySQL strategies ran at, in words.
	Isolation string
}

// runRef names a run in a sentence: strategy (scenario label).
type runRef struct{ Strategy, Label string }

func refOf(run results.Run) runRef { return runRef{run.Strategy, label(run)} }

// runNotes are lines said of one run.
type runNotes struct {
	runRef
	Items []string
}

type recommendationView struct {
	Weights, UnsafeTitles string
	Table                 table
	Recs                  []analysis.Recommendation
}

type calibrationView struct {
	Concurrency  int
	DurationSec  float64
	Probes, Runs table
}

type twoAuditsView struct {
	Table    table
	Repaired []runNotes
}

type outcomeView struct {
	runRef
	Ops, Counters, Errors []string
}

//go:embed templates/summary.md.tmpl
var summaryTmpl string

var markdown = template.Must(template.New("summary.md").Funcs(template.FuncMap{
	"table": table.markdown,
	"join":  strings.Join,
}).Parse(summaryTmpl))

// renderMarkdown executes one template of summary.md.tmpl on its view.
func renderMarkdown(name string, view any) string {
	var b strings.Builder
	if err := markdown.ExecuteTemplate(&b, name, view); err != nil {
		// The views are the templates' own types: a failure is a bug here.
		panic(fmt.Sprintf("reports: %s: %v", name, err))
	}
	return b.String()
}

// Summary renders summary.md.
func Summary(a *analysis.Analysis) string { return renderMarkdown("summary", summaryOf(a)) }

// summaryOf computes summary.md's view of r.
func summaryOf(a *analysis.Analysis) summaryView {
	r := a.Results
	v := summaryView{Interrupted: r.Interrupted, Env: r.Env, Network: networkLine(r), Budget: budgetLine(r), Comparison: comparison(a),
		Flash: flashOf(r), Repeats: repeatRows(a), Sweep: sweepOf(a), Article: articleOf(a), Faults: faultsOf(r),
		Drift: driftOf(a), TwoAudits: twoAuditsOf(r), Generators: generatorsOf(r), Problems: a.Problems, Isolation: isolationOf(r)}
	if recs := a.Recommendation; len(recs) > 0 {
		t := table{Head: []string{"rank", "strategy", "safety", "score", "consistency", "throughput", "latency", "complexity"}, Align: "rllrrrrr"}
		for _, rec := range recs {
			t.Rows = append(t.Rows, []string{fmt.Sprint(rec.Rank), rec.Strategy, rec.Label(), f2(rec.Score),
				f2(rec.Consistency), f2(rec.Throughput), f2(rec.Latency), f2(rec.Complexity)})
			if rec.Label() != "ok" {
				t.flag(len(t.Rows)-1, 2)
			}
		}
		v.Recommendation = &recommendationView{a.Weights.String(), audit.UnsafeTitles(), t, recs}
	}
	if len(r.Aggregates) > 0 {
		v.Spread = table{Head: []string{"strategy", "scenario", "runs", "TPS", "P99 (ms)", "oversell %", "server CPU %"}, Align: "llr"}
		for _, a := range r.Aggregates {
			v.Spread.Rows = append(v.Spread.Rows, []string{a.Strategy, a.Scenario, fmt.Sprint(a.Repeats), spread(a.TPS, f1),
				spread(a.FlowP99MS, f2), spread(a.OversellRate, pct), spread(a.ServerCPUPct, f1)})
		}
	}
	if c := r.Calibration; c != nil {
		cv := &calibrationView{Concurrency: c.Concurrency, DurationSec: c.DurationSec,
			Probes: table{Head: []string{"probe", "ops/s"}, Align: "lr", Rows: [][]string{
				{"Redis EVALSHA, reserve-shaped script, one key", f0(c.RedisEvalshaOps)},
				{"MySQL conditional UPDATE, one hot row", f0(c.MySQLHotUpdateOps)},
				{"MySQL SELECT … FOR UPDATE + UPDATE txn, one hot row", f0(c.MySQLHotTxnOps)}}},
			Runs: table{Head: []string{"strategy", "scenario", "reserve attempts/s", "% of its store's ceiling"}, Align: "llrr"}}
		for _, run := range r.Runs {
			cv.Runs.Rows = append(cv.Runs.Rows, []string{run.Strategy, label(run), f1(run.AttemptsPerSec), f1(run.CeilingPct)})
		}
		v.Calibration = cv
	}
	// One column per anomaly class: the section the headline's "other
	// anomalies" points to.
	v.Audit = table{Head: append([]string{"strategy", "scenario", "confirmed units"}, classTitles()...), Align: "ll" + strings.Repeat("r", 1+len(audit.Classes))}
	v.Latency = table{Head: []string{"strategy", "scenario", "operation", "count", "p50", "p90", "p99", "p99.9", "max"}, Align: "lllrrrrrr"}
	for _, run := range r.Runs {
		v.Audit.Rows = append(v.Audit.Rows, append([]string{run.Strategy, label(run), fmt.Sprint(run.Audit.ConfirmedUnits)}, classCells(run.Audit)...))
		for j, c := range audit.Classes {
			if c.Severity == audit.Unsafe && c.Of(run.Audit) > 0 {
				v.Audit.flag(len(v.Audit.Rows)-1, 3+j)
			}
		}
		if len(run.Audit.Violations) > 0 {
			v.Violations = append(v.Violations, runNotes{refOf(run), run.Audit.Violations})
		}
		for _, op := range results.HistogramNames {
			if p := run.LatencyMS[op]; p.Count > 0 {
				v.Latency.Rows = append(v.Latency.Rows, []string{run.Strategy, label(run), op, fmt.Sprint(p.Count), f2(p.P50), f2(p.P90), f2(p.P99), f2(p.P999), f2(p.Max)})
			}
		}
		v.Outcomes = append(v.Outcomes, outcomeOf(run))
	}
	return v
}

// isolationOf says at which isolation level the MySQL strategies ran: the
// level asked (--isolation), else the server's default; "" when neither
// was recorded.
func isolationOf(r *results.Results) string {
	switch r.Config.Isolation {
	case "rc":
		return "sessions at READ COMMITTED, --isolation rc"
	case "rr":
		return "sessions at REPEATABLE READ, --isolation rr"
	}
	if l := r.Env.MySQLIsolation; l != "" {
		return "sessions at the server's default, " + l
	}
	return ""
}

// outcomeOf is a run's outcomes by operation and class, then the
// harness's figures and the strategy's counters, by key.
func outcomeOf(run results.Run) outcomeView {
	o := outcomeView{runRef: refOf(run), Errors: run.Errors}
	for _, op := range sortedKeys(run.Counts) {
		var cs []string
		for _, cls := range sortedKeys(run.Counts[op]) {
			cs = append(cs, fmt.Sprintf("%s %d", cls, run.Counts[op][cls]))
		}
		o.Ops = append(o.Ops, op+" ("+strings.Join(cs, ", ")+")")
	}
	// The units those operations moved (a run written before units were
	// counted has none).
	var us []string
	for _, mv := range results.Movements {
		if n, ok := run.Units[mv]; ok {
			us = append(us, fmt.Sprintf("%s %d", mv, n))
		}
	}
	if len(us) > 0 {
		o.Ops = append(o.Ops, "units ("+strings.Join(us, ", ")+")")
	}
	figs := run.Harness.Figures()
	for k, v := range run.Counters {
		figs[k] = v
	}
	from, _ := time.Parse(time.RFC3339Nano, run.MeasuredFrom)
	for _, k := range sortedKeys(figs) {
		o.Counters = append(o.Counters, counterText(k, figs[k], from))
	}
	return o
}

// counterText is one counter as the outcomes line shows it. A key ending
// in _unix_ms is an instant (lua-tcc's degradation switch: when a SKU
// moved to MySQL and back), shown as seconds into the measured phase
// when the run says when that began.
func counterText(k string, v float64, from time.Time) string {
	if strings.HasSuffix(k, "_unix_ms") && !from.IsZero() {
		at := time.UnixMilli(int64(v)).Sub(from).Seconds()
		return fmt.Sprintf("%s at %+.2f s", strings.TrimSuffix(k, "_unix_ms"), at)
	}
	return fmt.Sprintf("%s %.4g", k, v)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeSummary writes summary.md into dir.
func writeSummary(dir string, a *analysis.Analysis) error {
	return results.WriteFileAtomic(filepath.Join(dir, "summary.md"), []byte(Summary(a)))
}

// label names a run's scenario, with the swept value for a sweep run and
// its index among repeats.
func label(run results.Run) string {
	s := run.Scenario
	if run.Param != "" {
		s += " " + run.Param + "=" + run.Value
	}
	if run.Repeat > 0 {
		s += fmt.Sprintf(" #%d", run.Repeat)
	}
	return s
}

// rowLabel names a row's scenario, with the swept parameter and value.
func rowLabel(row analysis.Row) string {
	if row.Param != "" || row.Value != "" {
		return row.Scenario + " " + row.Param + "=" + row.Value
	}
	return row.Scenario
}

// twoAuditsOf is, for runs graded twice, the audit at the end of load and
// after settle side by side, and what settle repaired; nil when no run was.
func twoAuditsOf(r *results.Results) *twoAuditsView {
	v := &twoAuditsView{Table: table{Head: append([]string{"strategy", "scenario", "graded", "anomalies"}, classTitles()...),
		Align: "lll" + strings.Repeat("r", 1+len(audit.Classes))}}
	graded := false
	for _, run := range r.Runs {
		if run.AuditEndOfLoad == nil {
			continue
		}
		graded = true
		for _, g := range []struct {
			when string
			a    audit.Audit
		}{{"end of load", *run.AuditEndOfLoad}, {"after settle", run.Audit}} {
			v.Table.Rows = append(v.Table.Rows, append([]string{run.Strategy, label(run), g.when, fmt.Sprint(g.a.Count())}, classCells(g.a)...))
		}
	}
	if !graded {
		return nil
	}
	for _, run := range r.Runs {
		if len(run.SettleRepaired) == 0 {
			continue
		}
		n := runNotes{runRef: refOf(run)}
		for _, k := range sortedKeys(run.SettleRepaired) {
			n.Items = append(n.Items, fmt.Sprintf("%s %+d", k, run.SettleRepaired[k]))
		}
		v.Repaired = append(v.Repaired, n)
	}
	return v
}

// sweepView points a sweep's reader at its charts, tabulates a sweep over
// rtt, lists where a numeric sweep's verdicts cross and, when the run's
// cluster ran on this one machine, says what such a run can and cannot
// show.
type sweepView struct {
	Param     string
	Values    []string
	Charts    []string
	RTT       table // no head: not a sweep over rtt
	USL       table // no head: not a sweep over buyers
	Numeric   bool  // the values are numbers or durations: crossings apply
	Unit      string
	Crossings []crossingView
	Caveat    string
}

// crossingView is a Crossing in words.
type crossingView struct{ Metric, Before, After, X, Lo, Hi string }

// sweepOf is the sweep section of r; nil without a sweep.
func sweepOf(a *analysis.Analysis) *sweepView {
	r := a.Results
	if r.Sweep == nil {
		return nil
	}
	v := &sweepView{Param: r.Sweep.Param, Values: r.Sweep.Values, RTT: rttSweepTable(a), USL: uslTable(a), Caveat: oneHostCaveat(r)}
	rows := a.Rows
	for _, m := range sweepMetrics {
		// A metric no row has (CAS retries without cas) has no chart.
		if slices.ContainsFunc(rows, func(row analysis.Row) bool { _, ok := m.row(row.Row); return ok }) {
			v.Charts = append(v.Charts, "charts/sweep-"+m.name+".png")
		}
	}
	if v.USL.Head != nil {
		v.Charts = append(v.Charts, "charts/usl.png")
	}
	_, v.Unit, v.Numeric = analysis.SweepX(r.Sweep)
	if v.Numeric {
		g := func(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }
		for _, c := range a.Crossings {
			v.Crossings = append(v.Crossings, crossingView{c.Metric, c.Before, c.After, g(c.X), g(c.Lo), g(c.Hi)})
		}
	}
	return v
}

// oneHostCaveat is the honesty note a run on a cluster whose nodes all ran
// on this one machine needs beside any figure that could be read as
// scaling: the server processes share the machine's cores. Empty for a
// run on single servers or on a cluster spread over hosts.
func oneHostCaveat(r *results.Results) string {
	e := r.Env
	local := e.Backend == "local" && (e.RedisClusterNodes > 0 || e.MySQLClusterNodes > 1)
	if !e.ClusterOnOneHost && !local {
		return ""
	}
	var what []string
	if e.RedisClusterNodes > 0 {
		what = append(what, fmt.Sprintf("a Redis Cluster of %d masters", e.RedisClusterNodes))
	}
	if e.MySQLClusterNodes > 1 {
		what = append(what, fmt.Sprintf("a MySQL cluster of %d nodes", e.MySQLClusterNodes))
	}
	s := fmt.Sprintf("every node of %s ran on this one machine (%d cores), beside the load generator, so the server processes share the same cores. "+
		"The run proves the mechanics (keys and rows spread over slots and nodes, routing, certification, causal reads, a clean audit), not the scaling: "+
		"spreading stock over more SKUs spreads it over more slots and nodes here, but not over more CPUs.", strings.Join(what, " and "), e.Cores)
	if e.LoadAverage != "" {
		s += " Load average when the run started: " + e.LoadAverage + "."
	}
	return s
}

// notExercised names each run whose planned fault never took effect (a
// flash sale over before the fault's time, a fault that failed to apply):
// its clean result says nothing about that fault.
func notExercised(w io.Writer, r *results.Results) {
	for _, run := range r.Runs {
		for _, f := range run.Faults {
			if f.Applied {
				continue
			}
			why := f.Error
			if why == "" {
				why = "not applied"
			}
			fmt.Fprintln(w, wrap(fmt.Sprintf("NOT EXERCISED %s (%s): fault %s never took effect (%s): this run says nothing about it",
				run.Strategy, label(run), f.Spec, why), terminalWidth, "  "))
		}
	}
}
