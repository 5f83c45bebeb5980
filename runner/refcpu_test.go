package runner

import (
	"math"
	"testing"
	"time"
)

// TestRefWorkNotCharged: the drift sampler's reference work is taken out
// of the harness's CPU (and is no source of its own, nor a server's), so
// the harness's CPU per flow counts the load's work only.
func TestRefWorkNotCharged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name                   string
		harness, ref, mysql    time.Duration // CPU used over 10 s
		wantHarness, wantMySQL float64       // % of one core
	}{
		{"no reference work", 5 * time.Second, 0, 2 * time.Second, 50, 20},
		{"reference work taken out", 5 * time.Second, time.Second, 2 * time.Second, 40, 20},
		{"never below zero", time.Second, 2 * time.Second, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := func(total time.Duration) cpuSource {
				n := 0
				return func() (cpuReading, bool) {
					r := cpuReading{cpu: time.Duration(n) * total / 10, at: t0.Add(time.Duration(n) * time.Second), id: 1}
					n = min(n+10, 10) // the first read at 0 s, every later one at 10 s
					return r, true
				}
			}
			s := &cpuSampler{sources: map[string]cpuSource{"harness": fake(c.harness), refCPUSource: fake(c.ref), "mysql": fake(c.mysql)}}
			s.mu.Lock()
			s.acc = map[string]*cpuAcc{}
			s.mu.Unlock()
			s.sample()
			got := s.compute()
			if _, ok := got[refCPUSource]; ok {
				t.Fatalf("figures %v carry the reference work as a source", got)
			}
			if math.Abs(got["harness"]-c.wantHarness) > 1e-9 || math.Abs(got["mysql"]-c.wantMySQL) > 1e-9 || math.Abs(got["server"]-c.wantMySQL) > 1e-9 {
				t.Fatalf("figures %v, want harness %v, mysql and server %v", got, c.wantHarness, c.wantMySQL)
			}
			sec := map[string]float64{"harness": 3, refCPUSource: 0.5}
			withoutRefWork(sec)
			if len(sec) != 1 || sec["harness"] != 2.5 {
				t.Fatalf("live seconds %v, want harness 2.5 alone", sec)
			}
		})
	}
}

// TestRefWorkCounted: refWork adds the CPU it took to refCPU.
func TestRefWorkCounted(t *testing.T) {
	before := refCPU.Load()
	d, ok := refWork()
	if !ok {
		t.Skip("no thread CPU clock here")
	}
	if got := refCPU.Load() - before; got < int64(d) {
		t.Fatalf("refCPU rose by %d ns, refWork took %d ns", got, d)
	}
}
