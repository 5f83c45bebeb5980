package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/results"
)

// TestProcsMetrics: the --metrics-addr of a --procs 2 run re-exposes both
// generators' own endpoints: scraped mid-run it shows each generator's
// flows under its generator label, and each count it showed is at most
// what that generator then wrote (counters only rise). The run is
// interrupted once both were seen, so nothing depends on its length.
func TestProcsMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"run", "--backend", "local", "--procs", "2", "--strategies", "rowlock", "--scenario", "sustained",
			"--skus", "4", "--buyers", "8", "--duration", "10m", "--warmup", "0s", "--calibrate", "0", "--quiet",
			"--metrics-addr", addr, "--out", dir}, &out, &errb)
	}()
	seen := map[string]float64{}
	waitfor.Until(t, "both generators' flows on the parent's endpoint", func() bool {
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before both generators were seen: %s", code, errb.String())
		default:
		}
		for gen, v := range flowsByGenerator(addr) {
			seen[gen] = v
		}
		return seen["0"] > 0 && seen["1"] > 0
	})
	cancel()
	if code := <-done; code != exitInterrupted {
		t.Fatalf("exit %d, want %d (interrupted): %s", code, exitInterrupted, errb.String())
	}
	for gen, v := range seen {
		r, err := results.ReadJSON(filepath.Join(dir, "shards", "rowlock-sustained-1", "shard-"+gen, "results.json"))
		if err != nil || len(r.Runs) != 1 {
			t.Fatalf("generator %s's results: %v", gen, err)
		}
		if f := float64(r.Runs[0].Flows); v > f {
			t.Errorf("generator %s: %v flows on the endpoint mid-run, %v in its results", gen, v, f)
		}
	}
	t.Logf("flows seen mid-run by generator: %v", seen)
}

// flowsByGenerator scrapes an endpoint's stockbench_flows_total by
// generator label (nothing when it does not answer).
func flowsByGenerator(addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	mf := mfs["stockbench_flows_total"]
	if mf == nil {
		return out
	}
	for _, m := range mf.Metric {
		out[labelOf(m, "generator")] += m.GetCounter().GetValue()
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.Label {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
