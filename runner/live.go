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
	"github.com/stockbench/stockbench/servers"
)

// live keeps the figures of the progress line. Workers touch it once per
// flow; a nil *live ignores everything.
type live struct {
	flows, errors atomic.Int64
	// buyers counts journeys begun (the driver's count, shared).
	buyers *atomic.Int64
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

// report redraws one status line on w every second: elapsed, flows/s, flow
// P99 of the last second, errors, the stock left available in MySQL
// (when conns.DB is set: the caller leaves it nil for a large catalog,
// where summing it every second would load the server under test), the
// buyers begun, and the harness's own resident memory and CPU.
// The returned func stops it and ends the line.
func (l *live) report(w io.Writer, name string, conns servers.Conns, total time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t0 := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case <-tick.C:
			}
			now := time.Now()
			flows := l.flows.Load()
			l.mu.Lock()
			p99 := float64(l.hist.ValueAtQuantile(99)) / 1000
			l.hist.Reset()
			l.mu.Unlock()
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
				name, PhaseLoad, el, of, flows-last, p99, l.errors.Load(), stock, l.buyers.Load(), rssMB(), l.cpuPct(now))
			last = flows
		}
	}()
	return func() { close(done); <-finished }
}
