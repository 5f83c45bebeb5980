package analysis

import (
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
)

// CurveStop is why a step of a latency curve did not hold the SLO; empty
// when it held.
type CurveStop string

const (
	CurveHeld     CurveStop = ""
	CurveNoFlows  CurveStop = "no-flows"
	CurveErrors   CurveStop = "errors"
	CurveDropped  CurveStop = "dropped"
	CurveP99      CurveStop = "p99"
	CurveUnsafe   CurveStop = "unsafe"
	CurveUnproven CurveStop = "unproven"
)

// CurveStep is the verdict on one rate of a curve: whether the run held
// the SLO, and the figures behind a stop.
type CurveStep struct {
	Stop    CurveStop
	Errors  int64
	Dropped int64
	P99MS   float64
	SLOMS   float64
	// Safety is the run's own verdict: a rate held by breaking a rule
	// (or unproven) is no rate held.
	Safety Safety
}

// Held reports whether the step held the SLO.
func (s CurveStep) Held() bool { return s.Stop == CurveHeld }

// Why says in words why the step stopped the curve ("" when it held).
func (s CurveStep) Why() string {
	switch s.Stop {
	case CurveNoFlows:
		return "no completed flows"
	case CurveErrors:
		return fmt.Sprintf("%d errors", s.Errors)
	case CurveDropped:
		return fmt.Sprintf("%d arrivals dropped", s.Dropped)
	case CurveP99:
		return fmt.Sprintf("P99 %.1f ms > %.0f ms", s.P99MS, s.SLOMS)
	case CurveUnsafe:
		return "UNSAFE: " + s.Safety.Why()
	case CurveUnproven:
		return "unproven: " + s.Safety.Why()
	}
	return ""
}

// CurveStepOf judges one curve run against the SLO (flow P99 in ms): it
// holds only when it is safe, completed flows, had no error and dropped no
// arrival, and its flow P99 is within the bound.
func CurveStepOf(run results.Run, sloMS float64) CurveStep {
	s := CurveStep{P99MS: run.LatencyMS["flow"].P99, SLOMS: sloMS, Dropped: run.Harness.OpenDropped, Safety: SafetyOf([]results.Run{run})}
	for _, m := range run.Counts {
		for cls, n := range m {
			if inventory.Outcome(cls).Failed() {
				s.Errors += n
			}
		}
	}
	switch {
	case s.Safety.Kind == Unsafe:
		s.Stop = CurveUnsafe
	case s.Safety.Kind == Unproven:
		s.Stop = CurveUnproven
	case run.Flows == 0:
		s.Stop = CurveNoFlows
	case s.Errors > 0:
		s.Stop = CurveErrors
	case s.Dropped > 0:
		s.Stop = CurveDropped
	case s.P99MS > sloMS:
		s.Stop = CurveP99
	}
	return s
}

// CurvePoint is one strategy's place on the curve: the highest offered
// rate held before the first stop, and that stop.
type CurvePoint struct {
	Strategy string
	// MaxRate is the highest rate (arrivals/s) held before the first stop;
	// 0 when even the lowest did not hold.
	MaxRate float64
	// StoppedAt is the first rate that did not hold (0: every rate held),
	// Stop why.
	StoppedAt float64
	Stop      CurveStep
}

// Curve is the latency curve's verdict: per strategy, in order.
type Curve struct {
	SLOP99MS float64
	Points   []CurvePoint
}

// CurveOf judges the runs of a curve (a sweep of the offered rate) of
// each strategy named, in that order, against the SLO.
func CurveOf(r *results.Results, strategies []string, sloMS float64) *Curve {
	c := &Curve{SLOP99MS: sloMS}
	rates, _, _ := SweepX(r.Sweep)
	for _, name := range strategies {
		pt := CurvePoint{Strategy: name}
		for _, run := range r.Runs {
			if run.Strategy != name || run.Param != results.ParamRate {
				continue
			}
			rate, ok := rates[run.Value]
			if !ok {
				continue
			}
			if step := CurveStepOf(run, sloMS); !step.Held() {
				if pt.StoppedAt == 0 {
					pt.StoppedAt, pt.Stop = rate, step
				}
				continue
			}
			if pt.StoppedAt == 0 {
				pt.MaxRate = rate
			}
		}
		c.Points = append(c.Points, pt)
	}
	return c
}

// Record is the curve as results.json keeps it.
func (c *Curve) Record() *results.Curve {
	out := &results.Curve{SLOP99MS: c.SLOP99MS}
	for _, p := range c.Points {
		out.Strategies = append(out.Strategies, results.CurvePoint{Strategy: p.Strategy, MaxRate: p.MaxRate, StoppedAt: p.StoppedAt, Why: p.Stop.Why()})
	}
	return out
}
