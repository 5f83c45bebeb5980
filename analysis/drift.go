package analysis

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stockbench/stockbench/results"
)

// DriftMinWindowSec is the shortest first and last window (a sixth of the
// measured phase: a measured phase of 6 minutes) whose change is judged: a
// window of seconds moves by 10 % by chance, and a 10 s run's first and
// last windows are nearly the same seconds.
const DriftMinWindowSec = 60

// RelayVerdict is how an outbox relay kept up over a timed run, from the
// age of the oldest unapplied event sampled through the load.
type RelayVerdict struct {
	// FallingBehind: the age in the last window is past 2 s and more than
	// twice the first window's.
	FallingBehind bool
	// FirstMaxS and LastMaxS are the largest age sampled in the first and
	// last windows, WorstS the largest of the measured phase, in seconds;
	// WindowSec and EverySec the window and sampling period.
	FirstMaxS, LastMaxS, WorstS float64
	WindowSec, EverySec         float64
}

// Sentence says the verdict in words, for every renderer.
func (v RelayVerdict) Sentence() string {
	if v.FallingBehind {
		return fmt.Sprintf("relay falling behind: the oldest unapplied event's age grew from at most %.1f s in the first %.0f s to %.1f s in the last",
			v.FirstMaxS, v.WindowSec, v.LastMaxS)
	}
	return fmt.Sprintf("relay kept up: the oldest unapplied event was at most %.1f s old in any sample of the measured phase (every %.0f s)",
		v.WorstS, v.EverySec)
}

// CostCause is what a change in flows/s followed, as CostOf reads it.
type CostCause string

const (
	// CauseNone: the figures point at nothing in particular.
	CauseNone CostCause = ""
	// CauseMachineSlower / Faster: the same reference work took at least
	// half as much more (less) CPU as a flow did.
	CauseMachineSlower CostCause = "machine-slower"
	CauseMachineFaster CostCause = "machine-faster"
	// CauseStolenMore / Less: the hypervisor's share of the cores moved 5
	// points or more the way the flows did not.
	CauseStolenMore CostCause = "stolen-more"
	CauseStolenLess CostCause = "stolen-less"
	// CauseShared: every process's cost per flow moved alike.
	CauseShared CostCause = "shared"
	// CauseOwnCost: the run's own cost per flow changed (most in Named).
	CauseOwnCost CostCause = "own-cost"
	// CauseLessCPU: each flow cost the same CPU; the run got less of it.
	CauseLessCPU CostCause = "less-cpu"
)

// ProcessChange is one process's change in CPU per flow, first window to
// last, in percent.
type ProcessChange struct {
	Process   string
	ChangePct float64
}

// CostVerdict lays a change in flows/s of 10 % or more beside how the CPU
// each flow cost moved, process by process, and the reference work.
type CostVerdict struct {
	FlowsChangePct, WindowSec float64
	// CPUChangePct is the change of the processes' summed CPU per flow;
	// Processes each one's, by name.
	CPUChangePct float64
	Processes    []ProcessChange
	// Named is the process whose CPU per flow moved most in ms.
	Named string
	// MachineFirst and MachineLast are how the cores spent each window
	// (absent without /proc/stat).
	MachineFirst, MachineLast *results.MachineShare
	// RefChangePct is the reference work's change (nil: not sampled).
	RefChangePct *float64
	// HistoryFirst/Last and DiskReadsFirst/Last are MySQL's growth, named
	// when MySQL's own cost grew.
	HistoryFirst, HistoryLast     int64
	DiskReadsFirst, DiskReadsLast float64
	Cause                         CostCause
}

