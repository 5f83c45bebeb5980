package results

// Abort records a run whose load a live threshold (--abort-on) stopped:
// the load stopped there, then the run was settled, audited and written
// as any other.
type Abort struct {
	// Threshold is the threshold as written ("anomaly", "p99>500ms for 30s").
	Threshold string `json:"threshold"`
	// Reason is one line saying what was seen.
	Reason string `json:"reason"`
	// BreachedAtSec is when the threshold was breached (the probe snapshot
	// that saw the first violation, or the end of the last second of the
	// streak), and StoppedAtSec when the last buyer had stopped, both from
	// the start of the measured phase: the difference is how long the
	// abort took.
	BreachedAtSec float64 `json:"breached_at_sec"`
	StoppedAtSec  float64 `json:"stopped_at_sec"`
	// PlannedSec is the measured phase the run was planned to last (0:
	// untimed, a flash or race).
	PlannedSec float64 `json:"planned_sec,omitempty"`
}

// Breach is a --threshold the finished run breached (checked on its
// series and audit; the run was not stopped).
type Breach struct {
	Threshold string  `json:"threshold"`
	AtSec     float64 `json:"at_sec"`
	Reason    string  `json:"reason"`
}

// StoreSecond is what the stores' own counters said of one second of the
// measured phase: MySQL's SHOW GLOBAL STATUS and Redis's INFO (summed over
// a cluster's nodes), sampled at each second's end; counters are the
// difference over the second, gauges the value at its end. The harness's
// own probe and samplers are among the clients counted.
type StoreSecond struct {
	// MySQLRowLockTimeMS: Innodb_row_lock_time's rise (ms spent waiting
	// for row locks, summed over the waiters); MySQLRowLockWaits:
	// Innodb_row_lock_waits'.
	MySQLRowLockTimeMS float64 `json:"mysql_row_lock_time_ms"`
	MySQLRowLockWaits  int64   `json:"mysql_row_lock_waits"`
	// MySQLCommits, MySQLRollbacks: Com_commit and Com_rollback (explicit
	// COMMIT/ROLLBACK statements; autocommit statements are not counted).
	MySQLCommits   int64 `json:"mysql_commits"`
	MySQLRollbacks int64 `json:"mysql_rollbacks"`
	// MySQLThreadsRunning: Threads_running at the second's end.
	MySQLThreadsRunning int64 `json:"mysql_threads_running"`
	// MySQLBufferPoolReads: Innodb_buffer_pool_reads (reads from disk).
	MySQLBufferPoolReads int64 `json:"mysql_buffer_pool_reads"`
	// RedisOpsPerSec: instantaneous_ops_per_sec at the second's end.
	RedisOpsPerSec float64 `json:"redis_ops_per_sec"`
	// RedisCPUPct: used_cpu_sys + used_cpu_user's rise, % of one core.
	RedisCPUPct float64 `json:"redis_cpu_pct"`
	// RedisClients: connected_clients; RedisUsedBytes: used_memory.
	RedisClients   int64 `json:"redis_clients"`
	RedisUsedBytes int64 `json:"redis_used_bytes"`
}
