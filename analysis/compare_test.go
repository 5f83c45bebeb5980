package analysis

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// seriesRun is one sustained run whose measured seconds made flows[i]
// flows with a flow P99 of p99s[i] ms; its TPS is their mean and its P99
// the median second's (what the run's figures would roughly be).
func seriesRun(flows []float64, p99s []float64) results.Run {
	r := results.Run{Strategy: "rowlock", Scenario: "sustained", DurationSec: float64(len(flows)),
		Phases: []results.Phase{{Name: "load"}, {Name: "audit_end_of_load"}, {Name: "settle"}, {Name: "audit"}}}
	r.Audit.ConfirmedUnits = 100
	for i, f := range flows {
		r.Series = append(r.Series, results.SeriesPoint{Second: i + 1, Flows: int64(math.Round(f)), FlowP99MS: p99s[i]})
		r.Flows += int64(math.Round(f))
	}
	r.TPS = float64(r.Flows) / r.DurationSec
	sorted := append([]float64{}, p99s...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j] < sorted[i] {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	r.LatencyMS = map[string]results.Percentiles{"flow": {P99: sorted[len(sorted)/2]}}
	return r
}

// noisy is n seconds around mean, each off by a normal draw of relative
// standard deviation cv (seeded: the same numbers every time).
func noisy(seed uint64, n int, mean, cv float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 47))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = max(0, mean*(1+cv*rng.NormFloat64()))
	}
	return xs
}

func flat(n int, v float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = v
	}
	return xs
}

// TestCompareNoise: with one run in each file, a change past the threshold
// fails the gate only when it is beyond the noise of the two runs'
// per-second series; inside it, it is a note that gives the margin.
func TestCompareNoise(t *testing.T) {
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	old := []float64{1150, 850, 1000, 1200, 800, 1100, 900, 1050, 950, 1000}
	cases := []struct {
		name     string
		old, new results.Run
		problem  string // substring of the one problem; "" = none
		note     string // substring of a note; "" = no note
	}{
		// The same run: nothing.
		{"identical", seriesRun(old, flat(10, 100)), seriesRun(old, flat(10, 100)), "", ""},
		// The same ±15 % noise, NEW's mean 13 % lower (past 10 %): the two
		// runs' own seconds explain it.
		{"identical noise, mean 13 % lower",
			seriesRun(old, flat(10, 100)),
			seriesRun([]float64{900, 700, 1000, 750, 1050, 800, 950, 700, 1000, 850}, flat(10, 100)),
			"", "TPS dropped 13.0 % (limit 10.0 %) within the run's own noise (± "},
		// A true 30 % drop, each second within 2 % of its mean.
		{"30 % drop, low noise",
			seriesRun(noisy(1, 10, 1000, 0.02), flat(10, 100)),
			seriesRun(noisy(2, 10, 700, 0.02), flat(10, 100)),
			"beyond the run's own noise (± ", ""},
		// The same drop over three seconds: still caught.
		{"30 % drop over 3 s",
			seriesRun(noisy(1, 3, 1000, 0.02), flat(3, 100)),
			seriesRun(noisy(2, 3, 700, 0.02), flat(3, 100)),
			"TPS dropped", ""},
		// The P99 of every second doubles (each within 10 % of its mean).
		{"P99 doubles",
			seriesRun(flat(10, 1000), noisy(3, 10, 100, 0.1)),
			seriesRun(flat(10, 1000), noisy(4, 10, 200, 0.1)),
			"P99 rose", ""},
		// A 50 % P99 rise in a run whose per-second P99 swings by a factor
		// of 2.5 (a hot row's lock queue): inside its noise.
		{"P99 +50 % inside a chaotic tail",
			seriesRun(flat(5, 1000), []float64{700, 1100, 1900, 900, 1500}),
			seriesRun(flat(5, 1000), []float64{1050, 1650, 2850, 1350, 2250}),
			"", "P99 rose 50.0 % (limit 20.0 %) within the run's own noise (± "},
		// A 50 % drop of a run with two seconds: too short to show its noise.
		{"too short to show its noise",
			seriesRun(flat(2, 1000), flat(2, 100)),
			seriesRun(flat(2, 500), flat(2, 100)),
			"", "too short to show its own noise (3 needed): gate it with --repeat"},
		// A file written before the series: the same note.
		{"no series",
			func() results.Run { r := seriesRun(flat(10, 1000), flat(10, 100)); r.Series = nil; return r }(),
			seriesRun(flat(10, 500), flat(10, 100)),
			"", "a run of 0 whole seconds is too short"},
		// A 20 % drop in steady seconds: the last, partial second (the
		// buyers' tail past the end, 30 flows) is not counted, or its
		// spread would hide the drop.
		{"partial last second left out",
			func() results.Run {
				r := seriesRun(append(noisy(5, 10, 1000, 0.01), 30), flat(11, 100))
				r.DurationSec, r.TPS = 10.03, 1000
				return r
			}(),
			func() results.Run {
				r := seriesRun(append(noisy(6, 10, 800, 0.01), 30), flat(11, 100))
				r.DurationSec, r.TPS = 10.03, 800
				return r
			}(),
			"TPS dropped 20.0 %", ""},
		// A strategy clean in OLD turning unsafe fails whatever the noise.
		{"safe turns unsafe in a noisy run",
			seriesRun(old, flat(10, 100)),
			func() results.Run { r := seriesRun(old, flat(10, 100)); r.Audit.OversoldUnits = 1; return r }(),
			"1 oversold units, none before", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkNoise(t, th, []results.Run{c.old}, []results.Run{c.new}, c.problem, c.note)
		})
	}
}

