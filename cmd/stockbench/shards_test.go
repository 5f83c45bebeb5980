package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestMain lets the test binary stand in for stockbench when run --procs
// starts generators from its own executable.
func TestMain(m *testing.M) {
	if os.Getenv(shardChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// p99OfShards is the flow P99 of every sample of the shards, computed from
// their decoded histograms' buckets (each sample at its bucket's highest
// equivalent value, ranked as HdrHistogram ranks: round(0.99·n)), without
// merging histograms.
func p99OfShards(t *testing.T, shards []results.Run) float64 {
	t.Helper()
	type bucket struct{ to, n int64 }
	var all []bucket
	var n int64
	for _, r := range shards {
		h, err := results.DecodeHistogram(r.Histograms["flow"])
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range h.Distribution() {
			if b.Count > 0 {
				all = append(all, bucket{b.To, b.Count})
				n += b.Count
			}
		}
	}
	slices.SortFunc(all, func(a, b bucket) int { return int(a.to - b.to) })
	rank := max(1, int64(0.99*float64(n)+0.5))
	var seen int64
	for _, b := range all {
		if seen += b.n; seen >= rank {
			return float64(b.to) / 1000
		}
	}
	t.Fatal("no samples")
	return 0
}

// TestProcs runs flash and sustained on lua-tcc and rowlock as two
// generator processes through the CLI on local servers, and checks the
// merged report against the shards' own files: counts are the sums, the
// flow P99 is that of all the shards' samples, the audit after the merge is
// clean, and each shard ran its own strategy instance's background loop
// through its load. stockbench merge of the shard files agrees.
func TestProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--procs", "2", "--strategies", "lua-tcc,rowlock",
		"--scenario", "flash,sustained", "--stock", "40", "--buyers", "24", "--pay-delay", "2ms-10ms", "--duration", "2s", "--warmup", "300ms",
		"--sweep-period", "100ms", "--seed", "5", "--calibrate", "0", "--quiet", "--out", dir,
		// Abandoned reservations with a TTL shorter than the run: those of
		// the last half second lapse while the generators settle, which
		// the audit after the merge must not count as stale.
		"--mix", "confirm=0.7,cancel=0.1,abandon=0.2", "--ttl", "500ms"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(res.Runs))
	}
	for _, run := range res.Runs {
		t.Run(run.Strategy+" "+run.Scenario, func(t *testing.T) {
			var shards []results.Run
			var shardDirs []string
			for i := range 2 {
				d := filepath.Join(dir, "shards", fmt.Sprintf("%s-%s-1", run.Strategy, run.Scenario), fmt.Sprintf("shard-%d", i))
				r, err := results.ReadJSON(filepath.Join(d, "results.json"))
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Runs) != 1 || r.Runs[0].Shard == nil || r.Runs[0].Shard.Index != i || r.Runs[0].Shard.Of != 2 {
					t.Fatalf("shard %d file: %+v", i, r.Runs)
				}
				shards = append(shards, r.Runs[0])
				shardDirs = append(shardDirs, d)
			}
			var flows int64
			counts := map[string]int64{}
			journeys := map[string]int64{}
			for i, s := range shards {
				if s.Flows == 0 {
					t.Errorf("shard %d completed no flow", i)
				}
				flows += s.Flows
				for op, m := range s.Counts {
					for cls, n := range m {
						counts[op+"/"+cls] += n
					}
				}
				for k, n := range s.Journeys {
					journeys[k] += n
				}
				// Its own instance's background loop ran through its load.
				if ran := s.Harness.BackgroundLoopSec; ran < s.DurationSec {
					t.Errorf("shard %d: background loop ran %.3f s, its load %.3f s", i, ran, s.DurationSec)
				}
				// On the servers' host, each generator samples their CPU.
				if s.Harness.ServerCPUPct == nil {
					t.Errorf("shard %d sampled no server CPU: %+v", i, s.Harness)
				}
				if s.Audit.Anomalies != 0 || len(s.Audit.SKUs) != 0 {
					t.Errorf("shard %d audited the stores itself: %+v", i, s.Audit)
				}
			}
			if run.Flows != flows || run.LatencyMS["flow"].Count != flows {
				t.Errorf("merged flows %d (histogram %d), shards' sum %d", run.Flows, run.LatencyMS["flow"].Count, flows)
			}
			merged := map[string]int64{}
			for op, m := range run.Counts {
				for cls, n := range m {
					merged[op+"/"+cls] += n
				}
			}
			if fmt.Sprint(merged) != fmt.Sprint(counts) || fmt.Sprint(run.Journeys) != fmt.Sprint(journeys) {
				t.Errorf("merged counts %v journeys %v; shards' sums %v %v", merged, run.Journeys, counts, journeys)
			}
			if want := p99OfShards(t, shards); run.LatencyMS["flow"].P99 != want {
				t.Errorf("merged flow P99 %v ms, P99 of all shards' samples %v ms", run.LatencyMS["flow"].P99, want)
			}
			if run.Scenario == "flash" {
				// The generators' slices are the whole sale, each buyer once.
				var buyers int64
				for _, n := range run.Journeys {
					buyers += n
				}
				if buyers != 24 {
					t.Errorf("the generators played %d buyers of 24: %v", buyers, run.Journeys)
				}
			}
			if len(run.Shards) != 2 {
				t.Errorf("merged run names %d generators", len(run.Shards))
			}
			a := run.Audit
			if n := a.Count(); n != 0 || a.ConfirmedUnits == 0 {
				t.Errorf("audit after the merge: %d anomalies, %d confirmed units: %+v", n, a.ConfirmedUnits, a)
			}
			if run.Scenario == "flash" && a.ConfirmedUnits != flows {
				// The whole run is measured: each confirmed unit is a flow.
				t.Errorf("audit confirmed %d units, flows %d", a.ConfirmedUnits, flows)
			}
			// stockbench merge of the shard files gives the same figures.
			mdir := filepath.Join(t.TempDir(), "merged")
			var mout, merr bytes.Buffer
			if code := Main(context.Background(), append([]string{"merge", mdir}, shardDirs...), &mout, &merr); code != exitOK {
				t.Fatalf("merge: exit %d: %s", code, merr.String())
			}
			m, err := results.ReadJSON(filepath.Join(mdir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Runs[0]; got.Flows != run.Flows || got.LatencyMS["flow"] != run.LatencyMS["flow"] || got.TPS != run.TPS {
				t.Errorf("stockbench merge: flows %d P99 %v TPS %v; run --procs: %d %v %v", got.Flows, got.LatencyMS["flow"].P99, got.TPS,
					run.Flows, run.LatencyMS["flow"].P99, run.TPS)
			}
		})
	}
}

