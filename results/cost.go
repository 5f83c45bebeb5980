package results

// Cost is what the measured phase cost each tier, per completed flow
// (reserve + confirm): the CPU of MySQL, Redis and the harness process,
// the stores' round trips, and the time spent waiting by cause. Every
// figure is a difference of counters read at the start and the end of the
// measured phase (warm-up excluded); a figure that could not be read is
// absent, never zero. runs[].cost in results.json.
type Cost struct {
	// Flows are the completed flows the figures are divided by, WindowSec
	// the measured phase's length.
	Flows     int64   `json:"flows"`
	WindowSec float64 `json:"window_sec"`
	// Cores is the machine's core count (all tiers share them unless a
	// budget says otherwise).
	Cores int `json:"cores"`

	// CPU microseconds per flow: MySQL's and Redis's server processes
	// (from /proc, or the engine's stats for containers) and the harness
	// process — the strategy's service code and the load generator
	// together, in one process.
	MySQLCPUUSPerFlow   *float64 `json:"mysql_cpu_us_per_flow,omitempty"`
	RedisCPUUSPerFlow   *float64 `json:"redis_cpu_us_per_flow,omitempty"`
	HarnessCPUUSPerFlow *float64 `json:"harness_cpu_us_per_flow,omitempty"`
	// GeneratorCPUUSPerFlow is the load generator's own CPU per flow: set
	// on a run of the null strategy only (a harness-cost probe that
	// touches no store), where the harness's CPU is the generator's.
	GeneratorCPUUSPerFlow *float64 `json:"generator_cpu_us_per_flow,omitempty"`
	// ServiceCPUUSPerFlow and ServiceCPUPct are the service processes'
	// CPU (run --service process:N, summed over the instances, from
	// /proc): the strategy's code, its pools and the API's server side.
	// The harness figures are then the load generator and the API's
	// client side alone.
	ServiceCPUUSPerFlow *float64 `json:"service_cpu_us_per_flow,omitempty"`
	ServiceCPUPct       *float64 `json:"service_cpu_pct,omitempty"`
	// Probe marks a harness-cost probe's run (the null strategy): it sold
	// nothing, was not audited, and is never ranked.
	Probe bool `json:"probe,omitempty"`

	// MySQLCPUPct, RedisCPUPct and HarnessCPUPct are the same CPU in
	// percent of one core over the phase (as runs[].harness has them);
	// RedisMainThreadPct is Redis's main thread alone (INFO cpu's
	// used_cpu_*_main_thread), the thread that runs every command.
	MySQLCPUPct        *float64 `json:"mysql_cpu_pct,omitempty"`
	RedisCPUPct        *float64 `json:"redis_cpu_pct,omitempty"`
	HarnessCPUPct      *float64 `json:"harness_cpu_pct,omitempty"`
	RedisMainThreadPct *float64 `json:"redis_main_thread_pct,omitempty"`
	// MachineBusyPct is the share of all the machine's cores not idle over
	// the phase (100: every core busy), whoever used them (/proc/stat).
	MachineBusyPct *float64 `json:"machine_busy_pct,omitempty"`
	// Waiting for a core: MySQLRunQueuePct, RedisRunQueuePct and
	// HarnessRunQueuePct are the time each tier's threads spent runnable
	// but not running (on a run queue: /proc/PID/task/*/schedstat), in
	// percent of the phase (100: one thread waiting all the time), absent
	// for a container or without schedstats; CPUPressurePct is the share
	// of the phase in which any task of the machine waited for a core
	// (/proc/pressure/cpu, "some"). A tier that waits for a core while it
	// holds a lock slows everyone: these tell a starved machine from a
	// slower strategy.
	MySQLRunQueuePct   *float64 `json:"mysql_run_queue_pct,omitempty"`
	RedisRunQueuePct   *float64 `json:"redis_run_queue_pct,omitempty"`
	HarnessRunQueuePct *float64 `json:"harness_run_queue_pct,omitempty"`
	CPUPressurePct     *float64 `json:"cpu_pressure_pct,omitempty"`

	// Round trips the strategy's pools made (counted in the drivers:
	// go-sql-driver through a counting connector, go-redis through a
	// hook; a Redis pipeline is one), in all and per flow. They include
	// the few requests of the live line and the mid-run probe that share
	// the pools.
	MySQLTrips        int64    `json:"mysql_trips"`
	RedisTrips        int64    `json:"redis_trips"`
	MySQLTripsPerFlow *float64 `json:"mysql_trips_per_flow,omitempty"`
	RedisTripsPerFlow *float64 `json:"redis_trips_per_flow,omitempty"`

	// InnoDB's row-lock waits over the phase (SHOW GLOBAL STATUS:
	// Innodb_row_lock_waits, Innodb_row_lock_time — the server's whole
	// count, milliseconds), in all and per flow. Absent where the server
	// did not answer.
	RowLockWaits        *int64   `json:"row_lock_waits,omitempty"`
	RowLockTimeMS       *float64 `json:"row_lock_time_ms,omitempty"`
	RowLockWaitsPerFlow *float64 `json:"row_lock_waits_per_flow,omitempty"`
	RowLockMSPerFlow    *float64 `json:"row_lock_ms_per_flow,omitempty"`

	// Pool waits over the phase: time callers spent waiting for a free
	// connection (database/sql's WaitDuration, go-redis's pool wait), in
	// all and per flow.
	MySQLPoolWaitMS   float64 `json:"mysql_pool_wait_ms"`
	RedisPoolWaitMS   float64 `json:"redis_pool_wait_ms"`
	PoolWaitMSPerFlow float64 `json:"pool_wait_ms_per_flow"`

	// NetworkMSPerFlow is round trips × the measured RTT of each store
	// (runs[].harness.*_rtt_ms), per flow: the flow's time on the wire.
	// Absent without an RTT.
	NetworkMSPerFlow *float64 `json:"network_ms_per_flow,omitempty"`
	// OpTimeMS is the clients' time inside store calls over the phase: the
	// sum over reserve, confirm and cancel of count × mean latency.
	OpTimeMS float64 `json:"op_time_ms"`
	// StrategyTimeMS is the calls' time inside the strategy: from the
	// service model's admission to the answer (OpTimeMS less the wait in
	// the service's queue and the open loop's lateness), measured by the
	// driver. It is what the wait shares (lock, pool, network) are shares
	// of.
	StrategyTimeMS float64 `json:"strategy_time_ms"`

	// Budget is the CPU each tier was allowed (--cpus, --cpuset), absent
	// when the tiers shared the machine.
	Budget *CPUBudget `json:"budget,omitempty"`
}

// CPUBudget is the CPU each tier may use, in cores (a quota, or the number
// of cores it is pinned to); nil for a tier without a budget.
type CPUBudget struct {
	MySQL   *float64 `json:"mysql,omitempty"`
	Redis   *float64 `json:"redis,omitempty"`
	Harness *float64 `json:"harness,omitempty"`
	// CPUSet are the core ids each pinned tier ran on (--cpuset), by
	// tier (mysql, redis, harness); tiers sharing a core shared its time.
	CPUSet map[string]string `json:"cpuset,omitempty"`
}
