package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
)

// observeFlags are the flags that watch a run live: thresholds and the
// metrics endpoint (docs/ci.md, docs/observe.md).
type observeFlags struct {
	abortOn, thresholds []string
	metricsAddr         string
	dashboard           string
}

func (f *observeFlags) register(fs *flag.FlagSet) {
	list := func(to *[]string) func(string) error {
		return func(v string) error {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					*to = append(*to, s)
				}
			}
			return nil
		}
	}
	fs.Func("abort-on", "stop a run's load at once when this threshold is breached, then settle, audit, write everything and exit 1; repeatable: anomaly (the mid-run probe's first violation), p99>500ms for 30s, flows<100/s for 10s, errors>5/s", list(&f.abortOn))
	fs.Func("threshold", "check the finished run against this threshold (same syntax as --abort-on) without stopping it; exit 1 when breached; repeatable", list(&f.thresholds))
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve OpenMetrics for Prometheus at http://ADDR/metrics during the run (loopback only, e.g. 127.0.0.1:9464); with --procs N it re-exposes each generator's own endpoint, every series labelled generator=I")
	fs.StringVar(&f.dashboard, "dashboard", "", "serve a live page at http://ADDR/ during the run: flows/s, P99, anomalies so far, relay lag per run, then its final figures (loopback only, e.g. 127.0.0.1:8080)")
}

// apply parses the thresholds into o and checks the endpoints' addresses,
// returning every problem. sharded says the run is split over generator
// processes (--procs, --shard): its metrics come from each generator's
// endpoint (a --procs parent re-exposes its children's), but no
// threshold nor live page watches several yet.
func (f *observeFlags) apply(o *runner.Options, sharded bool) []error {
	var errs []error
	if sharded {
		for _, c := range []struct {
			flag string
			set  bool
		}{{"abort-on", len(f.abortOn) > 0}, {"dashboard", f.dashboard != ""}} {
			if c.set {
				errs = append(errs, fmt.Errorf("--%s: not with several generators (--procs, --shard) yet", c.flag))
			}
		}
	}
	parse := func(flag string, specs []string) []observe.Threshold {
		var out []observe.Threshold
		for _, s := range specs {
			t, err := observe.Parse(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
				continue
			}
			out = append(out, t)
		}
		return out
	}
	o.AbortOn, o.Thresholds = parse("abort-on", f.abortOn), parse("threshold", f.thresholds)
	if f.metricsAddr != "" {
		if err := observe.CheckAddr(f.metricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-addr %w", err))
		}
	}
	if f.dashboard != "" {
		if err := observe.CheckAddr(f.dashboard); err != nil {
			errs = append(errs, fmt.Errorf("--dashboard %w", err))
		}
	}
	return errs
}

// listen binds the metrics endpoint and the live page (each only when
// asked for) before any server starts, so a busy port is a usage error,
// and sets them in every plan; the returned func stops serving. A
// generator of several (gen ≠ "") labels its series with its index and
// writes the endpoint's address into out (observe.AddrFile), where a
// --procs parent finds it.
func (f *observeFlags) listen(plans []runner.Plan, gen, out string) (func(), error) {
	var m *observe.Exporter
	var d *observe.Dashboard
	closeAll := func() {
		if m != nil {
			_ = m.Close()
		}
		if d != nil {
			_ = d.Close()
		}
	}
	var err error
	if f.metricsAddr != "" {
		if m, err = observe.ListenAs(f.metricsAddr, gen); err != nil {
			return nil, fmt.Errorf("--metrics-addr %w", err)
		}
		m.Serve()
		if gen != "" {
			err = os.MkdirAll(out, 0o755)
			if err == nil {
				err = m.WriteAddr(observe.AddrFile(out))
			}
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("--metrics-addr: %w", err)
			}
		}
	}
	if f.dashboard != "" {
		if d, err = observe.ListenDashboard(f.dashboard); err != nil {
			closeAll()
			return nil, fmt.Errorf("--dashboard %w", err)
		}
	}
	for i := range plans {
		plans[i].Metrics, plans[i].Dashboard = m, d
	}
	return closeAll, nil
}

// verdict is the runs' aborts and breached thresholds, one line each
// (nil when none): any is exit 1.
func verdict(res *results.Results) error {
	var errs []error
	for _, r := range res.Runs {
		if s := runner.AbortReason(r); s != "" {
			errs = append(errs, errors.New("aborted: "+s))
		}
		for _, b := range r.Breaches {
			errs = append(errs, fmt.Errorf("threshold breached: %s on %s: %s: %s", r.Strategy, r.Scenario, b.Threshold, b.Reason))
		}
	}
	return errors.Join(errs...)
}