// Sentence says the verdict in words, for every renderer.
func (v CostVerdict) Sentence() string {
	var parts []string
	for _, p := range v.Processes {
		parts = append(parts, fmt.Sprintf("%s %+.0f %%", p.Process, p.ChangePct))
	}
	s := fmt.Sprintf("flows/s %+.0f %% from the first %.0f s to the last; CPU per flow %+.0f %% (%s)",
		v.FlowsChangePct, v.WindowSec, v.CPUChangePct, strings.Join(parts, ", "))
	if f, l := v.MachineFirst, v.MachineLast; f != nil && l != nil {
		s += fmt.Sprintf("; the machine's cores: kernel %.0f → %.0f %%, stolen by the hypervisor %.1f → %.1f %%, idle %.0f → %.0f %%",
			f.KernelPct, l.KernelPct, f.StealPct, l.StealPct, f.IdlePct, l.IdlePct)
	}
	if v.RefChangePct == nil {
		return s
	}
	s += fmt.Sprintf("; the same reference work %+.0f %% CPU", *v.RefChangePct)
	switch v.Cause {
	case CauseMachineSlower:
		return s + ": the machine itself did the same work slower"
	case CauseMachineFaster:
		return s + ": the machine itself did the same work faster"
	case CauseStolenMore:
		return s + ": the hypervisor gave more of the machine's cores to other guests"
	case CauseStolenLess:
		return s + ": the hypervisor gave less of the machine's cores to other guests"
	case CauseShared:
		return s + ": every process's cost per flow moved alike, so not one store's growth but what they share:" +
			" the machine in ways a CPU loop does not measure (memory, system calls, the hypervisor), or the batching that comes with the load"
	case CauseOwnCost:
		s += fmt.Sprintf(": the run's own cost per flow changed, most in %s", v.Named)
		if v.Named == "mysql" && (v.HistoryFirst > 0 || v.HistoryLast > 0) {
			// What in MySQL grew with it: the unpurged history, and the
			// pages the buffer pool no longer held.
			s += fmt.Sprintf(" (InnoDB history list %d → %d, buffer-pool disk reads %.1f → %.1f/s)",
				v.HistoryFirst, v.HistoryLast, v.DiskReadsFirst, v.DiskReadsLast)
		}
		return s
	case CauseLessCPU:
		return s + ": each flow cost about the same CPU, the run got less of it (other work on the machine, or waits)"
	}
	return s
}

// DriftVerdict is the analysis of one timed run's drift: how its relay
// kept up, and what a change in its flows/s followed.
type DriftVerdict struct {
	Strategy, Scenario, Param, Value string
	Repeat                           int
	// Judged: the run's windows are DriftMinWindowSec or more, so a
	// change between them means something; shorter runs' drift is not
	// reported, except a relay falling behind.
	Judged bool
	Relay  *RelayVerdict
	Cost   *CostVerdict
}

// driftVerdicts analyses the drift of every run that has one.
func driftVerdicts(runs []results.Run) []DriftVerdict {
	var out []DriftVerdict
	for _, run := range runs {
		d := run.Drift
		if d == nil {
			continue
		}
		out = append(out, DriftVerdict{Strategy: run.Strategy, Scenario: run.Scenario, Param: run.Param, Value: run.Value, Repeat: run.Repeat,
			Judged: d.WindowSec >= DriftMinWindowSec, Relay: RelayOf(d), Cost: CostOf(d)})
	}
	return out
}

// RelayOf is the relay's verdict on a drift, nil for a strategy without a
// relay (no lag sampled).
func RelayOf(d *results.Drift) *RelayVerdict {
	if d.First.RelayLagMaxMS == nil || d.Last.RelayLagMaxMS == nil {
		return nil
	}
	var worst float64
	for _, p := range d.Points {
		if p.RelayLagMS != nil && p.Second >= 0 {
			worst = max(worst, *p.RelayLagMS)
		}
	}
	first, last := *d.First.RelayLagMaxMS, *d.Last.RelayLagMaxMS
	return &RelayVerdict{FallingBehind: last > 2000 && last > 2*first, FirstMaxS: first / 1000, LastMaxS: last / 1000,
		WorstS: worst / 1000, WindowSec: d.WindowSec, EverySec: d.EverySec}
}

