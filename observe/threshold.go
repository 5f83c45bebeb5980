// Package observe watches a run while it runs: thresholds evaluated each
// second (--abort-on) or on the finished run (--threshold), and the
// OpenMetrics endpoint (--metrics-addr) a Prometheus scrapes. It knows
// nothing of strategies or stores: the runner feeds it one Second a
// second and reads back a Breach.
package observe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/results"
)

// Metric is what a threshold watches.
type Metric string

const (
	// Anomaly: the mid-run probe saw a stock invariant broken (live), or
	// the run's audit found any anomaly (at the end).
	Anomaly Metric = "anomaly"
	// P99 is the flow latency P99 of one second, in milliseconds.
	P99 Metric = "p99"
	// Flows is completed reserve+confirm flows in one second.
	Flows Metric = "flows"
	// Errors is failed operations (a store's error, not an answer) in one second.
	Errors Metric = "errors"
)

// Threshold is one parsed --abort-on or --threshold: "anomaly", or
// METRIC OP VALUE [for DURATION], e.g. "p99>500ms for 30s",
// "flows<100/s for 10s", "errors>5/s". The condition must hold in every
// second of a run of For (rounded up to whole seconds; 1 s when omitted)
// consecutive seconds. A second without a completed flow says nothing of
// P99: it neither counts towards nor breaks a P99 streak.
type Threshold struct {
	// Text is the threshold as written, for messages and results.json.
	Text   string
	Metric Metric
	// Above: breached when the value is above Value; else below it.
	Above bool
	// Value is in the metric's unit: ms for P99, per second for rates.
	Value float64
	// For is how long the condition must hold (0: one second).
	For time.Duration
}

// seconds is the streak length, in whole seconds, that breaches t.
func (t Threshold) seconds() int {
	return max(1, int((t.For+time.Second-1)/time.Second))
}

// String is the threshold as written.
func (t Threshold) String() string { return t.Text }

// Parse reads one threshold (see Threshold for the syntax).
func Parse(s string) (Threshold, error) {
	text := strings.TrimSpace(s)
	t := Threshold{Text: text}
	if text == "" {
		return t, errors.New("empty threshold: want anomaly, p99>DURATION, flows<N/s or errors>N/s, each optionally followed by \"for DURATION\"")
	}
	if strings.EqualFold(text, string(Anomaly)) {
		t.Metric = Anomaly
		return t, nil
	}
	cond := text
	if i := strings.Index(strings.ToLower(text), " for "); i >= 0 {
		cond = strings.TrimSpace(text[:i])
		d, err := time.ParseDuration(strings.TrimSpace(text[i+5:]))
		if err != nil {
			return t, fmt.Errorf("threshold %q: for: %w", text, err)
		}
		if d <= 0 {
			return t, fmt.Errorf("threshold %q: for %s: must be positive", text, d)
		}
		t.For = d
	}
	i := strings.IndexAny(cond, "<>")
	if i < 0 {
		return t, fmt.Errorf("threshold %q: want METRIC>VALUE or METRIC<VALUE (or anomaly)", text)
	}
	t.Above = cond[i] == '>'
	t.Metric = Metric(strings.ToLower(strings.TrimSpace(cond[:i])))
	val := strings.TrimSpace(cond[i+1:])
	switch t.Metric {
	case P99:
		d, err := time.ParseDuration(val)
		if err != nil {
			return t, fmt.Errorf("threshold %q: p99 wants a duration (500ms): %w", text, err)
		}
		t.Value = float64(d) / float64(time.Millisecond)
	case Flows, Errors:
		v, err := strconv.ParseFloat(strings.TrimSuffix(val, "/s"), 64)
		if err != nil {
			return t, fmt.Errorf("threshold %q: %s wants a rate (100/s): %w", text, t.Metric, err)
		}
		t.Value = v
	default:
		return t, fmt.Errorf("threshold %q: unknown metric %q: want anomaly, p99, flows or errors", text, t.Metric)
	}
	if t.Value < 0 {
		return t, fmt.Errorf("threshold %q: value must not be negative", text)
	}
	return t, nil
}

