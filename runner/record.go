package runner

import (
	"context"
	"errors"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/reports"
)

// Latency histograms record microseconds from 1 µs to 5 minutes with three
// significant digits.
const (
	histMin = 1
	histMax = int64(5 * time.Minute / time.Microsecond)
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, 3) }

// recorder holds one worker's measurements; it is not shared, so it needs no
// lock. Recorders are merged when the run ends.
type recorder struct {
	hist     map[string]*hdrhistogram.Histogram
	counts   map[string]map[string]int64
	journeys map[string]int64
	acks     []inventory.Ack
	errs     []string
	flows    int64
	attempts int64
}

func newRecorder() *recorder {
	return &recorder{hist: map[string]*hdrhistogram.Histogram{}, counts: map[string]map[string]int64{}, journeys: map[string]int64{}}
}

func (r *recorder) latency(name string, d time.Duration) {
	h := r.hist[name]
	if h == nil {
		h = newHist()
		r.hist[name] = h
	}
	_ = h.RecordValue(min(max(d.Microseconds(), histMin), histMax))
}

func (r *recorder) outcome(op, class string) {
	m := r.counts[op]
	if m == nil {
		m = map[string]int64{}
		r.counts[op] = m
	}
	m[class]++
}

const maxErrorTexts = 10

func (r *recorder) merge(o *recorder) {
	for name, h := range o.hist {
		if r.hist[name] == nil {
			r.hist[name] = newHist()
		}
		r.hist[name].Merge(h)
	}
	for op, m := range o.counts {
		if r.counts[op] == nil {
			r.counts[op] = map[string]int64{}
		}
		for cls, n := range m {
			r.counts[op][cls] += n
		}
	}
	for k, n := range o.journeys {
		r.journeys[k] += n
	}
	r.acks = append(r.acks, o.acks...)
	for _, e := range o.errs {
		if len(r.errs) < maxErrorTexts && !contains(r.errs, e) {
			r.errs = append(r.errs, e)
		}
	}
	r.flows += o.flows
	r.attempts += o.attempts
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func percentiles(h *hdrhistogram.Histogram) reports.Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return reports.Percentiles{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return reports.Percentiles{
		Count: h.TotalCount(),
		P50:   ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// Classify names an operation's outcome class for counts and error series.
func Classify(err error) string {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, inventory.ErrOutOfStock):
		return "out_of_stock"
	case errors.Is(err, inventory.ErrConflict):
		return "conflict"
	case errors.Is(err, inventory.ErrAlreadyFinal):
		return "already_final"
	case errors.Is(err, inventory.ErrUnknownOrder):
		return "unknown_order"
	case errors.Is(err, inventory.ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &me) && me.Number == 1213:
		return "deadlock"
	case errors.As(err, &me) && me.Number == 1205:
		return "lock_wait_timeout"
	default:
		return "error"
	}
}
