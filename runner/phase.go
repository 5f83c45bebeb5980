package runner

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/results"
)

// Phase names of a run, in order: what results.json's runs[].phases and
// runs[].incomplete name.
const (
	PhaseSetup  = "setup"
	PhaseLoad   = "load"
	PhaseSettle = "settle"
	PhaseAudit  = "audit"
	// PhaseAuditEndOfLoad is the audit when the load ends, before settle.
	PhaseAuditEndOfLoad = "audit_end_of_load"
)

// progressAfter is how long a phase runs before its progress line shows:
// a short phase draws nothing.
const progressAfter = 2 * time.Second

// phases times the phases of one run and, when w is set, draws a progress
// line for each one that runs longer than progressAfter: the phase, work
// done of its total, its rate and an ETA. One phase runs at a time; the
// counters of the running phase may be updated from any goroutine.
type phases struct {
	w    io.Writer
	name string // the strategy
	list []results.Phase
}

// phase is one running phase.
type phase struct {
	p           *phases
	name, unit  string
	from        time.Time
	done, total atomic.Int64
	stop        chan struct{}
	drawn       sync.WaitGroup
}

// start begins a phase of total units of work (0: unknown).
func (ps *phases) start(name, unit string, total int64) *phase {
	ph := &phase{p: ps, name: name, unit: unit, from: time.Now(), stop: make(chan struct{})}
	ph.total.Store(total)
	if ps.w != nil {
		ph.drawn.Add(1)
		go ph.draw()
	}
	return ph
}

// set records progress: done units of total (total 0 keeps the last).
func (ph *phase) set(done, total int64) {
	ph.done.Store(done)
	if total > 0 {
		ph.total.Store(total)
	}
}

// add records n more units done.
func (ph *phase) add(n int64) { ph.done.Add(n) }

// end closes the phase and records it; incomplete marks a phase cut by its
// deadline (or an error) before it finished.
func (ph *phase) end(incomplete bool) results.Phase {
	close(ph.stop)
	ph.drawn.Wait()
	el := time.Since(ph.from)
	r := results.Phase{Name: ph.name, Sec: el.Seconds(), Unit: ph.unit, Done: ph.done.Load(), Total: ph.total.Load(), Incomplete: incomplete}
	if r.Done > 0 && el > 0 {
		r.PerSec = float64(r.Done) / el.Seconds()
	}
	ph.p.list = append(ph.p.list, r)
	writeHeapProfile(ph.p.name, ph.name)
	return r
}

// draw redraws the phase's line every second once it has run for
// progressAfter, and ends the line when the phase ends.
func (ph *phase) draw() {
	defer ph.drawn.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	drew := false
	for {
		select {
		case <-ph.stop:
			if drew {
				fmt.Fprintln(ph.p.w)
			}
			return
		case <-tick.C:
		}
		el := time.Since(ph.from)
		if el < progressAfter {
			continue
		}
		drew = true
		fmt.Fprintf(ph.p.w, "\r%s ", ph.line(el))
	}
}

// line is the progress line: strategy, phase, elapsed, done/total, rate
// and ETA (the last three when the phase counts its work).
func (ph *phase) line(el time.Duration) string {
	done, total := ph.done.Load(), ph.total.Load()
	s := fmt.Sprintf("%-12s %-7s %6s", ph.p.name, ph.name, el.Truncate(time.Second))
	if done == 0 && total == 0 {
		return s
	}
	rate := float64(done) / el.Seconds()
	s += fmt.Sprintf("  %d/%d %s  %.0f/s", done, total, ph.unit, rate)
	if total > done && rate > 0 {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		s += "  ETA " + eta.Round(time.Second).String()
	}
	return s
}
