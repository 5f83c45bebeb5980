package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stockbench/stockbench/results"
)

// Labels name one run on the endpoint.
type Labels struct {
	Strategy, Scenario string
	// Repeat is the run's index among --repeat N (1 without repeats).
	Repeat int
}

func (l Labels) values() []string {
	return []string{l.Strategy, l.Scenario, strconv.Itoa(max(1, l.Repeat))}
}

// GeneratorLabel is the label every series of a generator's endpoint
// carries when it is one of several (ListenAs).
const GeneratorLabel = "generator"

var runLabels = []string{"strategy", "scenario", "repeat"}

// Snapshot is what one run's figures are at a scrape: counts the runner
// already keeps, read when Prometheus asks, never per operation.
type Snapshot struct {
	// Flows and Attempts counted in the measured phase so far.
	Flows, Attempts int64
	// Outcomes counts operations by name (reserve, confirm, cancel) and
	// outcome class (ok, out_of_stock, timeout…).
	Outcomes map[string]map[string]int64
	// Units counts the units acknowledged operations moved so far, by
	// movement (results.Movements).
	Units map[string]int64
	// Violations is the mid-run probe's violations so far.
	Violations int64
	// Counters are the strategy's own figures (relay backlog and lag,
	// CAS retries…) where it reports them.
	Counters map[string]float64
	// CPUSeconds is each tier's CPU time so far (mysql, redis, harness,
	// and the service instances where they run apart), by tier: the
	// processes' own counters, which start again at a restart.
	CPUSeconds map[string]float64
	// Stores is the stores' counters summed over the seconds sampled so
	// far (counters) and Latest the last second's (gauges); nil: none yet.
	Stores, Latest *results.StoreSecond
}

// Source gives a run's snapshot. It is called from the HTTP server's
// goroutine while the run goes on, so it must be safe for concurrent use.
type Source func() Snapshot

// LatencyBuckets are the classic histogram's upper bounds, in seconds:
// 100 µs to about 70 s in steps of 25 %, so a quantile read from them is
// within 25 % of the exact one. Native histograms (factor 1.1) are
// exposed too, to a scraper that asks for them.
var LatencyBuckets = prometheus.ExponentialBuckets(0.0001, 1.25, 61)

// Exporter serves the OpenMetrics endpoint of a whole invocation: every
// run of it, each under its own labels, the last figures of a finished run
// kept (so a scrape after it still sees its totals). Its methods are safe
// for concurrent use.
type Exporter struct {
	reg    *prometheus.Registry
	srv    *http.Server
	ln     net.Listener
	served chan struct{}
	lat    *prometheus.HistogramVec

	mu   sync.Mutex
	runs []*runEntry
	// follow are the generators re-exposed here (Follow).
	follow []*followed
}

type runEntry struct {
	l    Labels
	src  Source
	last *Snapshot // set when the run ended
}

// CheckAddr refuses an address the endpoint must not serve on: not
// host:port, or not a loopback IP (the endpoint has no authentication).
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want 127.0.0.1:PORT: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q: %w", addr, port, err)
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: not a loopback address (the endpoint has no authentication): use 127.0.0.1 or [::1]", addr)
	}
	return nil
}

// Listen binds addr (CheckAddr first) and returns the exporter, not yet
// serving: a busy port is an error here, before any server starts.
func Listen(addr string) (*Exporter, error) { return ListenAs(addr, "") }

// ListenAs is Listen for generator gen of several (--shard I/N, or a child
// of --procs N; "" for none): every series of its endpoint, the process's
// and the Go runtime's included, carries generator=gen, so that the
// parent (Follow) or a Prometheus scraping several generators tells them
// apart.
func ListenAs(addr, gen string) (*Exporter, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	e := &Exporter{reg: prometheus.NewRegistry(), ln: ln, served: make(chan struct{})}
	e.lat = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "stockbench_latency_seconds",
		Help: "Latency of each operation (reserve, confirm, cancel, refund) and of each whole flow (reserve + confirm, think time excluded), measured phase only.",
		// Classic buckets for the text format, native ones (factor 1.1)
		// for a scraper that negotiates protobuf.
		Buckets:                         LatencyBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, append(append([]string{}, runLabels...), "op"))
	var reg prometheus.Registerer = e.reg
	if gen != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{GeneratorLabel: gen}, e.reg)
	}
	reg.MustRegister(e.lat, (*runCollector)(e),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "stockbench_harness"}),
		collectors.NewGoCollector())
	// Its own series, then its generators' (one that does not answer
	// leaves its last figures, not a failed scrape).
	all := prometheus.Gatherers{e.reg, prometheus.GathererFunc(e.gatherFollowed)}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(all, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}))
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return e, nil
}

