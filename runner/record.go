package runner

import (
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
)

// Latency histograms record microseconds from 1 µs to 5 minutes with three
// significant digits.
const (
	histMin = 1
	histMax = int64(5 * time.Minute / time.Microsecond)
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, 3) }

// recorder holds the measurements of the workers or buyers striped onto it
// (see stripes); its methods lock it, so a bounded set of recorders serves
// any number of buyers. Recorders are merged when the run ends. Only operations that start
// inside the measured window [from, to) are timed and counted (warm-up and
// the drain after the end are not). The acks the audit checks are kept by
// the ledger (on disk), not here.
type recorder struct {
	mu       sync.Mutex
	from, to time.Time // zero to: no upper bound
	hist     map[string]*hdrhistogram.Histogram
	counts   map[string]map[string]int64
	journeys map[string]int64
	// units counts the units each acknowledged operation moved, by
	// movement (results.Movements: reserved, sold, released, refunded).
	units    map[string]int64
	errs     []string
	flows    int64
	attempts int64
	series   []bucket // per second of the measured window
	// failedAt counts failed operations by outcome class per second of the
	// measured window in which they ended (when the client saw the
	// failure): an operation a fault caught in flight fails inside the
	// fault's window even if it started before.
	failedAt []map[string]int64
	// sale, when set (fixed scenarios), keeps the sale's own figures.
	sale *sale
	// lat holds the folded flow latencies of seconds before sealed (shared
	// by a run's stripes); series[i].flowLat the young ones (latency.go).
	lat    *latStore
	sealed int
	// others are the stores of the recorders merged into this one, each
	// once, read into lat only when asked (latencies): until then their
	// other stripes may still fold into them.
	others []*latStore
}

// bucket is one second of the time series.
type bucket struct {
	flows, attempts, errors int64
	flowLat                 []int32          // µs, until the second is folded into lat
	failed                  map[string]int64 // failed operations by outcome class
}

func newRecorder(from, to time.Time) *recorder {
	return &recorder{from: from, to: to, hist: map[string]*hdrhistogram.Histogram{},
		counts: map[string]map[string]int64{}, journeys: map[string]int64{}, units: map[string]int64{}, lat: &latStore{}}
}

// in reports whether an operation started at t is measured.
func (r *recorder) in(t time.Time) bool {
	return !t.Before(r.from) && (r.to.IsZero() || t.Before(r.to))
}

// bucketAt returns the series bucket of time t (inside the window).
func (r *recorder) bucketAt(t time.Time) *bucket {
	i := max(0, int(t.Sub(r.from)/time.Second))
	for len(r.series) <= i {
		r.series = append(r.series, bucket{})
	}
	return &r.series[i]
}

// flow accounts one completed reserve+confirm flow whose confirm started at
// confirmAt and whose latency (reserve + confirm, think time excluded; in
// open loop from the arrival's intended start) is lat. This is the only
// place a flow is counted: it goes into the count, the flow histogram and
// the series together, or nowhere, so flows = latency_ms.flow.count always.
// A flow belongs to the window its confirm started in, whenever its reserve
// ran: in open loop an arrival that queued through the warm-up and
// completed in the measured phase carries its whole wait in its latency.
func (r *recorder) flow(confirmAt time.Time, lat time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.in(confirmAt) {
		return
	}
	if r.sale != nil {
		r.sale.flow(r.from, confirmAt)
	}
	r.flows++
	r.latency("flow", lat)
	b := r.bucketAt(confirmAt)
	b.flows++
	us := int32(min(lat.Microseconds(), 1<<31-1))
	i := max(0, int(confirmAt.Sub(r.from)/time.Second))
	if i < r.sealed {
		r.lat.add(i, []int32{us}) // a late flow of a folded second
		return
	}
	b.flowLat = append(b.flowLat, us)
	r.fold(i - 1)
}

// fold moves the raw latencies of the seconds before upTo into the shared
// store: a stripe folds a second once it records flows two seconds past it.
func (r *recorder) fold(upTo int) {
	for ; r.sealed < upTo && r.sealed < len(r.series); r.sealed++ {
		b := &r.series[r.sealed]
		r.lat.add(r.sealed, b.flowLat)
		b.flowLat = nil
	}
}

func (r *recorder) latency(name string, d time.Duration) {
	h := r.hist[name]
	if h == nil {
		h = newHist()
		r.hist[name] = h
	}
	_ = h.RecordValue(min(max(d.Microseconds(), histMin), histMax))
}

