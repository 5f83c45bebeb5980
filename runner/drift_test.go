package runner

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/results"
)

// TestDriftOf: windows count the flows and the P99 of the seconds they
// cover, first and last compare a sixth of the phase, and the relay is
// called falling behind only when its backlog's age grows past 2 s.
func TestDriftOf(t *testing.T) {
	// 120 s: 100 flows a second for the first minute, 80 after; latency
	// 1 ms then 3 ms.
	series := make([]bucket, 120)
	store := &latStore{}
	for i := range series {
		n, lat := 100, int32(1000)
		if i >= 60 {
			n, lat = 80, 3000
		}
		series[i].flows = int64(n)
		var raw []int32
		for range n {
			raw = append(raw, lat)
		}
		store.add(i, raw)
	}
	lag := func(ms ...float64) []results.DriftPoint {
		var out []results.DriftPoint
		for i, v := range ms {
			v := v
			n := int64(v)
			out = append(out, results.DriftPoint{Second: float64(i * 10), HarnessRSSBytes: int64(100 + i), RelayLagMS: &v, RelayBacklog: &n})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		points  []results.DriftPoint
		behind  bool
		verdict string
	}{
		{"no relay", []results.DriftPoint{{Second: 0}, {Second: 60}, {Second: 120}}, false, ""},
		{"relay keeps up", lag(100, 300, 200, 150, 400, 100, 200, 300, 100, 200, 250, 300, 100), false, "kept up"},
		{"relay falls behind", lag(100, 300, 500, 900, 1500, 2500, 4000, 6000, 8000, 10000, 12000, 14000, 16000), true, "falling behind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := driftOf(10*time.Second, c.points, series, store, 120*time.Second)
			switch {
			case d.WindowSec != 20 || len(d.Minutes) != 2:
				t.Fatalf("window %v s, %d minutes", d.WindowSec, len(d.Minutes))
			case d.First.FlowsPerSec != 100 || d.Last.FlowsPerSec != 80 || d.Minutes[1].FlowsPerSec != 80:
				t.Fatalf("flows/s first %v last %v", d.First.FlowsPerSec, d.Last.FlowsPerSec)
			case math.Abs(d.FlowsChangePct-(-20)) > 1e-9 || !nearMS(d.First.FlowP99MS, 1) || !nearMS(d.Last.FlowP99MS, 3) || math.Abs(d.P99ChangePct-200) > 4:
				t.Fatalf("change %v %%, P99 %v → %v (%v %%)", d.FlowsChangePct, d.First.FlowP99MS, d.Last.FlowP99MS, d.P99ChangePct)
			case d.RelayFallingBehind != c.behind || !strings.Contains(d.RelayVerdict, c.verdict) || (c.verdict == "") != (d.RelayVerdict == ""):
				t.Fatalf("behind %v, verdict %q", d.RelayFallingBehind, d.RelayVerdict)
			}
		})
	}
}

// TestProcMem: this process's resident memory and its peak are read.
func TestProcMem(t *testing.T) {
	rss, peak := procMem("self")
	if rss <= 0 || peak < rss {
		t.Skipf("no /proc VmRSS/VmHWM here (rss %d, peak %d)", rss, peak)
	}
	if r, p := procMem("no-such-pid"); r != 0 || p != 0 {
		t.Fatalf("unknown process: %d %d", r, p)
	}
}
