package runner

import (
	"math"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func fp(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// TestCostOf checks each figure of a run's cost against marks whose
// differences are known.
func TestCostOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	from := &costMark{at: t0, mysqlTrips: 1000, redisTrips: 50, lockWaits: 10, lockTimeMS: 100, lockOK: true,
		redisMain: 1.0, redisMainOK: true, machine: &results.MachineCPU{Total: 100, Idle: 60}}
	from.pool.db.WaitDuration = time.Second
	to := &costMark{at: t0.Add(2 * time.Second), mysqlTrips: 2300, redisTrips: 250, lockWaits: 60, lockTimeMS: 600, lockOK: true,
		redisMain: 1.5, redisMainOK: true, machine: &results.MachineCPU{Total: 104, Idle: 61}}
	to.pool.db.WaitDuration = 1500 * time.Millisecond
	to.pool.redis.WaitDurationNs = int64(500 * time.Millisecond)
	in := costInputs{flows: 100, window: 2 * time.Second, cores: 2, opTimeMS: 4000,
		cpu: cpuFigures{"mysql": 50, "redis": 10, "harness": 150}}

	tests := []struct {
		name string
		got  func(c *results.Cost) float64
		want float64
	}{
		// 50 % of a core for 2 s is 1 s of CPU: 10 ms a flow.
		{"mysql cpu µs/flow", func(c *results.Cost) float64 { return fp(c.MySQLCPUUSPerFlow) }, 10000},
		{"redis cpu µs/flow", func(c *results.Cost) float64 { return fp(c.RedisCPUUSPerFlow) }, 2000},
		{"harness cpu µs/flow", func(c *results.Cost) float64 { return fp(c.HarnessCPUUSPerFlow) }, 30000},
		{"mysql trips/flow", func(c *results.Cost) float64 { return fp(c.MySQLTripsPerFlow) }, 13},
		{"redis trips/flow", func(c *results.Cost) float64 { return fp(c.RedisTripsPerFlow) }, 2},
		{"row lock waits", func(c *results.Cost) float64 { return float64(*c.RowLockWaits) }, 50},
		{"row lock ms/flow", func(c *results.Cost) float64 { return fp(c.RowLockMSPerFlow) }, 5},
		// 0.5 s of the main thread over 2 s.
		{"redis main thread %", func(c *results.Cost) float64 { return fp(c.RedisMainThreadPct) }, 25},
		// 4 s of core time, 1 of it idle.
		{"machine busy %", func(c *results.Cost) float64 { return fp(c.MachineBusyPct) }, 75},
		{"mysql pool wait ms", func(c *results.Cost) float64 { return c.MySQLPoolWaitMS }, 500},
		{"pool wait ms/flow", func(c *results.Cost) float64 { return c.PoolWaitMSPerFlow }, 10},
		{"op time", func(c *results.Cost) float64 { return c.OpTimeMS }, 4000},
	}
	c := costOf(from, to, in)
	for _, tc := range tests {
		if got := tc.got(c); !near(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if c.GeneratorCPUUSPerFlow != nil || c.Probe {
		t.Errorf("a strategy's run has a generator figure: %+v", c)
	}
}

// TestCostOfPartial: what could not be read is absent, never zero.
func TestCostOfPartial(t *testing.T) {
	t0 := time.Now()
	cases := []struct {
		name     string
		from, to *costMark
		in       costInputs
		check    func(c *results.Cost) string
	}{
		{"no marks: CPU only", nil, nil, costInputs{flows: 10, window: time.Second, cpu: cpuFigures{"harness": 10}},
			func(c *results.Cost) string {
				if c.HarnessCPUUSPerFlow == nil || c.MySQLTripsPerFlow != nil || c.RowLockWaits != nil {
					return "want harness CPU and no counter figures"
				}
				return ""
			}},
		{"no flows: nothing per flow", &costMark{at: t0}, &costMark{at: t0.Add(time.Second), mysqlTrips: 5},
			costInputs{window: time.Second, cpu: cpuFigures{"mysql": 10}},
			func(c *results.Cost) string {
				if c.MySQLCPUUSPerFlow != nil || c.MySQLTripsPerFlow != nil || c.MySQLTrips != 5 {
					return "want totals and no per-flow figures"
				}
				return ""
			}},
		{"status unread at one end", &costMark{at: t0, lockOK: true, redisMainOK: true}, &costMark{at: t0.Add(time.Second)},
			costInputs{flows: 1, window: time.Second},
			func(c *results.Cost) string {
				if c.RowLockWaits != nil || c.RedisMainThreadPct != nil || c.MachineBusyPct != nil || c.MySQLCPUUSPerFlow != nil {
					return "want no lock, Redis thread, machine or CPU figure"
				}
				return ""
			}},
		{"probe: the harness is the generator", nil, nil, costInputs{flows: 10, window: time.Second, cpu: cpuFigures{"harness": 10}, probe: true},
			func(c *results.Cost) string {
				if !c.Probe || c.GeneratorCPUUSPerFlow == nil || *c.GeneratorCPUUSPerFlow != *c.HarnessCPUUSPerFlow {
					return "want the generator's figure equal to the harness's"
				}
				return ""
			}},
	}
	for _, tc := range cases {
		if msg := tc.check(costOf(tc.from, tc.to, tc.in)); msg != "" {
			t.Errorf("%s: %s", tc.name, msg)
		}
	}
}

// TestCostNetwork: round trips × each store's RTT, per flow.
func TestCostNetwork(t *testing.T) {
	m, r := 0.5, 0.1
	cases := []struct {
		name string
		run  results.Run
		want *float64
	}{
		{"both stores", results.Run{Cost: &results.Cost{Flows: 10, MySQLTrips: 40, RedisTrips: 100}, Harness: results.Harness{MySQLRTTMS: &m, RedisRTTMS: &r}}, ptr(3.0)},
		{"mysql only", results.Run{Cost: &results.Cost{Flows: 10, MySQLTrips: 40, RedisTrips: 100}, Harness: results.Harness{MySQLRTTMS: &m}}, ptr(2.0)},
		{"no rtt", results.Run{Cost: &results.Cost{Flows: 10, MySQLTrips: 40}}, nil},
		{"no cost", results.Run{Harness: results.Harness{MySQLRTTMS: &m}}, nil},
	}
	for _, tc := range cases {
		costNetwork(&tc.run)
		var got *float64
		if tc.run.Cost != nil {
			got = tc.run.Cost.NetworkMSPerFlow
		}
		if (got == nil) != (tc.want == nil) || (got != nil && !near(*got, *tc.want)) {
			t.Errorf("%s: network ms/flow %v, want %v", tc.name, fp(got), fp(tc.want))
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestRedisMainThreadSec reads INFO cpu as Redis 7 writes it.
func TestRedisMainThreadSec(t *testing.T) {
	cases := []struct {
		info string
		want float64
		ok   bool
	}{
		{"# CPU\r\nused_cpu_sys:10.5\r\nused_cpu_user:3.2\r\nused_cpu_sys_main_thread:1.25\r\nused_cpu_user_main_thread:0.75\r\n", 2, true},
		{"# CPU\r\nused_cpu_sys:10.5\r\nused_cpu_user:3.2\r\n", 0, false},
		{"used_cpu_sys_main_thread:x\r\nused_cpu_user_main_thread:1\r\n", 0, false},
	}
	for _, tc := range cases {
		got, ok := redisMainThreadSec(sysstat.ParseInfo(tc.info))
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("redisMainThreadSec(%q) = %v, %v; want %v, %v", tc.info, got, ok, tc.want, tc.ok)
		}
	}
}