// CostOf lays a change in flows/s of 10 % or more, first window to last,
// beside the CPU per flow of each process and the reference work, and says
// what that points at: the machine (the fixed work slowed at least half as
// much as a flow's CPU grew), the run's own cost (CPU per flow grew, the
// reference did not), or neither (each flow cost the same CPU: the run got
// less of it, or waited); likewise for a machine that sped up, or the
// hypervisor (the share of the cores it gave other guests moved 5 points
// or more the flows' way). nil when the flows held, or the windows lack
// the figures.
func CostOf(d *results.Drift) *CostVerdict {
	f, l := d.First, d.Last
	if math.Abs(d.FlowsChangePct) < 10 || len(f.CPUMSPerFlow) == 0 || len(l.CPUMSPerFlow) == 0 {
		return nil
	}
	var names []string
	var sf, sl float64
	for k, v := range f.CPUMSPerFlow {
		if w, ok := l.CPUMSPerFlow[k]; ok {
			names = append(names, k)
			sf, sl = sf+v, sl+w
		}
	}
	if len(names) == 0 || sf == 0 {
		return nil
	}
	slices.Sort(names)
	v := &CostVerdict{FlowsChangePct: d.FlowsChangePct, WindowSec: d.WindowSec, CPUChangePct: results.ChangePct(sf, sl),
		MachineFirst: f.Machine, MachineLast: l.Machine, HistoryFirst: f.HistoryLength, HistoryLast: l.HistoryLength,
		DiskReadsFirst: f.DiskReadsPerSec, DiskReadsLast: l.DiskReadsPerSec}
	cpu := v.CPUChangePct
	// The process that moved furthest the way the whole did, and how far
	// the one that moved least went: every process moving alike points at
	// what they share, not at one store's growth.
	sign := 1.0
	if cpu < 0 {
		sign = -1
	}
	// The process named is the one whose CPU per flow moved most in ms,
	// not in percent: a process with a fixed cost a second and hardly any
	// a flow (Redis beside batched) moves by the fall in flows alone.
	worst, least, most := math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, k := range names {
		c := results.ChangePct(f.CPUMSPerFlow[k], l.CPUMSPerFlow[k])
		v.Processes = append(v.Processes, ProcessChange{k, c})
		worst, least = max(worst, sign*c), min(least, sign*c)
		if ms := sign * (l.CPUMSPerFlow[k] - f.CPUMSPerFlow[k]); ms > most {
			most, v.Named = ms, k
		}
	}
	if f.RefCPUMS <= 0 || l.RefCPUMS <= 0 {
		return v
	}
	ref := results.ChangePct(f.RefCPUMS, l.RefCPUMS)
	v.RefChangePct = &ref
	switch {
	case ref >= 10 && ref >= cpu/2:
		v.Cause = CauseMachineSlower
	case ref <= -10 && ref <= cpu/2:
		v.Cause = CauseMachineFaster
	case stolenMore(f.Machine, l.Machine, d.FlowsChangePct):
		v.Cause = CauseStolenLess
		if d.FlowsChangePct < 0 {
			v.Cause = CauseStolenMore
		}
	case math.Abs(cpu) >= 10 && len(names) > 1 && least >= 0.7*worst:
		v.Cause = CauseShared
	case math.Abs(cpu) >= 10:
		v.Cause = CauseOwnCost
	case d.FlowsChangePct < 0:
		v.Cause = CauseLessCPU
	}
	return v
}

// stolenMore says the share of the cores the hypervisor took moved by 5
// points or more the way that explains the flows' change: more stolen as
// they fell, less as they rose.
func stolenMore(f, l *results.MachineShare, flowsPct float64) bool {
	if f == nil || l == nil {
		return false
	}
	d := l.StealPct - f.StealPct
	return flowsPct < 0 && d >= 5 || flowsPct > 0 && d <= -5
}
