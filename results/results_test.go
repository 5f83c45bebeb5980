package results

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/audit"
)

func fixture() *Results {
	return &Results{Format: Format, Config: Config{Seed: 1, Strategies: []string{"rowlock", "naive"}},
		Env: Env{Backend: "local", MySQLVersion: "10.11", RedisVersion: "7.0", Cores: 2},
		Runs: []Run{
			{Strategy: "rowlock", Scenario: "flash", TPS: 170.5, LatencyMS: map[string]Percentiles{"flow": {Count: 100, P99: 88.1}},
				Counts: map[string]map[string]int64{"reserve": {"ok": 100, "out_of_stock": 20}}, CoreLines: 212,
				Audit: audit.Audit{ConfirmedUnits: 100}},
			{Strategy: "naive", Scenario: "flash", TPS: 230, LatencyMS: map[string]Percentiles{"flow": {Count: 120, P99: 25}},
				Audit: audit.Audit{ConfirmedUnits: 120, OversoldUnits: 20, OversellRate: 20.0 / 120, InvariantViolations: 1,
					Violations: []string{"mysql FLASH-1: sold 100 != confirmed orders 120"}}},
		}}
}

// TestJSONRoundTrip: what WriteJSON writes, ReadJSON reads back unchanged;
// a file of another format is refused.
func TestJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := fixture()
	if err := WriteJSON(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the results:\n got %+v\nwant %+v", got, want)
	}
	bad := filepath.Join(dir, "old.json")
	if err := os.WriteFile(bad, []byte(`{"format":"stockbench.results/v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSON(bad); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("old format accepted: %v", err)
	}
	// v1 differed only in the capitalised keys of audit.skus[].redis: still read.
	v1 := filepath.Join(dir, "v1.json")
	if err := os.WriteFile(v1, []byte(`{"format":"stockbench.results/v1","runs":[{"audit":{"skus":[{"sku":"A","redis":{"SKU":"A","Sold":7}}]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadJSON(v1)
	if err != nil || r.Runs[0].Audit.SKUs[0].Redis.Sold != 7 {
		t.Fatalf("v1 file: %v", err)
	}
}

// TestReadV2: a v2 file's untyped config (a sweep's swept setting as the
// list of its values) and the harness figures among its counters are
// converted: the known settings typed, the list named in swept, the
// harness figures moved out of counters, the strategy's own left there.
func TestReadV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.json")
	v2 := `{"format":"stockbench.results/v2","config":{"seed":3,"buyers":[50,100],"preset":"article","duration":"20s","restock":true},
	"runs":[{"strategy":"cas","counters":{"server_cpu_pct":41.5,"open_dropped":7,"background_loop_sec":9.5,"cas_retries_per_success":3.2},
	"shards":[{"index":0,"counters":{"background_loop_sec":4,"sweeps":2}}]}]}`
	if err := os.WriteFile(path, []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config
	if c.Seed != 3 || c.Preset != "article" || c.Duration != "20s" || c.Restock == nil || !*c.Restock || !reflect.DeepEqual(c.Swept, []string{"buyers"}) {
		t.Errorf("config %+v", c)
	}
	run := r.Runs[0]
	h := run.Harness
	if h.ServerCPUPct == nil || *h.ServerCPUPct != 41.5 || h.OpenDropped != 7 || h.BackgroundLoopSec != 9.5 {
		t.Errorf("harness %+v", h)
	}
	if !reflect.DeepEqual(run.Counters, map[string]float64{"cas_retries_per_success": 3.2}) {
		t.Errorf("counters %v: want only the strategy's own", run.Counters)
	}
	if sh := run.Shards[0]; sh.Harness.BackgroundLoopSec != 4 || !reflect.DeepEqual(sh.Counters, map[string]float64{"sweeps": 2}) {
		t.Errorf("shard %+v", sh)
	}
	if r.Format != Format {
		t.Errorf("format %q: a converted file is the current format", r.Format)
	}
}
