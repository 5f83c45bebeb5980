package calibrate_test

import (
	"context"
	"encoding/csv"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/calibrate"
)

// BenchmarkEvalshaVsRedisBenchmark compares the calibration's EVALSHA
// ceiling with redis-benchmark's rate for the same script, key shape and
// concurrency, alternating the two so that a busy machine slows both alike.
// It reports our rate as a percentage of redis-benchmark's (the target is
// ≥ 90 %): a figure for the report, not a pass/fail test.
//
//	go test -run '^$' -bench EvalshaVsRedisBenchmark -benchtime 3x ./calibrate
func BenchmarkEvalshaVsRedisBenchmark(b *testing.B) {
	tool, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not installed")
	}
	if len(env.Endpoints.RedisCluster) > 0 {
		b.Skip("one Redis server only")
	}
	ctx := context.Background()
	const conc, secs = 32, 2
	ro := env.Endpoints.RedisOptions()
	host, port, _ := strings.Cut(ro.Addr, ":")
	key := "sb:bench:{hot}"
	if err := env.Redis.HSet(ctx, key, "available", int64(1)<<50, "occupied", 0).Err(); err != nil {
		b.Fatal(err)
	}
	defer env.Redis.Del(ctx, key)
	sha, err := env.Redis.ScriptLoad(ctx, calibrate.ReserveShaped).Result()
	if err != nil {
		b.Fatal(err)
	}
	var ours, theirs []float64
	for i := 0; i < b.N; i++ {
		cal, err := calibrate.Run(ctx, env.Endpoints, env.Conns, conc, secs*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		ours = append(ours, cal.RedisEvalshaOps)
		args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(conc), "-n", "200000", "--csv", "EVALSHA", sha, "1", key, "1"}
		if ro.Password != "" {
			args = append([]string{"-a", ro.Password, "--no-auth-warning"}, args...)
		}
		out, err := exec.CommandContext(ctx, tool, args...).Output()
		if err != nil {
			b.Fatalf("redis-benchmark: %v", err)
		}
		recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
		if err != nil || len(recs) < 2 || len(recs[1]) < 2 {
			b.Fatalf("redis-benchmark output %q: %v", out, err)
		}
		rps, err := strconv.ParseFloat(recs[1][1], 64)
		if err != nil {
			b.Fatalf("redis-benchmark rate %q: %v", recs[1][1], err)
		}
		theirs = append(theirs, rps)
	}
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(ours), "calib_ops/s")
	b.ReportMetric(med(theirs), "redis-benchmark_ops/s")
	b.ReportMetric(100*med(ours)/med(theirs), "pct")
}