// TestProcsInterrupt: Ctrl-C of a --procs run reaches its generators; the
// run ends as interrupted (exit 130, results written) and leaves no
// process behind.
func TestProcsInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var pids []int
	onSpawn = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		if pids = append(pids, pid); len(pids) == 2 {
			cancel()
		}
	}
	defer func() { onSpawn = nil }()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"run", "--backend", "local", "--procs", "2", "--strategies", "rowlock,conditional", "--stock", "10",
		"--buyers", "20", "--pay-delay", "1s-2s", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	if len(pids) != 2 {
		t.Fatalf("%d generators started, want 2 (and then the interrupt)", len(pids))
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil || !res.Interrupted {
		t.Fatalf("results after the interrupt: %v, interrupted %v", err, res != nil && res.Interrupted)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("generator %d still running", pid)
		}
	}
	if kids := children(); len(kids) > 0 {
		t.Fatalf("processes left running: %v", kids)
	}
}

// TestWithoutServerFlags: a generator's command line carries no server flag
// (the servers travel in its environment), in every form a flag takes.
func TestWithoutServerFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"none", []string{"--strategies", "lua-tcc", "--procs", "2"}, []string{"--strategies", "lua-tcc", "--procs", "2"}},
		{"value after", []string{"--mysql-dsn", "u:pw@tcp(h:1)/d", "--buyers", "8"}, []string{"--buyers", "8"}},
		{"with =", []string{"--redis-url=redis://:pw@h:1", "-mysql-dsn=u:pw@tcp(h:1)/d", "--quiet"}, []string{"--quiet"}},
		{"repeated dsn", []string{"--mysql-dsn", "a", "--mysql-dsn", "b", "--redis-addr", "h:1"}, []string{}},
		{"similar names kept", []string{"--mysql-cluster", "3", "--redis-cluster", "3"}, []string{"--mysql-cluster", "3", "--redis-cluster", "3"}},
		{"after --", []string{"--", "--mysql-dsn", "x"}, []string{"--", "--mysql-dsn", "x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := withoutServerFlags(c.args); !slices.Equal(got, c.want) {
				t.Fatalf("withoutServerFlags(%q) = %q, want %q", c.args, got, c.want)
			}
		})
	}
}
