package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
)

// defaultCurveRates are the offered loads tried by `stockbench curve`.
const defaultCurveRates = "100,200,400,800,1600,3200,6400,12800"

// cmdCurve drives each strategy open loop (sustained scenario) at
// increasing arrival rates until its flow P99 passes the SLO or errors
// appear, and reports the highest rate each held.
func cmdCurve(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("curve", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	rates := fs.String("rates", defaultCurveRates, "offered loads to try, arrivals/s, in increasing order")
	sloFlag := fs.String("slo", "p99=50ms", "latency bound of the flow: p99=DURATION")
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	slo, err := parseSLO(*sloFlag)
	if err != nil {
		return fail(exitUsage, err)
	}
	values, err := parseRates(*rates)
	if err != nil {
		return fail(exitUsage, err)
	}
	values = shortenValues(values)
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	if explicit["scenario"] && !scenarios.IsTimed(f.scenario) {
		return fail(exitUsage, errors.New("curve runs the sustained scenario only"))
	}
	if explicit["rate"] {
		return fail(exitUsage, errors.New("curve sets the rate itself: use --rates"))
	}
	// Short steps unless asked: the curve is many runs.
	defaults := map[string]string{"scenario": "sustained", "duration": "5s", "warmup": "1s"}
	for name, v := range defaults {
		if !explicit[name] {
			if err := fs.Set(name, v); err != nil {
				return fail(exitUsage, err)
			}
		}
	}
	sloMS := float64(slo) / float64(time.Millisecond)
	var plans []runner.Plan
	ax := newAxis()
	for _, v := range values {
		if err := fs.Set(results.ParamRate, v); err != nil {
			return fail(exitUsage, fmt.Errorf("--rates %s: %w", v, err))
		}
		o, err := f.resolve(fs)
		if err != nil {
			return fail(exitUsage, err)
		}
		o.Repeat = 1
		o.Enough = func(run results.Run) bool { return !analysis.CurveStepOf(run, sloMS).Held() }
		ax.add(fs.Lookup(results.ParamRate), o)
		plans = append(plans, runner.Plan{Options: o, Param: results.ParamRate, Value: v})
	}
	f.post = func(res *results.Results) {
		var names []string
		for _, e := range plans[0].Strategies {
			names = append(names, e.Name)
		}
		res.Curve = analysis.CurveOf(res, names, sloMS).Record()
	}
	f.after = func(w io.Writer, res *results.Results) { printCurve(w, res.Curve) }
	return f.execute(ctx, plans, ax.record(&results.Sweep{Param: results.ParamRate, Values: values}), stdout, stderr, fail)
}

func printCurve(w io.Writer, c *results.Curve) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nhighest offered load holding flow P99 ≤ %.0f ms with no errors:\n", c.SLOP99MS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmax rate/s\tstopped at\twhy\t")
	for _, p := range c.Strategies {
		stop := "—"
		if p.StoppedAt > 0 {
			stop = strconv.FormatFloat(p.StoppedAt, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t\n", p.Strategy, p.MaxRate, stop, p.Why)
	}
	tw.Flush()
}

// parseSLO reads "p99=50ms".
func parseSLO(s string) (time.Duration, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) != "p99" {
		return 0, fmt.Errorf("--slo %q: want p99=DURATION, e.g. p99=50ms", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--slo %q: want a positive duration, e.g. p99=50ms", s)
	}
	return d, nil
}

// parseRates reads an increasing list of positive rates.
func parseRates(s string) ([]string, error) {
	var out []string
	var last float64
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || r <= last {
			return nil, fmt.Errorf("--rates %q: want positive arrival rates in increasing order", s)
		}
		last = r
		out = append(out, v)
	}
	if len(out) == 0 || slices.Contains(out, "") {
		return nil, fmt.Errorf("--rates %q: want at least one rate", s)
	}
	return out, nil
}
