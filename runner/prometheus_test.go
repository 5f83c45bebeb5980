package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestPrometheusScrape: a real Prometheus (where the package is installed)
// scrapes a run's endpoint with the repo's recording rules; its 10 s flow
// rate inside the run and its histogram P99 agree with results.json's
// flows/s and HDR P99 within a generous factor (the figures are logged).
func TestPrometheusScrape(t *testing.T) {
	bin, err := osexec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian: apt-get install prometheus; scripts/setup.sh test installs it)")
	}
	m, err := observe.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Serve()
	defer m.Close()
	promAddr := freeAddr(t)
	startPrometheus(t, bin, m.Addr(), promAddr)
	// Prometheus hands its targets to the scraper some seconds after it
	// is ready: wait for its first scrape of the endpoint.
	waitfor.Until(t, "Prometheus scraping the endpoint", func() bool {
		v, ok := query(t, promAddr, `up{job="stockbench"}`, time.Now())
		return ok && v == 1
	})

	e, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	o := sustainedOptions()
	o.SKUs, o.Buyers, o.Stock, o.Duration, o.Warmup = 1, 16, 1_000_000, 12*time.Second, time.Second
	o.Metrics = m
	run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
	if err != nil {
		t.Fatal(err)
	}
	from, err := time.Parse(time.RFC3339Nano, run.MeasuredFrom)
	if err != nil {
		t.Fatal(err)
	}
	sel := `{strategy="rowlock",scenario="sustained"}`
	// Wait for a scrape that saw the run's final count (the endpoint
	// keeps a finished run's figures).
	waitfor.Until(t, fmt.Sprintf("Prometheus scraping the final flows %d", run.Flows), func() bool {
		v, ok := query(t, promAddr, "stockbench_flows_total"+sel, time.Now())
		return ok && v == float64(run.Flows)
	})
	at := from.Add(11 * time.Second) // [1 s, 11 s] of the measured phase
	rate, ok := query(t, promAddr, "stockbench:flows:rate10s"+sel, at)
	if !ok {
		rate, ok = query(t, promAddr, "rate(stockbench_flows_total"+sel+"[10s])", at)
	}
	var window int64 // the series' flows in the same 10 s
	for _, p := range run.Series {
		if p.Second > 1 && p.Second <= 11 {
			window += p.Flows
		}
	}
	var raw []string
	for _, s := range []int{0, 1, 2, 5, 10, 11, 12, 13} {
		v, _ := query(t, promAddr, "stockbench_flows_total"+sel, from.Add(time.Duration(s)*time.Second))
		raw = append(raw, fmt.Sprintf("%ds:%.0f", s, v))
	}
	var perSec []int64
	for _, p := range run.Series {
		perSec = append(perSec, p.Flows)
	}
	upAvg, _ := query(t, promAddr, `avg_over_time(up[15s])`, from.Add(13*time.Second))
	durMax, _ := query(t, promAddr, `max_over_time(scrape_duration_seconds[15s])`, from.Add(13*time.Second))
	samples, _ := query(t, promAddr, "count_over_time(stockbench_flows_total"+sel+"[11s])", from.Add(11*time.Second))
	t.Logf("scrapes: up %.2f of the time, slowest %.3f s, %v samples of the counter in [0, 11 s]", upAvg, durMax, samples)
	t.Logf("series flows/s over seconds 1-11: %.1f (each second %v); Prometheus counter at %v", float64(window)/10, perSec, raw)
	p99, okP := query(t, promAddr, `histogram_quantile(0.99, sum by (le) (increase(stockbench_latency_seconds_bucket{op="flow",strategy="rowlock"}[1h])))`, time.Now())
	t.Logf("flows/s: Prometheus rate(stockbench_flows_total[10s]) at 11 s = %.1f, results.json tps = %.1f (%.1f %% off); flow P99: Prometheus histogram_quantile = %.2f ms, HDR = %.2f ms",
		rate, run.TPS, 100*(rate-run.TPS)/run.TPS, 1000*p99, run.LatencyMS["flow"].P99)
	if !ok || rate < run.TPS/2 || rate > run.TPS*2 {
		t.Fatalf("Prometheus 10 s flow rate %.1f (found %v), results.json %.1f flows/s", rate, ok, run.TPS)
	}
	if hdr := run.LatencyMS["flow"].P99 / 1000; !okP || p99 < hdr/2 || p99 > hdr*2 {
		t.Fatalf("Prometheus P99 %.4f s (found %v), HDR %.4f s", p99, okP, hdr)
	}
	// Each tier's CPU on the endpoint: the harness's here (RunStrategy on
	// shared servers knows no server process; a run through Execute adds
	// mysql and redis).
	for _, tier := range []string{"harness"} {
		v, ok := query(t, promAddr, `stockbench_cpu_seconds_total{strategy="rowlock",scenario="sustained",tier="`+tier+`"}`, time.Now())
		if !ok || v <= 0 {
			t.Errorf("stockbench_cpu_seconds_total tier %s = %v (found %v), want > 0", tier, v, ok)
		}
	}
}

// freeAddr is a loopback address no one listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus runs Prometheus on addr scraping target every second
// with deploy/prometheus's rules, from a config in a temp dir; it is
// killed when the test ends, or with the test binary (Pdeathsig).
func startPrometheus(t *testing.T, bin, target, addr string) *osexec.Cmd {
	t.Helper()
	dir := t.TempDir()
	tmpl, err := os.ReadFile("../deploy/prometheus/prometheus.yml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("RULES", rules, "TARGET", target).Replace(string(tmpl))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
	waitfor.Until(t, "Prometheus ready", func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return cmd
}

// query evaluates an instant PromQL query at at; the first sample's value.
func query(t *testing.T, addr, q string, at time.Time) (float64, bool) {
	t.Helper()
	u := fmt.Sprintf("http://%s/api/v1/query?query=%s&time=%d.%03d", addr, url.QueryEscape(q), at.Unix(), at.Nanosecond()/1e6)
	resp, err := http.Get(u)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil || r.Status != "success" || len(r.Data.Result) == 0 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