// TestCompareNoiseRepeats: with repeats, a change inside the repeats'
// spread is a note; beyond it, the pooled seconds of the repeats decide;
// runs too short to pool (flash sales) leave the spread alone to decide.
func TestCompareNoiseRepeats(t *testing.T) {
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	reps := func(seed uint64, secs int, tps []float64, cv float64) []results.Run {
		var runs []results.Run
		for i, m := range tps {
			xs := noisy(seed+uint64(i), secs, m, cv)
			mean, _ := meanVar(xs)
			for j := range xs {
				xs[j] += m - mean // the repeat's TPS is m exactly
			}
			r := seriesRun(xs, flat(secs, 100))
			r.Repeat = i + 1
			runs = append(runs, r)
		}
		return runs
	}
	cases := []struct {
		name          string
		old, new      []results.Run
		problem, note string
	}{
		// Repeats that overlap: the spread explains the change.
		{"inside the spread", reps(1, 10, []float64{900, 1000, 1100}, 0.02), reps(2, 10, []float64{800, 880, 950}, 0.02),
			"", "within the repeats' spread"},
		// Repeats apart (the second file's machine a little busier) but each
		// second ±30 %: beyond the spread, inside the seconds' noise.
		{"beyond the spread, inside the seconds' noise", reps(3, 10, []float64{990, 1000, 1010}, 0.3), reps(4, 10, []float64{870, 880, 890}, 0.3),
			"", "beyond the repeats' spread but within the runs' own noise (± "},
		// A true 30 % drop, steady seconds: fails.
		{"30 % drop", reps(5, 10, []float64{990, 1000, 1010}, 0.03), reps(6, 10, []float64{690, 700, 710}, 0.03),
			"beyond the repeats' spread and the runs' own noise (± ", ""},
		// Flash sales (half a second: no whole second to pool): the
		// spread decides alone.
		{"flash sales apart", func() []results.Run {
			rs := reps(7, 1, []float64{180, 190, 200}, 0)
			for i := range rs {
				rs[i].DurationSec = 0.5
			}
			return rs
		}(), func() []results.Run {
			rs := reps(8, 1, []float64{120, 125, 130}, 0)
			for i := range rs {
				rs[i].DurationSec = 0.5
			}
			return rs
		}(), "TPS dropped 34.2 % (limit 10.0 %) beyond the repeats' spread", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkNoise(t, th, c.old, c.new, c.problem, c.note)
		})
	}
}

