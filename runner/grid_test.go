package runner

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stockbench/stockbench/scenarios"
)

// TestResolvedGrid: a sweep's config names the swept setting, so that the
// first plan's value is not read as the setting of the whole run.
func TestResolvedGrid(t *testing.T) {
	plan := func(buyers int) Plan {
		return Plan{Options: Options{Scenarios: []string{"flash"}, Params: scenarios.Params{Buyers: buyers, Stock: 10}}, Param: "buyers"}
	}
	cases := []struct {
		name  string
		plans []Plan
		swept []string
	}{
		// A plain run: nothing swept.
		{"one plan", []Plan{plan(50)}, nil},
		// A sweep: buyers, and only buyers.
		{"sweep", []Plan{plan(50), plan(100), plan(200)}, []string{"buyers"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := resolvedGrid(c.plans)
			if !reflect.DeepEqual(m.Swept, c.swept) || m.Buyers != 50 {
				t.Fatalf("swept %v, buyers %d: want %v, the first plan's 50", m.Swept, m.Buyers, c.swept)
			}
			if m.Stock != 10 {
				t.Fatalf("a setting shared by every plan changed: stock = %d", m.Stock)
			}
		})
	}
}

// TestHarnessPerKFlows: the harness's CPU per thousand flows, and no figure
// without CPU or flows.
func TestHarnessPerKFlows(t *testing.T) {
	cases := []struct {
		name   string
		pct    float64
		window time.Duration
		flows  int64
		want   float64
		ok     bool
	}{
		// Half a core for 10 s is 5000 ms of CPU; over 10 000 flows, 500 ms per 1k.
		{"half a core", 50, 10 * time.Second, 10000, 500, true},
		{"no cpu figure", 0, 10 * time.Second, 10000, 0, false},
		{"no flows", 50, 10 * time.Second, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := harnessPerKFlows(c.pct, c.window, c.flows)
			if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("got %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