// Second is what one second of a run's measured phase showed.
type Second struct {
	// At is the end of the second, from the start of the measured phase.
	At time.Duration
	// Flows and Errors counted in the second; P99MS of its flows (0: none).
	Flows, Errors int64
	P99MS         float64
	// Violations is the probe's violations so far.
	Violations int64
}

// Breach says which threshold was breached, and when.
type Breach struct {
	Threshold Threshold
	// At is when it was breached, from the start of the measured phase.
	At time.Duration
	// Reason is one line saying what was seen.
	Reason string
}

// Result is the breach as results.json records it.
func (b Breach) Result() results.Breach {
	return results.Breach{Threshold: b.Threshold.Text, AtSec: b.At.Seconds(), Reason: b.Reason}
}

// Watch evaluates thresholds on a run's seconds, in order. A Watch is
// not safe for concurrent use: one goroutine feeds it.
type Watch struct {
	ths    []Threshold
	streak []int
	fired  []bool
}

// NewWatch watches ths (Anomaly among them is answered by Violation).
func NewWatch(ths []Threshold) *Watch {
	return &Watch{ths: ths, streak: make([]int, len(ths)), fired: make([]bool, len(ths))}
}

// Observe feeds one second and returns the thresholds it breached (each
// threshold breaches once).
func (w *Watch) Observe(s Second) []Breach {
	var out []Breach
	for i, t := range w.ths {
		if w.fired[i] {
			continue
		}
		var v float64
		unit := "/s"
		switch t.Metric {
		case Anomaly:
			if s.Violations > 0 {
				w.fired[i] = true
				out = append(out, Breach{Threshold: t, At: s.At, Reason: fmt.Sprintf("%d probe violations by %.2f s", s.Violations, s.At.Seconds())})
			}
			continue
		case P99:
			if s.Flows == 0 {
				continue // no flow: nothing known of the latency
			}
			v, unit = s.P99MS, " ms"
		case Flows:
			v = float64(s.Flows)
		case Errors:
			v = float64(s.Errors)
		}
		if (t.Above && v > t.Value) || (!t.Above && v < t.Value) {
			w.streak[i]++
		} else {
			w.streak[i] = 0
		}
		if w.streak[i] >= t.seconds() {
			w.fired[i] = true
			span := "in the second"
			if n := t.seconds(); n > 1 {
				span = fmt.Sprintf("(last second) after %d s in a row", n)
			}
			out = append(out, Breach{Threshold: t, At: s.At,
				Reason: fmt.Sprintf("%s %.4g%s %s up to %.2f s", t.Metric, v, unit, span, s.At.Seconds())})
		}
	}
	return out
}

// Violation reports the probe's first violation, at at, to the anomaly
// thresholds: the breach, or false when none watches anomalies (or one
// already fired).
func (w *Watch) Violation(at time.Duration, what string) (Breach, bool) {
	for i, t := range w.ths {
		if t.Metric == Anomaly && !w.fired[i] {
			w.fired[i] = true
			return Breach{Threshold: t, At: at, Reason: fmt.Sprintf("probe violation at %.2f s: %s", at.Seconds(), what)}, true
		}
	}
	return Breach{}, false
}

// Check evaluates ths on a finished run: the rates and P99 on its
// per-second series, by the same rule as live; anomaly on its audit
// (every class, the probe's violations included).
func Check(run results.Run, ths []Threshold) []Breach {
	var out []Breach
	var rated []Threshold
	for _, t := range ths {
		if t.Metric != Anomaly {
			rated = append(rated, t)
			continue
		}
		if n := run.Audit.Count(); n > 0 {
			out = append(out, Breach{Threshold: t, At: time.Duration(run.DurationSec * float64(time.Second)),
				Reason: fmt.Sprintf("the audit found %d anomalies (%d probe violations)", n, run.Audit.ProbeViolations)})
		}
	}
	w := NewWatch(rated)
	for _, p := range run.Series {
		out = append(out, w.Observe(Second{At: time.Duration(p.Second) * time.Second, Flows: p.Flows, Errors: p.Errors, P99MS: p.FlowP99MS})...)
	}
	return out
}