// checkNoise compares the one row of old with that of new: one problem
// containing problem (none when ""), and notes containing note (none
// when "").
func checkNoise(t *testing.T, th Thresholds, old, new []results.Run, problem, note string) {
	t.Helper()
	got := Compare(Analyze(&results.Results{Runs: old}), Analyze(&results.Results{Runs: new}), th)
	v := got.Verdicts[0]
	want := 0
	if problem != "" {
		want = 1
	}
	if len(v.Problems) != want || got.Regressed != want || (want == 1 && !strings.Contains(v.Problems[0], problem)) {
		t.Fatalf("problems %q, want %d containing %q (notes %q)", v.Problems, want, problem, v.Notes)
	}
	notes := strings.Join(v.Notes, "; ")
	if (note == "") != (notes == "") || !strings.Contains(notes, note) {
		t.Fatalf("notes %q, want one containing %q", notes, note)
	}
}

// TestNoiseCalibration: over many seeded pairs of runs drawn from the same
// distribution (±15 % per second, 10 s), the gate fails almost none (a
// wrong margin — one sample's error instead of the difference's, or a
// normal quantile for Student's — fails more); over pairs with a true
// 30 % drop at ±5 %, or a doubled P99 at ±20 %, it fails every one.
func TestNoiseCalibration(t *testing.T) {
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	const pairs = 400
	cases := []struct {
		name             string
		oldTPS, newTPS   float64
		oldP99, newP99   float64
		tpsCV, p99CV     float64
		seconds          int
		minFail, maxFail int
	}{
		{"same distribution", 1000, 1000, 100, 100, 0.15, 0.3, 10, 0, pairs / 100},
		{"same distribution, 3 s", 1000, 1000, 100, 100, 0.15, 0.3, 3, 0, pairs / 100},
		{"30 % TPS drop", 1000, 700, 100, 100, 0.05, 0.05, 10, pairs, pairs},
		{"P99 doubles", 1000, 1000, 100, 200, 0.05, 0.2, 10, pairs, pairs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failed := 0
			for i := range uint64(pairs) {
				o := seriesRun(noisy(4*i, c.seconds, c.oldTPS, c.tpsCV), noisy(4*i+1, c.seconds, c.oldP99, c.p99CV))
				n := seriesRun(noisy(4*i+2, c.seconds, c.newTPS, c.tpsCV), noisy(4*i+3, c.seconds, c.newP99, c.p99CV))
				got := Compare(Analyze(&results.Results{Runs: []results.Run{o}}), Analyze(&results.Results{Runs: []results.Run{n}}), th)
				failed += got.Regressed
			}
			if failed < c.minFail || failed > c.maxFail {
				t.Fatalf("%d of %d pairs failed, want %d to %d", failed, pairs, c.minFail, c.maxFail)
			}
		})
	}
}

// TestTQuantile against published values of Student's t.
func TestTQuantile(t *testing.T) {
	cases := []struct{ p, df, want float64 }{
		{0.975, 1, 12.706},
		{0.975, 4, 2.776},
		{0.995, 4, 4.604},
		{0.995, 10, 3.169},
		{0.995, 2, 9.925},
		{0.975, 1000, 1.962},
	}
	for _, c := range cases {
		if got := tQuantile(c.p, c.df); math.Abs(got-c.want) > 0.001 {
			t.Errorf("t(%v, df %v) = %.4f, want %.3f", c.p, c.df, got, c.want)
		}
	}
}