// op accounts one operation (reserve marks a reserve attempt) of qty units
// started at start that took lat and ended with err, when it started
// inside the window; an acknowledged one counts its units moved. It reports whether it counted an error there: an outcome that is
// not an answer of a healthy store (inventory.Outcome.Failed). The texts of
// a few distinct unclassified errors are kept for diagnosis.
func (r *recorder) op(name string, reserve bool, qty int64, start time.Time, lat time.Duration, err error) (failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.in(start) {
		return false
	}
	cls := inventory.Classify(err)
	r.latency(name, lat)
	if r.sale != nil {
		r.sale.op(r, name, cls, start.Add(lat), lat)
	}
	m := r.counts[name]
	if m == nil {
		m = map[string]int64{}
		r.counts[name] = m
	}
	m[string(cls)]++
	if mv := results.MovementOf(name); mv != "" && cls == inventory.OK {
		r.units[mv] += qty
	}
	b := r.bucketAt(start)
	if reserve {
		r.attempts++
		b.attempts++
	}
	if cls.Failed() {
		b.errors++
		if b.failed == nil {
			b.failed = map[string]int64{}
		}
		b.failed[string(cls)]++
		if i := int(start.Add(lat).Sub(r.from) / time.Second); i >= 0 {
			for len(r.failedAt) <= i {
				r.failedAt = append(r.failedAt, nil)
			}
			if r.failedAt[i] == nil {
				r.failedAt[i] = map[string]int64{}
			}
			r.failedAt[i][string(cls)]++
		}
	}
	if cls == inventory.Failure && len(r.errs) < maxErrorTexts && !slices.Contains(r.errs, err.Error()) {
		r.errs = append(r.errs, err.Error())
	}
	return cls.Failed()
}

// journey counts a journey of kind started in the measured part of the run.
func (r *recorder) journey(kind string) {
	r.mu.Lock()
	r.journeys[kind]++
	r.mu.Unlock()
}

const maxErrorTexts = 10

func (r *recorder) merge(o *recorder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fold(len(o.series))
	if o.lat != r.lat && !slices.Contains(r.others, o.lat) {
		r.others = append(r.others, o.lat)
	}
	for _, s := range o.others {
		if s != r.lat && !slices.Contains(r.others, s) {
			r.others = append(r.others, s)
		}
	}
	if o.sale != nil {
		if r.sale == nil {
			r.sale = &sale{stock: o.sale.stock}
		}
		r.sale.merge(o.sale)
	}
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
	for k, n := range o.units {
		r.units[k] += n
	}
	for _, e := range o.errs {
		if len(r.errs) < maxErrorTexts && !slices.Contains(r.errs, e) {
			r.errs = append(r.errs, e)
		}
	}
	r.flows += o.flows
	r.attempts += o.attempts
	for i, m := range o.failedAt {
		for len(r.failedAt) <= i {
			r.failedAt = append(r.failedAt, nil)
		}
		for cls, n := range m {
			if r.failedAt[i] == nil {
				r.failedAt[i] = map[string]int64{}
			}
			r.failedAt[i][cls] += n
		}
	}
	for i, b := range o.series {
		for len(r.series) <= i {
			r.series = append(r.series, bucket{})
		}
		m := &r.series[i]
		m.flows += b.flows
		m.attempts += b.attempts
		m.errors += b.errors
		for cls, n := range b.failed {
			if m.failed == nil {
				m.failed = map[string]int64{}
			}
			m.failed[cls] += n
		}
	}
}

// latencies is the flow latencies of every second, this recorder's and
// those of the recorders merged into it: call it once they are all merged.
// A total merged from one run's stripes reads their shared store as is.
func (r *recorder) latencies() *latStore {
	r.fold(len(r.series))
	if len(r.others) == 1 && r.lat.empty() {
		r.lat = r.others[0]
	} else {
		for _, s := range r.others {
			r.lat.absorb(s)
		}
	}
	r.others = nil
	return r.lat
}

// seriesPoints turns the merged buckets into the report's time series.
func (r *recorder) seriesPoints() []results.SeriesPoint {
	lat := r.latencies()
	out := make([]results.SeriesPoint, len(r.series))
	for i, b := range r.series {
		p := results.SeriesPoint{Second: i + 1, Flows: b.flows, Attempts: b.attempts, Errors: b.errors}
		p.FlowP99MS = float64(lat.quantile(i, i+1, 0.99)) / 1000
		out[i] = p
	}
	return out
}

func percentiles(h *hdrhistogram.Histogram) results.Percentiles { return results.PercentilesOf(h) }

// stripes is a bounded set of recorders: buyer or worker i records into
// stripe i mod len. Memory is that of the stripes, whatever the buyers.
type stripes []*recorder

// stripeCount is how many recorders a run keeps: a few per core, enough
// that buyers rarely wait for a stripe's lock, never one per buyer.
func stripeCount(workers, procs int) int { return max(1, min(workers, 4*procs)) }

func newStripes(n int, from, to time.Time) stripes {
	s := make(stripes, n)
	lat := &latStore{}
	for i := range s {
		s[i] = newRecorder(from, to)
		s[i].lat = lat
	}
	return s
}

func (s stripes) at(i int) *recorder { return s[i%len(s)] }
