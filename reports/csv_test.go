package reports

import (
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestSeriesCSVStores: a second with the stores' counters carries them in
// series.csv; a second without them leaves those columns empty.
func TestSeriesCSVStores(t *testing.T) {
	r := &results.Results{Runs: []results.Run{{Strategy: "rowlock", Scenario: "sustained", Series: []results.SeriesPoint{
		{Second: 0, Flows: 10, Stores: &results.StoreSecond{MySQLRowLockTimeMS: 2500.5, MySQLRowLockWaits: 40, RedisOpsPerSec: 7}},
		{Second: 1, Flows: 11},
	}}}}
	lines := strings.Split(strings.TrimSpace(string(seriesCSV(r))), "\n")
	cases := []struct {
		line int
		want string
	}{
		{0, "flow_p99_ms,mysql_row_lock_time_ms,mysql_row_lock_waits"},
		{1, "rowlock,sustained,,0,0,10,0,0,0,2500.5,40,0,0,0,0,7,0,0,0"},
		{2, "rowlock,sustained,,0,1,11,0,0,0,,,,,,,,,,"},
	}
	for _, c := range cases {
		if !strings.Contains(lines[c.line], c.want) {
			t.Errorf("line %d %q, want it to hold %q", c.line, lines[c.line], c.want)
		}
	}
}
