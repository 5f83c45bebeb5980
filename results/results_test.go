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
	return &Results{Format: Format, Config: map[string]any{"seed": float64(1)},
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
