package runner_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/strategies/registry"
)

func thresholds(t *testing.T, specs ...string) []observe.Threshold {
	t.Helper()
	var out []observe.Threshold
	for _, s := range specs {
		th, err := observe.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, th)
	}
	return out
}

// TestAbortOnAnomaly: --abort-on anomaly stops naive's load at the probe's
// first violation (the run is shorter than planned, audited, and records
// the abort), and lets lua-tcc run its whole measured phase. The
// end-of-run --threshold check runs on both.
func TestAbortOnAnomaly(t *testing.T) {
	cases := []struct {
		strategy string
		aborts   bool
	}{
		{"naive", true},
		{"lua-tcc", false},
	}
	for _, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			e, err := registry.Lookup(c.strategy)
			if err != nil {
				t.Fatal(err)
			}
			o := sustainedOptions()
			// One SKU of 5 units, many buyers (as TestProbeDuringLoad):
			// naive breaks the invariants within its first seconds.
			o.SKUs, o.Buyers, o.Stock = 1, 32, 5
			o.Duration, o.Warmup = 20*time.Second, 0
			if !c.aborts {
				o.Duration = 3 * time.Second
			}
			o.AbortOn = thresholds(t, "anomaly")
			o.Thresholds = thresholds(t, "anomaly", "flows<1000000000/s")
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
			if err != nil {
				t.Fatal(err)
			}
			if run.Audit.Probe == nil || run.Audit.Probe.Snapshots == 0 || run.AuditEndOfLoad == nil {
				t.Fatalf("not audited after the load: probe %+v", run.Audit.Probe)
			}
			a := run.Aborted
			if (a != nil) != c.aborts {
				t.Fatalf("aborted %+v, want aborted=%v", a, c.aborts)
			}
			// An unsafe run breaches the anomaly threshold at the end too;
			// a safe one that ran its course the impossible flows floor.
			var names []string
			for _, b := range run.Breaches {
				names = append(names, b.Threshold)
			}
			want := "flows<1000000000/s"
			if c.aborts {
				want = "anomaly"
			}
			if got := strings.Join(names, ","); !strings.HasPrefix(got, want) {
				t.Fatalf("breaches %v, want %s first", run.Breaches, want)
			}
			if !c.aborts {
				if run.DurationSec != o.Duration.Seconds() {
					t.Fatalf("lua-tcc measured %.3f s of %s", run.DurationSec, o.Duration)
				}
				return
			}
			if a.Threshold != "anomaly" || a.Reason == "" || a.PlannedSec != o.Duration.Seconds() {
				t.Fatalf("abort record %+v", a)
			}
			if run.DurationSec >= o.Duration.Seconds() || a.StoppedAtSec < a.BreachedAtSec {
				t.Fatalf("load not stopped early: measured %.3f s of %s, abort %+v", run.DurationSec, o.Duration, a)
			}
			if first := run.Audit.Probe.First; first == nil || math.Abs(first.AtSec-a.BreachedAtSec) > 1e-6 {
				t.Fatalf("abort at %.3f s, probe's first violation %+v", a.BreachedAtSec, first)
			}
			t.Logf("naive: first violation at %.3f s, load stopped at %.3f s (%.0f ms later), measured %.3f s of %s; %s",
				a.BreachedAtSec, a.StoppedAtSec, 1000*(a.StoppedAtSec-a.BreachedAtSec), run.DurationSec, o.Duration, runner.AbortReason(run))
		})
	}
}

// TestStoresInSeries: the stores' own counters land in every second of the
// series, and MySQL's row-lock time shows rowlock queueing on its hot row
// where lua-tcc (stock in Redis) waits for none of it.
func TestStoresInSeries(t *testing.T) {
	lockMS := map[string]float64{}
	for _, name := range []string{"rowlock", "lua-tcc"} {
		e, err := registry.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		o := sustainedOptions()
		o.SKUs, o.Buyers, o.Stock, o.Duration = 1, 32, 1_000_000, 3*time.Second
		run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Series) < 2 {
			t.Fatalf("%s: series %+v", name, run.Series)
		}
		var commits, redisOps float64
		for _, p := range run.Series {
			if p.Stores == nil {
				t.Fatalf("%s: second %d without the stores' counters", name, p.Second)
			}
			lockMS[name] += p.Stores.MySQLRowLockTimeMS
			commits += float64(p.Stores.MySQLCommits)
			redisOps += p.Stores.RedisOpsPerSec
			if p.Stores.RedisUsedBytes <= 0 || p.Stores.RedisClients <= 0 {
				t.Fatalf("%s: second %d: Redis not read: %+v", name, p.Second, *p.Stores)
			}
		}
		if commits == 0 {
			t.Fatalf("%s: no MySQL commit counted in %d s", name, len(run.Series))
		}
		if name == "lua-tcc" && redisOps == 0 {
			t.Fatalf("lua-tcc: no Redis ops/s in its series")
		}
		t.Logf("%s: %.0f flows/s, MySQL row-lock time %.1f ms/s, commits %.0f/s, Redis %.0f ops/s", name, run.TPS,
			lockMS[name]/float64(len(run.Series)), commits/float64(len(run.Series)), redisOps/float64(len(run.Series)))
	}
	if lockMS["rowlock"] <= 0 || lockMS["rowlock"] <= 10*lockMS["lua-tcc"] {
		t.Fatalf("row-lock time: rowlock %.1f ms, lua-tcc %.1f ms: want rowlock's well above", lockMS["rowlock"], lockMS["lua-tcc"])
	}
}

// TestMetricsEndpoint: a run's figures on the endpoint, scraped after it
// ended, are its results' exactly: flows, the flow histogram's count, and
// reserve outcomes by class.
func TestMetricsEndpoint(t *testing.T) {
	m, err := observe.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Serve()
	defer m.Close()
	e, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	o := sustainedOptions()
	o.Metrics = m
	run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	labels := `{repeat="1",scenario="sustained",strategy="rowlock"}`
	cases := []struct {
		metric string
		want   float64
	}{
		{"stockbench_flows_total" + labels, float64(run.Flows)},
		{`stockbench_latency_seconds_count{op="flow",repeat="1",scenario="sustained",strategy="rowlock"}`, float64(run.Flows)},
		{`stockbench_operations_total{class="ok",op="reserve",repeat="1",scenario="sustained",strategy="rowlock"}`, float64(run.Counts["reserve"]["ok"])},
		{"stockbench_probe_violations_total" + labels, float64(run.Audit.ProbeViolations)},
	}
	for _, c := range cases {
		got, ok := sample(text, c.metric)
		if !ok || got != c.want {
			t.Errorf("%s = %v (found %v), want %v", c.metric, got, ok, c.want)
		}
	}
	if _, ok := sample(text, "stockbench_mysql_commits_total"+labels); !ok {
		t.Errorf("no stores' counters on the endpoint")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
	if run.Flows == 0 {
		t.Fatal("no flows: nothing compared")
	}
}

// sample finds one sample's value in a text exposition.
func sample(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return f, err == nil
		}
	}
	return 0, false
}
