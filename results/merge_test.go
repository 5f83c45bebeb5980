package results

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// nearestRank is the q-th percentile of raw values the way HdrHistogram
// ranks them: the value at rank round(q/100·n), at least 1.
func nearestRank(raw []int64, q float64) int64 {
	s := slices.Clone(raw)
	slices.Sort(s)
	rank := max(1, int(q/100*float64(len(s))+0.5))
	return s[rank-1]
}

// shardRun records raw flow latencies (µs, below 2048: exact in a
// 3-digit histogram) into a run as a generator writes it.
func shardRun(t *testing.T, i int, from time.Time, dur time.Duration, flows []int64, series []int64) Run {
	t.Helper()
	h := hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)
	for _, v := range flows {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	r := Run{Strategy: "rowlock", Scenario: "sustained", Flows: int64(len(flows)), DurationSec: dur.Seconds(),
		TPS: float64(len(flows)) / dur.Seconds(), AttemptsPerSec: 2 * float64(len(flows)) / dur.Seconds(),
		LatencyMS:  map[string]Percentiles{"flow": PercentilesOf(h)},
		Counts:     map[string]map[string]int64{"reserve": {"ok": int64(len(flows)), "out_of_stock": int64(i)}},
		Journeys:   map[string]int64{"confirm": int64(len(flows))},
		Units:      map[string]int64{"sold": 2 * int64(len(flows))},
		Histograms: map[string]string{"flow": enc}, MeasuredFrom: from.Format(time.RFC3339Nano),
		Shard:   &ShardInfo{Index: i, Host: "h", HarnessCPUPct: 50, Cores: 2},
		Harness: Harness{Restocks: 1, HarnessCPUPct: Float(50), ServerCPUPct: Float(float64(10 * i)), PoolWaitMSPerOp: 2},
		Counters: map[string]float64{"sweeps": float64(10 * (i + 1)),
			"batch_size_max": float64(i), "lag_p99_ms": float64(i)},
	}
	for s, n := range series {
		r.Series = append(r.Series, SeriesPoint{Second: s + 1, Flows: n})
	}
	return r
}

