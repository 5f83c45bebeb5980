package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/servers"
)

// live keeps the figures of the progress line and of the live thresholds.
// Workers touch it once per flow; a nil *live ignores everything.
type live struct {
	flows, errors atomic.Int64
	// buyers counts journeys begun (the driver's count, shared).
	buyers *atomic.Int64
	// from is the start of the measured phase (Unix ns; 0 until known).
	from atomic.Int64
	// lastCPU, lastAt are the harness CPU reading of the previous line.
	lastCPU time.Duration
	lastAt  time.Time
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram // flow latency of the current second, µs
}

func newLive(buyers *atomic.Int64) *live {
	return &live{hist: newHist(), buyers: buyers, lastCPU: selfCPU(), lastAt: time.Now()}
}

// cpuPct is the harness's CPU (% of one core) since the last line; only
// the reporting goroutine calls it.
func (l *live) cpuPct(now time.Time) float64 {
	c := selfCPU()
	pct := 0.0
	if dt := now.Sub(l.lastAt); dt > 0 {
		pct = 100 * float64(c-l.lastCPU) / float64(dt)
	}
	l.lastCPU, l.lastAt = c, now
	return pct
}

func (l *live) flow(lat time.Duration) {
	if l == nil {
		return
	}
	l.flows.Add(1)
	l.mu.Lock()
	_ = l.hist.RecordValue(min(max(lat.Microseconds(), histMin), histMax))
	l.mu.Unlock()
}

func (l *live) errorSeen() {
	if l != nil {
		l.errors.Add(1)
	}
}

// measuredFrom tells the line where the measured phase starts.
func (l *live) measuredFrom(t time.Time) { l.from.Store(t.UnixNano()) }

// report redraws one status line on w every second (w nil: no line):
// elapsed, flows/s, flow P99 of the last second, errors, the stock left
// available in MySQL (when conns.DB is set: the caller leaves it nil for a
// large catalog, where summing it every second would load the server
// under test), the buyers begun, and the harness's own resident memory
// and CPU. Each second of the measured phase (the line's ticks from half
// a second past its start) is also handed to each (nil: none), on the
// same goroutine.
// The returned func stops it and ends the line; it may be called again.
func (l *live) report(w io.Writer, name string, conns servers.Conns, total time.Duration, each func(observe.Second)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t0 := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last, lastErr int64
		for {
			select {
			case <-done:
				if w != nil {
					fmt.Fprintln(w)
				}
				return
			case <-tick.C:
			}
			now := time.Now()
			flows, errs := l.flows.Load(), l.errors.Load()
			l.mu.Lock()
			p99 := float64(l.hist.ValueAtQuantile(99)) / 1000
			l.hist.Reset()
			l.mu.Unlock()
			perSec := flows - last
			// A tick less than half a second past the start of the measured
			// phase closes a second of warm-up: not handed on.
			if from := l.from.Load(); each != nil && from != 0 && now.Sub(time.Unix(0, from)) >= time.Second/2 {
				each(observe.Second{At: now.Sub(time.Unix(0, from)), Flows: perSec, Errors: errs - lastErr, P99MS: p99})
			}
			last, lastErr = flows, errs
			if w == nil {
				continue
			}
			stock := "" // a full scan of the inventory: only on a small catalog
			if conns.DB != nil {
				n, _ := inventory.AvailableMySQL(context.Background(), conns.DB)
				stock = fmt.Sprintf("  stock %8d", n)
			}
			el := time.Since(t0).Truncate(time.Second)
			of := ""
			if total > 0 {
				of = "/" + total.String()
			}
			fmt.Fprintf(w, "\r%-12s %-7s %6s%s  flows/s %7d  p99 %8.2f ms  errors %6d%s  buyers %8d  harness %5.0f MB %4.0f%% CPU ",
				name, PhaseLoad, el, of, perSec, p99, errs, stock, l.buyers.Load(), rssMB(), l.cpuPct(now))
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}
