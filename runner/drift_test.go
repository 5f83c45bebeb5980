package runner

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/internal/sysstat"
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
			}
			// The relay's verdict is analysis', from these figures.
			rv, said := analysis.RelayOf(d), ""
			if rv != nil {
				said = rv.Sentence()
			}
			if (rv != nil && rv.FallingBehind) != c.behind || !strings.Contains(said, c.verdict) || (c.verdict == "") != (rv == nil) {
				t.Fatalf("relay %+v, verdict %q", rv, said)
			}
		})
	}
}

// TestCostVerdict: a change in flows/s of 10 % or more is laid beside the
// CPU per flow of each process and the reference work, and put down to the
// machine only when the reference moved with the CPU per flow.
func TestCostVerdict(t *testing.T) {
	// 60 s at 100 flows a second: each 10 s between samples holds 1000
	// flows, so a process using c CPU-seconds per 10 s costs c ms a flow.
	series := make([]bucket, 60)
	for i := range series {
		series[i].flows = 100
	}
	point := func(sec, mysql, harness, ref float64) results.DriftPoint {
		return results.DriftPoint{Second: sec, CPUSec: map[string]float64{"mysql": mysql, "harness": harness}, RefCPUMS: ref}
	}
	history := func(p results.DriftPoint, n int64) results.DriftPoint { p.HistoryLength = n; return p }
	redis := func(p results.DriftPoint, sec float64) results.DriftPoint { p.CPUSec["redis"] = sec; return p }
	// machine: the cores' seconds so far, of which kernel, stolen and idle.
	machine := func(p results.DriftPoint, total, kernel, steal, idle float64) results.DriftPoint {
		p.Machine = &results.MachineCPU{Total: total, Kernel: kernel, Steal: steal, Idle: idle}
		return p
	}
	for _, c := range []struct {
		name       string
		flowsPct   float64
		first      [2]results.DriftPoint
		last       [2]results.DriftPoint
		want, none string
	}{
		{"flows held: no verdict", -5, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 10), point(50, 12, 12, 10)}, "", "flows"},
		{"the machine slowed", -30, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 14), point(50, 11.4, 11.4, 14)}, "CPU per flow +40 % (harness +40 %, mysql +40 %); the same reference work +40 % CPU: the machine itself did the same work slower", ""},
		{"the store's own cost", -30, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 10.2), point(50, 12, 11, 10.2)}, "CPU per flow +50 % (harness +0 %, mysql +100 %); the same reference work +2 % CPU: the run's own cost per flow changed, most in mysql", "machine"},
		{"the store's own cost, its history named", -30, [2]results.DriftPoint{point(0, 0, 0, 10), history(point(10, 1, 1, 10), 200)}, [2]results.DriftPoint{point(40, 10, 10, 10.2), history(point(50, 12, 11, 10.2), 90000)}, "most in mysql (InnoDB history list 200 → 90000", ""},
		{"every process alike: what they share", 30, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 9.5), point(50, 10.76, 10.8, 9.5)}, "CPU per flow -22 % (harness -20 %, mysql -24 %); the same reference work -5 % CPU: every process's cost per flow moved alike", "the run's own"},
		{"the machine's shares named", -13, [2]results.DriftPoint{machine(point(0, 0, 0, 10), 0, 0, 0, 0), machine(point(10, 1, 1, 10), 20, 6, 0.2, 2)}, [2]results.DriftPoint{machine(point(40, 10, 10, 10), 80, 24, 1, 6), machine(point(50, 11.15, 11.15, 10), 100, 32, 2, 8)}, "(harness +15 %, mysql +15 %); the machine's cores: kernel 30 → 40 %, stolen by the hypervisor 1.0 → 5.0 %, idle 10 → 10 %; the same reference work +0 % CPU: every process's cost per flow moved alike", ""},
		{"the hypervisor took more", -25, [2]results.DriftPoint{machine(point(0, 0, 0, 10), 0, 0, 0, 0), machine(point(10, 1, 1, 10), 20, 6, 2, 2)}, [2]results.DriftPoint{machine(point(40, 10, 10, 10), 80, 24, 6, 6), machine(point(50, 11.13, 11.09, 10), 100, 30, 11, 9)}, "stolen by the hypervisor 10.0 → 25.0 %, idle 10 → 15 %; the same reference work +0 % CPU: the hypervisor gave more of the machine's cores to other guests", "own cost"},
		{"a fixed cost a second is not named", -20, [2]results.DriftPoint{redis(point(0, 0, 0, 10), 0), redis(point(10, 1, 1, 10), 0.001)}, [2]results.DriftPoint{redis(point(40, 10, 10, 10), 0.004), redis(point(50, 11.2, 11.05, 10), 0.0055)}, "redis +50 %); the same reference work +0 % CPU: the run's own cost per flow changed, most in mysql", ""},
		{"a fall named by the process that fell most", 30, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 10), point(50, 10.4, 10.9, 10)}, "the run's own cost per flow changed, most in mysql", "alike"},
		{"less CPU for the run", -30, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 10), point(50, 11, 11, 10)}, "each flow cost about the same CPU, the run got less of it", "did the same work"},
		{"the machine sped up", 25, [2]results.DriftPoint{point(0, 0, 0, 10), point(10, 1, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 8), point(50, 10.8, 10.8, 8)}, "the machine itself did the same work faster", ""},
		{"no reference: figures only", -30, [2]results.DriftPoint{point(0, 0, 0, 0), point(10, 1, 1, 0)}, [2]results.DriftPoint{point(40, 10, 10, 0), point(50, 12, 12, 0)}, "CPU per flow +100 %", "reference"},
		{"a restarted server is left out", -30, [2]results.DriftPoint{point(0, 5, 0, 10), point(10, 6, 1, 10)}, [2]results.DriftPoint{point(40, 10, 10, 10), point(50, 2, 12, 10)}, "CPU per flow +100 % (harness +100 %)", "mysql"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pts := append(c.first[:], c.last[:]...)
			d := &results.Drift{WindowSec: 10, FlowsChangePct: c.flowsPct,
				First: window(pts, series, &latStore{}, 0, 10), Last: window(pts, series, &latStore{}, 40, 50)}
			got := ""
			if v := analysis.CostOf(d); v != nil {
				got = v.Sentence()
			}
			if c.want == "" && got != "" || !strings.Contains(got, c.want) || c.none != "" && strings.Contains(got, c.none) {
				t.Fatalf("verdict %q, want it to say %q and not %q", got, c.want, c.none)
			}
		})
	}
}