func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	sample := func(n int, hi int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = 1 + rng.Int64N(hi)
		}
		return out
	}
	cases := []struct {
		name    string
		flows   [][]int64
		offsets []time.Duration // each shard's start after t0
		dur     time.Duration
		// wantDur is the union window.
		wantDur time.Duration
	}{
		{"two even shards", [][]int64{sample(500, 2000), sample(500, 2000)}, []time.Duration{0, 3 * time.Millisecond}, 10 * time.Second, 10*time.Second + 3*time.Millisecond},
		{"one slow shard", [][]int64{sample(900, 300), sample(100, 2000)}, []time.Duration{5 * time.Millisecond, 0}, 4 * time.Second, 4*time.Second + 5*time.Millisecond},
		{"four shards, one late by a second", [][]int64{sample(250, 2000), sample(250, 50), sample(300, 1000), sample(200, 2047)},
			[]time.Duration{0, 0, 0, time.Second}, 3 * time.Second, 4 * time.Second},
		{"one shard", [][]int64{sample(77, 2000)}, []time.Duration{0}, 2 * time.Second, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var shards []*Results
			var all []int64
			for i, f := range c.flows {
				series := []int64{int64(len(f)) / 2, int64(len(f)) - int64(len(f))/2}
				run := shardRun(t, i, t0.Add(c.offsets[i]), c.dur, f, series)
				shards = append(shards, &Results{Format: Format, Runs: []Run{run}})
				all = append(all, f...)
			}
			m, err := Merge(shards)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Runs) != 1 {
				t.Fatalf("%d runs, want 1", len(m.Runs))
			}
			r := m.Runs[0]
			for _, q := range []float64{50, 90, 99, 99.9} {
				want := float64(nearestRank(all, q)) / 1000
				h, err := DecodeHistogram(r.Histograms["flow"])
				if err != nil {
					t.Fatal(err)
				}
				if got := float64(h.ValueAtQuantile(q)) / 1000; got != want {
					t.Errorf("P%g of the merged histogram = %v ms, want %v ms (all samples)", q, got, want)
				}
			}
			if want := float64(nearestRank(all, 99)) / 1000; r.LatencyMS["flow"].P99 != want {
				t.Errorf("merged flow P99 = %v ms, want %v ms (all samples)", r.LatencyMS["flow"].P99, want)
			}
			n := int64(len(all))
			if r.Flows != n || r.LatencyMS["flow"].Count != n || r.Journeys["confirm"] != n || r.Counts["reserve"]["ok"] != n {
				t.Errorf("flows %d, flow count %d, journeys %d, reserve ok %d; want %d each", r.Flows, r.LatencyMS["flow"].Count, r.Journeys["confirm"], r.Counts["reserve"]["ok"], n)
			}
			if r.Units["sold"] != 2*n || len(r.Units) != 1 {
				t.Errorf("units %v, want sold %d (summed)", r.Units, 2*n)
			}
			var seriesFlows int64
			for _, p := range r.Series {
				seriesFlows += p.Flows
			}
			if seriesFlows != n {
				t.Errorf("series flows sum to %d, want %d", seriesFlows, n)
			}
			if got := time.Duration(r.DurationSec * float64(time.Second)).Round(time.Millisecond); got != c.wantDur {
				t.Errorf("window %s, want the union %s", got, c.wantDur)
			}
			if want := float64(n) / c.wantDur.Seconds(); !near(r.TPS, want) {
				t.Errorf("TPS %v, want flows / union window = %v", r.TPS, want)
			}
			if !near(r.AttemptsPerSec, 2*r.TPS) {
				t.Errorf("attempts/s %v, want %v", r.AttemptsPerSec, 2*r.TPS)
			}
			k := int64(len(c.flows))
			h := r.Harness
			if h.Restocks != k || *h.HarnessCPUPct != 50*float64(k) {
				t.Errorf("harness %+v: want sums over %d shards", h, k)
			}
			// Server CPU 0, 10, 20…: every generator sampled the same servers, so the mean.
			if h.PoolWaitMSPerOp != 2 || !near(*h.ServerCPUPct, 5*float64(k-1)) {
				t.Errorf("harness %+v: want means for the per-op wait and the server CPU", h)
			}
			if r.Counters["batch_size_max"] != float64(k-1) || r.Counters["lag_p99_ms"] != float64(k-1) ||
				r.Counters["sweeps"] != float64(5*k*(k+1)) {
				t.Errorf("counters %v: want maxima for maxima and percentiles, sums for counts", r.Counters)
			}
			// Two cores per host, every shard on host h at 50 %: past 80 %
			// of the host from three shards on.
			for _, s := range r.Shards {
				if want := 50*k > 160; s.Saturated != want {
					t.Errorf("shard %d saturated %v, want %v (%d shards on the host)", s.Index, s.Saturated, want, k)
				}
			}
			if len(r.Shards) != int(k) || r.Shard != nil {
				t.Errorf("shards %+v, shard %+v", r.Shards, r.Shard)
			}
			for i, s := range r.Shards {
				if s.Flows != int64(len(c.flows[i])) || s.Counters["sweeps"] != float64(10*(i+1)) {
					t.Errorf("shard %d: %+v", i, s)
				}
			}
			if m.Config.Generators != len(c.flows) {
				t.Errorf("config generators = %v", m.Config.Generators)
			}
		})
	}
}

func TestMergeSeriesByWallClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := shardRun(t, 0, t0, 3*time.Second, []int64{1, 2, 3}, []int64{1, 1, 1})
	b := shardRun(t, 1, t0.Add(time.Second), 3*time.Second, []int64{1, 2, 3}, []int64{10, 10, 10})
	m, err := Merge([]*Results{{Format: Format, Runs: []Run{a}}, {Format: Format, Runs: []Run{b}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, p := range m.Runs[0].Series {
		got = append(got, p.Flows)
	}
	if want := []int64{1, 11, 11, 10}; !slices.Equal(got, want) {
		t.Errorf("series flows %v, want %v (aligned by wall-clock second)", got, want)
	}
}

func TestMergeRefuses(t *testing.T) {
	t0 := time.Now()
	old := shardRun(t, 0, t0, time.Second, []int64{5}, nil)
	old.Histograms = nil
	noStart := shardRun(t, 0, t0, time.Second, []int64{5}, nil)
	noStart.MeasuredFrom = ""
	for name, r := range map[string]Run{"no histograms": old, "no measured_from": noStart} {
		if _, err := Merge([]*Results{{Format: Format, Runs: []Run{r}}}); err == nil {
			t.Errorf("%s: merged", name)
		}
	}
	if _, err := Merge(nil); err == nil {
		t.Error("nothing: merged")
	}
}

func near(a, b float64) bool { return a-b < 1e-6*max(1, b) && b-a < 1e-6*max(1, b) }
