package runner

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// Stores are what a run under faults needs besides its pools: where the
// servers answer (the proxy of network faults is put in front of them) and
// how to pause, kill and restart them (nil: no process faults, as on the
// external backend).
type Stores struct {
	Endpoints servers.Endpoints
	servers.Conns
	Faulter servers.Faulter
}

// hasAppCrash reports whether a plan crashes the service.
func hasAppCrash(p faults.Plan) bool {
	for _, f := range p {
		if f.Kind == faults.AppCrash {
			return true
		}
	}
	return false
}

// localSwitch is the local-fail fault's switch. It counts the reads that
// found it on: a strategy without a local table (or one running in service
// processes, which do not share this switch) never reads it, and a fault
// nobody felt must not be reported as applied.
type localSwitch struct {
	on   atomic.Bool
	felt atomic.Int64
}

// Store turns the switch on or off.
func (l *localSwitch) Store(on bool) { l.on.Store(on) }

// Load is strategies.Config.LocalFailing.
func (l *localSwitch) Load() bool {
	on := l.on.Load()
	if on {
		l.felt.Add(1)
	}
	return on
}

// exercised marks a local-fail fault of fs that nobody felt as not
// applied, with the reason.
func (l *localSwitch) exercised(fs []results.FaultEvent) []results.FaultEvent {
	if l.felt.Load() > 0 {
		return fs
	}
	for i, f := range fs {
		if f.Applied && f.Kind == string(faults.LocalFail) {
			fs[i].Applied = false
			fs[i].Error = "not applied: no local table was written while it failed (the strategy has none, or it runs in service processes)"
		}
	}
	return fs
}

// timeline turns the injector's events into results.json's fault timeline.
func timeline(events []faults.Event) []results.FaultEvent {
	out := make([]results.FaultEvent, len(events))
	for i, e := range events {
		out[i] = results.FaultEvent{Spec: e.Fault.String(), Kind: string(e.Fault.Kind), Target: string(e.Fault.Target),
			StartSec: e.Start.Seconds(), EndSec: e.End.Seconds(), Applied: !e.Applied.IsZero(), Error: e.Err}
		if !out[i].Applied {
			out[i].StartSec, out[i].EndSec = e.Fault.At.Seconds(), e.Fault.End().Seconds()
		}
	}
	return out
}

// windowGrace extends each fault window past the fault's end: the second
// in which clients find the store back (reconnect, retry) belongs to it.
const windowGrace = time.Second

// impact measures what the faults did, from the per-second buckets of the
// measured phase and the settled audit.
func impact(series []bucket, failedAt []map[string]int64, fs []results.FaultEvent, settled results.Run) *results.FaultImpact {
	im := &results.FaultImpact{ErrorsInWindow: map[string]int64{}, ErrorsOutside: map[string]int64{},
		UnitsResold: settled.Audit.OversoldUnits, UnitsLost: settled.Audit.LeakedUnits}
	var first, last float64 = math.Inf(1), math.Inf(-1)
	var wins [][2]float64
	for _, f := range fs {
		if !f.Applied {
			continue
		}
		first, last = math.Min(first, f.StartSec), math.Max(last, f.EndSec)
		wins = append(wins, [2]float64{f.StartSec, f.EndSec + windowGrace.Seconds()})
	}
	inside := func(i int) bool {
		for _, w := range wins {
			if float64(i+1) > w[0] && float64(i) < w[1] {
				return true
			}
		}
		return false
	}
	for i, b := range series {
		if b.flows == 0 {
			im.OutageSec++
			if !inside(i) {
				im.OutageOutsideSec++
			}
		}
	}
	for i, m := range failedAt {
		dst := im.ErrorsOutside
		if inside(i) {
			dst = im.ErrorsInWindow
		}
		for cls, n := range m {
			dst[cls] += n
		}
	}
	if len(wins) == 0 {
		return im
	}
	// The pre-fault rate: whole seconds before the first fault.
	pre := int(math.Floor(first))
	if pre > 0 && pre <= len(series) {
		var n int64
		for _, b := range series[:pre] {
			n += b.flows
		}
		im.PreFaultTPS = float64(n) / float64(pre)
	}
	if im.PreFaultTPS > 0 {
		rec := -1.0
		for i := max(0, int(math.Floor(last))); i < len(series); i++ {
			if float64(series[i].flows) >= im.PreFaultTPS/2 {
				rec = math.Max(0, float64(i+1)-last)
				break
			}
		}
		im.RecoverSec = &rec
	}
	return im
}
