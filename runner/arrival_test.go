package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestArrivalProfiles plays arrival profiles against a real strategy and
// counts the buyers who started in each second of the schedule (by their
// scheduled second: a start that ran late is counted late, not moved), for
// a stages profile and a CSV replay on the flash scenario and a stages
// profile driving the sustained scenario's open loop. Counts, not times:
// every buyer the curve holds must start, none more.
func TestArrivalProfiles(t *testing.T) {
	curve := filepath.Join(t.TempDir(), "curve.csv")
	if err := os.WriteFile(curve, []byte("second,rate\n0,30\n1,0\n2,60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, scenario, arrival string
		want                    []int64 // reserve attempts per second
	}{
		// 0→60/s over 1 s (30), then 60/s for 1 s (60).
		{"flash, stages", "flash", "stages:1s@60,1s@60", []int64{30, 60}},
		{"flash, csv replay", "flash", "csv:" + curve, []int64{30, 0, 60}},
		{"sustained open loop, stages", "sustained", "stages:0s@40,1s@40,1s@80", []int64{40, 60}},
	}
	e, err := registry.Lookup("lua-tcc")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prof, err := scenarios.ParseProfile(c.arrival)
			if err != nil {
				t.Fatal(err)
			}
			o := flashOptions(1)
			if c.scenario == "sustained" {
				o = sustainedOptions()
				o.Warmup, o.Duration, o.Buyers = 0, 2*time.Second, 200
				o.Mix = scenarios.Mix{Confirm: 1}
			}
			o.Scenarios = []string{c.scenario}
			o.Arrival, o.Stock, o.Buyers = prof, 10_000, max(o.Buyers, 1000)
			o.PayDelay = scenarios.Range{}
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, c.scenario, o)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			var total int64
			for _, p := range run.Series {
				got = append(got, p.Attempts)
				total += p.Attempts
			}
			for len(got) > len(c.want) && got[len(got)-1] == 0 {
				got = got[:len(got)-1]
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("reserve attempts per second %v, want %v", got, c.want)
			}
			if run.Harness.Buyers != total {
				t.Fatalf("%d buyers begun, %d reserves attempted", run.Harness.Buyers, total)
			}
			if c.scenario == "flash" {
				f := run.Flash
				if f == nil || f.Buyers != total || f.Served != total || f.Sold != total || f.Shed != 0 {
					t.Fatalf("flash figures %+v, want every one of %d buyers served", f, total)
				}
				t.Logf("late starts: %d of %d", f.LateStarts, f.Buyers)
			}
			if run.Audit.Count() != 0 {
				t.Fatalf("audit %+v", run.Audit)
			}
		})
	}
}
