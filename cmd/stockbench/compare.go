package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/results"
)

// percentFlag reads "10%" or "10" as 10 percent.
type percentFlag float64

func (p *percentFlag) String() string { return strconv.FormatFloat(float64(*p), 'g', -1, 64) + "%" }

func (p *percentFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want a percentage such as 10%%, got %q", s)
	}
	*p = percentFlag(v)
	return nil
}

// cmdCompare is the CI regression gate: exit 0 when NEW is within the
// thresholds of OLD, 1 when any strategy regressed.
func cmdCompare(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	tps, p99 := percentFlag(10), percentFlag(20)
	fs.Var(&tps, "max-tps-drop", "largest TPS drop allowed, in percent")
	fs.Var(&p99, "max-p99-rise", "largest P99 rise allowed, in percent")
	files, code, done := resultsArgs(fs, args, stdout, fail)
	if done {
		return code
	}
	if len(files) != 2 {
		return fail(exitUsage, errors.New("usage: stockbench compare OLD NEW (results.json files or report directories) [--max-tps-drop 10%] [--max-p99-rise 20%]"))
	}
	old, err := results.ReadJSON(files[0])
	if err != nil {
		return fail(exitUsage, err)
	}
	cur, err := results.ReadJSON(files[1])
	if err != nil {
		return fail(exitUsage, err)
	}
	c := analysis.Compare(analysis.Analyze(old), analysis.Analyze(cur), analysis.Thresholds{MaxTPSDropPct: float64(tps), MaxP99RisePct: float64(p99)})
	reports.CompareTable(stdout, c)
	if !hasRepeats(old) || !hasRepeats(cur) {
		fmt.Fprintf(stdout, "note: without repeats, a row's noise is its two runs' per-second series: a TPS or P99 change past its limit fails only beyond that noise and when the CPU the run got does not explain it; a run of fewer than %d whole seconds (a flash sale) shows none and is not gated on speed: run both with --repeat 3 or more to gate it\n", analysis.MinNoiseSeconds)
	}
	if c.Regressed > 0 {
		return fail(exitFailed, fmt.Errorf("%d of %d comparisons regressed: %s%s", c.Regressed, len(c.Verdicts), regressedNames(c), unprovenNames(c)))
	}
	return exitOK
}

// resultsArgs parses fs's flags wherever they stand among the positional
// arguments, and returns those arguments as results.json paths: a report
// directory stands for its results.json, as with `report`.
func resultsArgs(fs *flag.FlagSet, args []string, stdout io.Writer, fail func(int, error) int) (files []string, code int, done bool) {
	rest := args
	for {
		if code, done := parseFlagsAllowArgs(fs, rest, stdout, fail); done {
			return nil, code, true
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	for i, f := range files {
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			files[i] = filepath.Join(f, "results.json")
		}
	}
	return files, 0, false
}

// hasRepeats reports whether every row of r ran more than once.
func hasRepeats(r *results.Results) bool {
	rows := results.Rows(r)
	for _, row := range rows {
		if len(row.Runs) < 2 {
			return false
		}
	}
	return len(rows) > 0
}

// regressedNames names the rows that failed the gate, "strategy on
// scenario" (with the sweep value), for its one-line error.
func regressedNames(c analysis.Comparison) string {
	var names []string
	for _, v := range c.Verdicts {
		if !v.Regressed() {
			continue
		}
		name := v.Strategy + " on " + v.Scenario
		if v.Param != "" || v.Value != "" {
			name += " " + v.Param + "=" + v.Value
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// unprovenNames names the rows the gate failed for being unproven, as a
// suffix of its one-line error ("" when none).
func unprovenNames(c analysis.Comparison) string {
	var names []string
	for _, v := range c.Verdicts {
		if v.NewSafety.Kind == analysis.Unproven {
			names = append(names, v.Strategy+" on "+v.Scenario)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (unproven in NEW: " + strings.Join(names, ", ") + ")"
}
