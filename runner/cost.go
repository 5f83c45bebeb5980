package runner

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// costMeter reads, at the start and the end of the measured phase (the
// CPU sampler's window), the counters a run's cost per flow is made of:
// the pools' round trips and waits, InnoDB's row-lock counters, Redis's
// main-thread CPU and the machine's CPU. The strategy's pools (pools) are
// the ones counted; status asks the servers (the run's own pools).
type costMeter struct {
	pools  servers.Conns
	status servers.Conns
	// inStrategy reads the calls' time inside the strategy so far (ns).
	inStrategy func() int64

	mu       sync.Mutex
	from, to *costMark
}

// costMark is one reading of every counter; ok flags say which were read.
type costMark struct {
	at          time.Time
	mysqlTrips  int64
	redisTrips  int64
	pool        poolMark
	lockWaits   int64
	lockTimeMS  float64
	lockOK      bool
	redisMain   float64 // seconds of CPU of Redis's main thread
	redisMainOK bool
	machine     *results.MachineCPU
	pressure    time.Duration // the machine's CPU pressure total (PSI some)
	pressureOK  bool
	inStrategy  int64 // ns
}

// statusTimeout bounds each status read, so a stalled server costs a
// missing figure, never the run.
const statusTimeout = 5 * time.Second

// read takes a mark. At the start the trip counters are read before the
// status queries, at the end after them, so that the meter's own requests
// (on the run's pools, which may be the strategy's) stay out of the count.
func (m *costMeter) read(start bool) *costMark {
	k := &costMark{}
	trips := func() {
		if t := m.pools.Trips; t != nil {
			k.mysqlTrips, k.redisTrips = t.MySQL.Load(), t.Redis.Load()
		}
		if m.inStrategy != nil {
			k.inStrategy = m.inStrategy()
		}
	}
	if start {
		trips()
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	if m.status.DB != nil {
		k.lockWaits, k.lockTimeMS, k.lockOK = rowLockStatus(ctx, m.status.DB)
	}
	if c, ok := m.status.Redis.(*redis.Client); ok {
		if info, err := c.Info(ctx, "cpu").Result(); err == nil {
			k.redisMain, k.redisMainOK = redisMainThreadSec(sysstat.ParseInfo(info))
		}
	}
	if m.pools.DB != nil && m.pools.Redis != nil {
		k.pool = markPools(m.pools)
	}
	k.machine = machineCPU()
	k.pressure, k.pressureOK = sysstat.CPUPressure()
	k.at = time.Now()
	if !start {
		trips()
	}
	return k
}

// begin marks the start of the measured phase.
func (m *costMeter) begin() {
	if m == nil {
		return
	}
	k := m.read(true)
	m.mu.Lock()
	m.from, m.to = k, nil
	m.mu.Unlock()
}

// mark marks its end (once; a later mark is ignored).
func (m *costMeter) mark() {
	if m == nil {
		return
	}
	m.mu.Lock()
	done := m.from == nil || m.to != nil
	m.mu.Unlock()
	if done {
		return
	}
	k := m.read(false)
	m.mu.Lock()
	if m.to == nil {
		m.to = k
	}
	m.mu.Unlock()
}

// marks returns both marks, taking the end now if it was not taken; nil
// when the phase never began.
func (m *costMeter) marks() (from, to *costMark) {
	if m == nil {
		return nil, nil
	}
	m.mark()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.from, m.to
}

// rowLockStatus reads Innodb_row_lock_waits and Innodb_row_lock_time (ms).
func rowLockStatus(ctx context.Context, db *sql.DB) (waits int64, timeMS float64, ok bool) {
	st, err := sysstat.MySQLStatus(ctx, db, "Innodb_row_lock_waits", "Innodb_row_lock_time")
	w, okW := st["Innodb_row_lock_waits"]
	t, okT := st["Innodb_row_lock_time"]
	if err != nil || !okW || !okT {
		return 0, 0, false
	}
	return int64(w), t, true
}

// redisMainThreadSec is the CPU seconds of Redis's main thread from an
// INFO cpu reply's fields (used_cpu_sys_main_thread +
// used_cpu_user_main_thread, Redis 6.2 and later); ok is false without
// them.
func redisMainThreadSec(info map[string]float64) (float64, bool) {
	sys, ok1 := info["used_cpu_sys_main_thread"]
	user, ok2 := info["used_cpu_user_main_thread"]
	if !ok1 || !ok2 {
		return 0, false
	}
	return sys + user, true
}

// costInputs is what costOf needs of a run besides the meter's marks.
type costInputs struct {
	flows  int64
	window time.Duration
	cores  int
	cpu    cpuFigures
	// opTimeMS is the clients' time in store calls over the phase.
	opTimeMS float64
	probe    bool
}

// costOf turns two marks and the run's figures into its cost per flow.
// Without both marks the counter figures are left out; the CPU figures
// come from the CPU sampler and stand on their own.
func costOf(from, to *costMark, in costInputs) *results.Cost {
	c := &results.Cost{Flows: in.flows, WindowSec: in.window.Seconds(), Cores: in.cores, OpTimeMS: in.opTimeMS, Probe: in.probe}
	perFlow := func(total float64) *float64 {
		if in.flows <= 0 {
			return nil
		}
		v := total / float64(in.flows)
		return &v
	}
	windowUS := float64(in.window) / float64(time.Microsecond)
	cpuPerFlow := func(src string) *float64 {
		pct, ok := in.cpu[src]
		if !ok || windowUS <= 0 {
			return nil
		}
		return perFlow(pct / 100 * windowUS)
	}
	c.MySQLCPUPct, c.RedisCPUPct, c.HarnessCPUPct = in.cpu.of("mysql"), in.cpu.of("redis"), in.cpu.of("harness")
	c.MySQLCPUUSPerFlow, c.RedisCPUUSPerFlow, c.HarnessCPUUSPerFlow = cpuPerFlow("mysql"), cpuPerFlow("redis"), cpuPerFlow("harness")
	c.ServiceCPUPct, c.ServiceCPUUSPerFlow = in.cpu.of(serviceCPU), cpuPerFlow(serviceCPU)
	c.MySQLRunQueuePct, c.RedisRunQueuePct = in.cpu.of(runQueue+"mysql"), in.cpu.of(runQueue+"redis")
	c.HarnessRunQueuePct = in.cpu.of(runQueue + "harness")
	if in.probe && c.HarnessCPUUSPerFlow != nil {
		v := *c.HarnessCPUUSPerFlow
		c.GeneratorCPUUSPerFlow = &v
	}
	if from == nil || to == nil {
		return c
	}
	secs := to.at.Sub(from.at).Seconds()
	c.MySQLTrips, c.RedisTrips = to.mysqlTrips-from.mysqlTrips, to.redisTrips-from.redisTrips
	c.StrategyTimeMS = float64(to.inStrategy-from.inStrategy) / 1e6
	c.MySQLTripsPerFlow, c.RedisTripsPerFlow = perFlow(float64(c.MySQLTrips)), perFlow(float64(c.RedisTrips))
	if from.lockOK && to.lockOK {
		w, ms := to.lockWaits-from.lockWaits, to.lockTimeMS-from.lockTimeMS
		c.RowLockWaits, c.RowLockTimeMS = &w, &ms
		c.RowLockWaitsPerFlow, c.RowLockMSPerFlow = perFlow(float64(w)), perFlow(ms)
	}
	if from.redisMainOK && to.redisMainOK && secs > 0 {
		v := (to.redisMain - from.redisMain) / secs * 100
		c.RedisMainThreadPct = &v
	}
	if s := machineShare(from.machine, to.machine); s != nil {
		v := 100 - s.IdlePct
		c.MachineBusyPct = &v
	}
	if from.pressureOK && to.pressureOK && secs > 0 {
		v := min(100, max(0, (to.pressure-from.pressure).Seconds()/secs*100))
		c.CPUPressurePct = &v
	}
	c.MySQLPoolWaitMS = float64(to.pool.db.WaitDuration-from.pool.db.WaitDuration) / 1e6
	c.RedisPoolWaitMS = float64(to.pool.redis.WaitDurationNs-from.pool.redis.WaitDurationNs) / 1e6
	if p := perFlow(c.MySQLPoolWaitMS + c.RedisPoolWaitMS); p != nil {
		c.PoolWaitMSPerFlow = *p
	}
	return c
}

// opTimeMS is the clients' time inside store calls: count × mean latency
// of reserve, confirm and cancel.
func opTimeMS(lat map[string]results.Percentiles) float64 {
	var ms float64
	for _, op := range []string{"reserve", "confirm", "cancel"} {
		p := lat[op]
		ms += float64(p.Count) * p.Mean
	}
	return ms
}

// costNetwork adds the flow's time on the wire to a run's cost: its round
// trips × each store's RTT, measured before the run (runs[].harness).
// Nothing without a cost or an RTT.
func costNetwork(run *results.Run) {
	c, h := run.Cost, run.Harness
	if c == nil || c.Flows <= 0 || (h.MySQLRTTMS == nil && h.RedisRTTMS == nil) {
		return
	}
	var ms float64
	if h.MySQLRTTMS != nil {
		ms += float64(c.MySQLTrips) * *h.MySQLRTTMS
	}
	if h.RedisRTTMS != nil {
		ms += float64(c.RedisTrips) * *h.RedisRTTMS
	}
	v := ms / float64(c.Flows)
	c.NetworkMSPerFlow = &v
}