// TestMachineCPU: /proc/stat's first line read by kind, guest time not
// counted twice, other shapes refused; and the shares of a window.
func TestMachineCPU(t *testing.T) {
	for _, c := range []struct {
		name string
		line string
		want *results.MachineCPU
	}{
		{"every field", "cpu  500 100 200 1000 50 10 40 100 30 0", &results.MachineCPU{Total: 20, Kernel: 2.5, Steal: 1, Idle: 10.5}},
		{"no guest fields", "cpu 500 100 200 1000 50 10 40 100", &results.MachineCPU{Total: 20, Kernel: 2.5, Steal: 1, Idle: 10.5}},
		{"a core's line, not the machine's", "cpu0 500 100 200 1000 50 10 40 100", nil},
		{"too short", "cpu 500 100 200 1000", nil},
		{"not a number", "cpu 500 x 200 1000 50 10 40 100", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *results.MachineCPU
			if ct, ok := sysstat.ParseMachineCPU(c.line); ok {
				got = machineOf(ct)
			}
			if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
				t.Fatalf("machineOf(%q) = %+v, want %+v", c.line, got, c.want)
			}
		})
	}
	a := &results.MachineCPU{Total: 100, Kernel: 30, Steal: 1, Idle: 20}
	b := &results.MachineCPU{Total: 300, Kernel: 110, Steal: 11, Idle: 40}
	if got, want := machineShare(a, b), (results.MachineShare{KernelPct: 40, StealPct: 5, IdlePct: 10}); got == nil || *got != want {
		t.Fatalf("machineShare = %+v, want %+v", got, want)
	}
	if got := machineShare(b, a); got != nil {
		t.Fatalf("machineShare of a reading going back = %+v, want none", got)
	}
	if m := machineCPU(); m != nil && (m.Total <= 0 || m.Kernel > m.Total || m.Idle > m.Total) {
		t.Fatalf("this machine's /proc/stat read as %+v", m)
	}
}

// TestRefWork: the reference work's CPU time is read on Linux, and is
// some milliseconds, not a whole second (its loop was not optimised away
// nor made unbounded).
func TestRefWork(t *testing.T) {
	d, ok := refWork()
	if !ok {
		t.Skip("no per-thread CPU time here")
	}
	if d <= 0 || d >= time.Second {
		t.Fatalf("reference work took %v of CPU", d)
	}
}