// TestCompareMachine: a change beyond the run's seconds' noise is the
// machine's when the CPU the run got explains it (its flows per CPU second
// held), and a regression when it does not (a starved pool: less done per
// CPU second).
func TestCompareMachine(t *testing.T) {
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	run := func(seed uint64, tps, p99, cpu float64) results.Run {
		r := seriesRun(noisy(seed, 10, 1000*tps, 0.03), noisy(seed+1, 10, 100*p99, 0.03))
		server, harness := 60*cpu, 20*cpu
		r.Harness.ServerCPUPct, r.Harness.HarnessCPUPct = &server, &harness
		return r
	}
	cases := []struct {
		name          string
		new           results.Run
		problem, note string
	}{
		{"same run", run(3, 1, 1, 1), "", ""},
		// The machine got busier: 40 % less CPU, 40 % fewer flows, slower.
		{"busier machine", run(3, 0.6, 1.6, 0.6), "", "but the CPU the run got explains it: CPU -40.0 %"},
		// A pool of 2: the run waits for connections, CPU falls a little,
		// flows fall a lot.
		{"starved pool", run(3, 0.2, 1, 0.7), "and not the CPU it got: flows per CPU second -72", ""},
		// The P99 doubles, as many flows on as much CPU.
		{"P99 doubles", run(3, 1, 2, 1), "P99 rose 10", ""},
		// The P99 doubles on 40 % less CPU, flows per CPU second held: the
		// machine's.
		{"P99 doubles on less CPU", run(3, 0.6, 2, 0.6), "", "P99 rose 10"},
		// A file without CPU figures: the seconds' noise alone decides.
		{"no CPU sampled", func() results.Run {
			r := run(3, 0.6, 1, 0.6)
			r.Harness.ServerCPUPct = nil
			return r
		}(), "TPS dropped 4", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkNoise(t, th, []results.Run{run(1, 1, 1, 1)}, []results.Run{c.new}, c.problem, c.note)
		})
	}
	// The stores' run-queue wait (MySQL + Redis, % of the phase) tells a
	// starved machine — lock holders waiting for a core, so flows per CPU
	// second fall too — from a slower strategy.
	// others: the CPU the machine's other processes used, % of one core.
	waiting := func(r results.Run, mysql, redis, others float64) results.Run {
		my, rd, h := 40.0, 20.0, 20.0
		busy := (my + rd + h + others) / 2 // of 2 cores
		r.Cost = &results.Cost{MySQLRunQueuePct: &mysql, RedisRunQueuePct: &redis, Cores: 2, MachineBusyPct: &busy,
			MySQLCPUPct: &my, RedisCPUPct: &rd, HarnessCPUPct: &h}
		return r
	}
	starved := []struct {
		name             string
		oldWait, newWait [2]float64 // MySQL, Redis
		oldOthers        float64
		newOthers        float64
		new              results.Run
		problem, note    string
	}{
		{"starved stores", [2]float64{6, 4}, [2]float64{40, 30}, 10, 90, run(3, 0.3, 2, 0.6), "", "the machine starved the stores: MySQL and Redis waited for a core 70 % of the time (was 10 %)"},
		{"slower, stores not starved", [2]float64{6, 4}, [2]float64{8, 5}, 10, 90, run(3, 0.3, 1, 0.6), "and not the CPU it got", ""},
		{"wait doubled by 10 points only", [2]float64{6, 4}, [2]float64{12, 8}, 10, 90, run(3, 0.3, 1, 0.6), "and not the CPU it got", ""},
		{"wait up 30 points, not doubled", [2]float64{30, 10}, [2]float64{45, 25}, 10, 90, run(3, 0.3, 1, 0.6), "and not the CPU it got", ""},
		// The stores waited longer with nothing else busier: their own
		// demand grew (a dearer query, more threads), not the machine's.
		{"stores wait longer, nothing else busier", [2]float64{6, 4}, [2]float64{40, 30}, 10, 15, run(3, 0.3, 1, 0.6), "and not the CPU it got", ""},
	}
	for _, c := range starved {
		t.Run(c.name, func(t *testing.T) {
			o := waiting(run(1, 1, 1, 1), c.oldWait[0], c.oldWait[1], c.oldOthers)
			n := waiting(c.new, c.newWait[0], c.newWait[1], c.newOthers)
			checkNoise(t, th, []results.Run{o}, []results.Run{n}, c.problem, c.note)
		})
	}
	// Without the old file's wait the machine cannot be blamed.
	t.Run("no wait in OLD", func(t *testing.T) {
		checkNoise(t, th, []results.Run{run(1, 1, 1, 1)}, []results.Run{waiting(run(3, 0.3, 1, 0.6), 40, 30, 90)}, "and not the CPU it got", "")
	})
}
