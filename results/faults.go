package results

import (
	"slices"
	"strings"

	"github.com/stockbench/stockbench/audit"
)

// FaultClass names what a run's faults were, for the fault matrix: a
// process fault by target and kind (redis-pause, mysql-restart), a network
// fault by kind (latency, reset, partition: one column whatever the store),
// app-crash; several joined with "+". Empty for a run without faults.
func FaultClass(run Run) string {
	var parts []string
	for _, f := range run.Faults {
		c := f.Kind
		if f.Kind == "pause" || f.Kind == "restart" {
			c = f.Target + "-" + f.Kind
		}
		if !slices.Contains(parts, c) {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "+")
}

// AllApplied says whether every fault of the run's plan took effect.
func AllApplied(run Run) bool {
	for _, f := range run.Faults {
		if !f.Applied {
			return false
		}
	}
	return true
}

// FaultCell is one strategy under one fault class, over its runs (seeds,
// repeats): the worst of each figure.
type FaultCell struct {
	Runs int
	// Anomalies sums every UNSAFE anomaly class over the runs; Worst names the
	// class with the highest count in a single run, WorstCount that count.
	Anomalies  int64
	Worst      string
	WorstCount int64
	// OutageSec is the most seconds without a completed flow in one run;
	// RecoverSec the slowest recovery (-1: one run never recovered; -2:
	// no pre-fault rate to recover to).
	OutageSec  int
	RecoverSec float64
	// UnitsLost and UnitsResold are the most in one run.
	UnitsLost, UnitsResold int64
	// ErrorsIn and ErrorsOut are failed operations inside and outside the
	// fault windows, summed.
	ErrorsIn, ErrorsOut int64
	// FaultErrors are the timeline's errors (a fault that failed to apply).
	FaultErrors []string
	// NotApplied counts the runs in which a fault of the plan never took
	// effect (the load ended first, or applying it failed): such a run
	// says nothing about the fault.
	NotApplied int
}

// FaultMatrix is strategies × fault classes over the runs that had faults.
type FaultMatrix struct {
	Strategies, Classes []string
	Cells               map[[2]string]*FaultCell
}

// Cell is the cell of strategy under class, nil when not run.
func (m FaultMatrix) Cell(strategy, class string) *FaultCell {
	return m.Cells[[2]string{strategy, class}]
}

// Faults builds the fault matrix of r; it is empty when no run had faults.
func Faults(r *Results) FaultMatrix {
	m := FaultMatrix{Cells: map[[2]string]*FaultCell{}}
	for _, run := range r.Runs {
		class := FaultClass(run)
		if class == "" {
			continue
		}
		if !slices.Contains(m.Strategies, run.Strategy) {
			m.Strategies = append(m.Strategies, run.Strategy)
		}
		if !slices.Contains(m.Classes, class) {
			m.Classes = append(m.Classes, class)
		}
		k := [2]string{run.Strategy, class}
		c := m.Cells[k]
		if c == nil {
			c = &FaultCell{RecoverSec: -2}
			m.Cells[k] = c
		}
		c.Runs++
		for _, ac := range audit.Classes {
			if ac.Severity != audit.Unsafe {
				continue
			}
			n := ac.Of(run.Audit)
			c.Anomalies += n
			if n > c.WorstCount {
				c.Worst, c.WorstCount = ac.Title, n
			}
		}
		if !AllApplied(run) {
			c.NotApplied++
		}
		for _, f := range run.Faults {
			if f.Error != "" && !slices.Contains(c.FaultErrors, f.Error) {
				c.FaultErrors = append(c.FaultErrors, f.Spec+": "+f.Error)
			}
		}
		im := run.FaultImpact
		if im == nil {
			continue
		}
		c.OutageSec = max(c.OutageSec, im.OutageSec)
		if im.RecoverSec != nil {
			switch rs := *im.RecoverSec; {
			case rs < 0 || c.RecoverSec == -1:
				c.RecoverSec = -1
			default:
				c.RecoverSec = max(c.RecoverSec, rs)
			}
		}
		c.UnitsLost = max(c.UnitsLost, im.UnitsLost)
		c.UnitsResold = max(c.UnitsResold, im.UnitsResold)
		for _, n := range im.ErrorsInWindow {
			c.ErrorsIn += n
		}
		for _, n := range im.ErrorsOutside {
			c.ErrorsOut += n
		}
	}
	return m
}
