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
	mu            sync.Mutex
	hist          *hdrhistogram.Histogram // flow latency of the current second, µs
}

func newLive() *live { return &live{hist: newHist()} }

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
// P99 of the last second, errors, and the stock left available in MySQL
// (when conns.DB is set: the caller leaves it nil for a large catalog,
// where summing it every second would load the server under test).
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
			fmt.Fprintf(w, "\r%-12s %-7s %6s%s  flows/s %7d  p99 %8.2f ms  errors %6d%s ", name, PhaseLoad, el, of, flows-last, p99, l.errors.Load(), stock)
			last = flows
		}
	}()
	return func() { close(done); <-finished }
}
