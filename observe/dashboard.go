package observe

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stockbench/stockbench/results"
)

//go:embed dashboard.html
var dashboardPage []byte

// dashPoints is how many seconds of each run the page keeps.
const dashPoints = 600

// Dashboard serves the live page (--dashboard): one self-contained HTML
// page (no outside assets) that polls /live.json every second and draws,
// per run, flows/s, the flow P99, anomalies so far and the relay lag,
// then the run's final figures when it ends. Its methods are safe for
// concurrent use.
type Dashboard struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{}

	mu   sync.Mutex
	runs []*DashRun
}

// DashRun is one run on the page.
type DashRun struct {
	d *Dashboard
	// The fields below are guarded by d.mu.
	Strategy   string       `json:"strategy"`
	Scenario   string       `json:"scenario"`
	Repeat     int          `json:"repeat"`
	Points     []DashPoint  `json:"points"`
	Violations int64        `json:"violations"`
	Done       bool         `json:"done"`
	Final      *DashFinal   `json:"final,omitempty"`
	Started    time.Time    `json:"started"`
	Aborted    string       `json:"aborted,omitempty"`
	Breaches   []string     `json:"breaches,omitempty"`
	Stores     *StoreFigure `json:"stores,omitempty"`
}

// DashPoint is one second of a run on the page.
type DashPoint struct {
	AtSec      float64  `json:"at_sec"`
	Flows      int64    `json:"flows"`
	P99MS      float64  `json:"p99_ms"`
	Errors     int64    `json:"errors"`
	RelayLagMS *float64 `json:"relay_lag_ms,omitempty"`
}

// StoreFigure is the stores' last second on the page.
type StoreFigure struct {
	RowLockMSPerSec float64 `json:"row_lock_ms_per_sec"`
	RedisOpsPerSec  float64 `json:"redis_ops_per_sec"`
}

// DashFinal is a finished run's headline figures.
type DashFinal struct {
	TPS       float64 `json:"tps"`
	P99MS     float64 `json:"p99_ms"`
	Flows     int64   `json:"flows"`
	Anomalies int64   `json:"anomalies"`
	Oversold  int64   `json:"oversold"`
}

// ListenDashboard binds addr (loopback only, as CheckAddr) and serves the
// page until Close.
func ListenDashboard(addr string) (*Dashboard, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	d := &Dashboard{ln: ln, served: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(dashboardPage)
	})
	mux.HandleFunc("/live.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		d.mu.Lock()
		b, err := json.Marshal(struct {
			Runs []*DashRun `json:"runs"`
		}{append([]*DashRun{}, d.runs...)})
		d.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	})
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.served)
		_ = d.srv.Serve(ln)
	}()
	return d, nil
}

// Addr is the address the page is served on.
func (d *Dashboard) Addr() string { return d.ln.Addr().String() }

// Close stops serving.
func (d *Dashboard) Close() error {
	err := d.srv.Close()
	<-d.served
	return err
}

// Begin puts a run on the page.
func (d *Dashboard) Begin(l Labels) *DashRun {
	r := &DashRun{d: d, Strategy: l.Strategy, Scenario: l.Scenario, Repeat: max(1, l.Repeat), Started: time.Now(), Points: []DashPoint{}}
	d.mu.Lock()
	d.runs = append(d.runs, r)
	d.mu.Unlock()
	return r
}

// Second adds one second of the measured phase; relayLagMS is the
// strategy's relay lag where it reports one (nil: none); stores the
// stores' last second (nil: not read). A nil DashRun ignores it.
func (r *DashRun) Second(s Second, relayLagMS *float64, stores *results.StoreSecond) {
	if r == nil {
		return
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.Points = append(r.Points, DashPoint{AtSec: s.At.Seconds(), Flows: s.Flows, P99MS: s.P99MS, Errors: s.Errors, RelayLagMS: relayLagMS})
	if len(r.Points) > dashPoints {
		r.Points = append(r.Points[:0:0], r.Points[len(r.Points)-dashPoints:]...)
	}
	r.Violations = s.Violations
	if stores != nil {
		r.Stores = &StoreFigure{RowLockMSPerSec: stores.MySQLRowLockTimeMS, RedisOpsPerSec: stores.RedisOpsPerSec}
	}
}

// End marks the run finished with its final figures.
func (r *DashRun) End(run results.Run) {
	if r == nil {
		return
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.Done = true
	r.Final = &DashFinal{TPS: run.TPS, P99MS: run.LatencyMS["flow"].P99, Flows: run.Flows,
		Anomalies: run.Audit.Count(), Oversold: run.Audit.OversoldUnits}
	if a := run.Aborted; a != nil {
		r.Aborted = fmt.Sprintf("--abort-on %s at %.2f s: %s", a.Threshold, a.BreachedAtSec, a.Reason)
	}
	for _, b := range run.Breaches {
		r.Breaches = append(r.Breaches, b.Threshold+": "+b.Reason)
	}
}