// Addr is the address the endpoint listens on.
func (e *Exporter) Addr() string { return e.ln.Addr().String() }

// Serve serves the endpoint on a goroutine of its own until Close.
func (e *Exporter) Serve() {
	go func() {
		defer close(e.served)
		_ = e.srv.Serve(e.ln)
	}()
}

// Close stops serving and waits for the server's goroutine.
func (e *Exporter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	select {
	case <-e.served:
	default:
		_ = e.ln.Close() // never served
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Run is one run's handle on the endpoint.
type Run struct {
	e *Exporter
	r *runEntry
	// Latency observers by op name ("flow", "reserve", "confirm", "cancel", "refund").
	obs map[string]prometheus.Observer
}

// Begin publishes a run's figures, read from src at each scrape.
func (e *Exporter) Begin(l Labels, src Source) *Run {
	r := &runEntry{l: l, src: src}
	e.mu.Lock()
	e.runs = append(e.runs, r)
	e.mu.Unlock()
	run := &Run{e: e, r: r, obs: map[string]prometheus.Observer{}}
	for _, op := range results.HistogramNames {
		run.obs[op] = e.lat.WithLabelValues(append(l.values(), op)...)
	}
	return run
}

// Observe records one latency of op ("flow", "reserve", …): safe for
// concurrent use, a few atomic adds; a nil Run ignores it.
func (r *Run) Observe(op string, d time.Duration) {
	if r == nil {
		return
	}
	if o := r.obs[op]; o != nil {
		o.Observe(d.Seconds())
	}
}

// End freezes the run's figures at their final values.
func (r *Run) End() {
	if r == nil {
		return
	}
	s := r.r.src()
	r.e.mu.Lock()
	r.r.last = &s
	r.r.src = nil // the run's recorders may go
	r.e.mu.Unlock()
}

// runCollector reads every run's source at scrape time.
type runCollector Exporter

var (
	descFlows      = prometheus.NewDesc("stockbench_flows_total", "Completed reserve+confirm flows in the measured phase.", runLabels, nil)
	descAttempts   = prometheus.NewDesc("stockbench_attempts_total", "Reserve attempts in the measured phase.", runLabels, nil)
	descOutcomes   = prometheus.NewDesc("stockbench_operations_total", "Operations by name and outcome class (ok, out_of_stock = a refusal, timeout, deadlock… = errors).", append(append([]string{}, runLabels...), "op", "class"), nil)
	descUnits      = prometheus.NewDesc("stockbench_units_total", "Units moved by acknowledged operations in the measured phase, by movement (reserved, sold, released by a cancel, refunded): units, where stockbench_operations_total counts operations.", append(append([]string{}, runLabels...), "movement"), nil)
	descViolations = prometheus.NewDesc("stockbench_probe_violations_total", "Snapshots of the mid-run probe that broke a stock invariant.", runLabels, nil)
	descCPU        = prometheus.NewDesc("stockbench_cpu_seconds_total", "CPU time of each tier's processes (mysql, redis, harness…) so far, from /proc or the container engine; rate() of it is the tier's cores in use.", append(append([]string{}, runLabels...), "tier"), nil)
	descCounter    = prometheus.NewDesc("stockbench_strategy_counter", "The strategy's own figures (outbox relay backlog and lag, CAS retries…) where it reports them.", append(append([]string{}, runLabels...), "name"), nil)
	descStore      = map[string]*prometheus.Desc{}
)

// storeFields are the stores' figures on the endpoint: counters summed
// over the sampled seconds, gauges at the last one.
var storeFields = []struct {
	name, help string
	counter    bool
	of         func(*results.StoreSecond) float64
}{
	{"stockbench_mysql_row_lock_time_seconds_total", "Innodb_row_lock_time's rise over the run.", true, func(s *results.StoreSecond) float64 { return s.MySQLRowLockTimeMS / 1000 }},
	{"stockbench_mysql_row_lock_waits_total", "Innodb_row_lock_waits' rise over the run.", true, func(s *results.StoreSecond) float64 { return float64(s.MySQLRowLockWaits) }},
	{"stockbench_mysql_commits_total", "Com_commit's rise over the run.", true, func(s *results.StoreSecond) float64 { return float64(s.MySQLCommits) }},
	{"stockbench_mysql_rollbacks_total", "Com_rollback's rise over the run.", true, func(s *results.StoreSecond) float64 { return float64(s.MySQLRollbacks) }},
	{"stockbench_mysql_buffer_pool_reads_total", "Innodb_buffer_pool_reads' rise over the run.", true, func(s *results.StoreSecond) float64 { return float64(s.MySQLBufferPoolReads) }},
	{"stockbench_redis_cpu_seconds_total", "Redis used_cpu_sys + used_cpu_user's rise over the run.", true, func(s *results.StoreSecond) float64 { return s.RedisCPUPct / 100 }},
	{"stockbench_mysql_threads_running", "Threads_running at the last sampled second.", false, func(s *results.StoreSecond) float64 { return float64(s.MySQLThreadsRunning) }},
	{"stockbench_redis_ops_per_second", "Redis instantaneous_ops_per_sec at the last sampled second.", false, func(s *results.StoreSecond) float64 { return s.RedisOpsPerSec }},
	{"stockbench_redis_connected_clients", "Redis connected_clients at the last sampled second.", false, func(s *results.StoreSecond) float64 { return float64(s.RedisClients) }},
	{"stockbench_redis_used_memory_bytes", "Redis used_memory at the last sampled second.", false, func(s *results.StoreSecond) float64 { return float64(s.RedisUsedBytes) }},
}

func init() {
	for _, f := range storeFields {
		descStore[f.name] = prometheus.NewDesc(f.name, f.help, runLabels, nil)
	}
}

func (c *runCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFlows, descAttempts, descOutcomes, descUnits, descViolations, descCounter, descCPU} {
		ch <- d
	}
	for _, d := range descStore {
		ch <- d
	}
}

func (c *runCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	runs := append([]*runEntry{}, c.runs...)
	frozen := make([]*Snapshot, len(runs))
	srcs := make([]Source, len(runs))
	for i, r := range runs {
		frozen[i], srcs[i] = r.last, r.src
	}
	c.mu.Unlock()
	for i, r := range runs {
		s := frozen[i]
		if s == nil {
			v := srcs[i]()
			s = &v
		}
		lv := r.l.values()
		ch <- prometheus.MustNewConstMetric(descFlows, prometheus.CounterValue, float64(s.Flows), lv...)
		ch <- prometheus.MustNewConstMetric(descAttempts, prometheus.CounterValue, float64(s.Attempts), lv...)
		ch <- prometheus.MustNewConstMetric(descViolations, prometheus.CounterValue, float64(s.Violations), lv...)
		for op, m := range s.Outcomes {
			for cls, n := range m {
				ch <- prometheus.MustNewConstMetric(descOutcomes, prometheus.CounterValue, float64(n), append(lv, op, cls)...)
			}
		}
		for _, mv := range results.Movements {
			if n, ok := s.Units[mv]; ok {
				ch <- prometheus.MustNewConstMetric(descUnits, prometheus.CounterValue, float64(n), append(lv, mv)...)
			}
		}
		for tier, v := range s.CPUSeconds {
			ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, v, append(lv, tier)...)
		}
		for name, v := range s.Counters {
			ch <- prometheus.MustNewConstMetric(descCounter, prometheus.GaugeValue, v, append(lv, name)...)
		}
		for _, f := range storeFields {
			src, kind := s.Stores, prometheus.CounterValue
			if !f.counter {
				src, kind = s.Latest, prometheus.GaugeValue
			}
			if src != nil {
				ch <- prometheus.MustNewConstMetric(descStore[f.name], kind, f.of(src), lv...)
			}
		}
	}
}
