package results

// Drift is how a run's figures moved over its measured phase: resources
// sampled every Every seconds through the load, and throughput, latency
// and those resources per window. A long run shows here whether it stayed
// flat — the store's tables, the servers' and the harness's memory, the
// outbox relay's lag — and, in First and Last, the change from its first
// window to its last.
type Drift struct {
	// EverySec is the sampling period of Points.
	EverySec float64 `json:"every_sec"`
	// Points are the samples, from the start of load (warm-up included:
	// Second is negative there).
	Points []DriftPoint `json:"points"`
	// Minutes are the measured phase's windows of one minute (the last
	// may be shorter).
	Minutes []DriftWindow `json:"minutes"`
	// WindowSec is the length of First and Last: a sixth of the measured
	// phase, between 10 s and 5 minutes.
	WindowSec float64     `json:"window_sec"`
	First     DriftWindow `json:"first"`
	Last      DriftWindow `json:"last"`
	// FlowsChangePct and P99ChangePct are Last against First, in percent
	// (negative: fewer flows, or a lower P99).
	FlowsChangePct float64 `json:"flows_change_pct"`
	P99ChangePct   float64 `json:"p99_change_pct"`
	// What the drift means (a relay falling behind, what a change in
	// flows/s followed) is analysis' verdict (analysis.DriftVerdict),
	// decided from these figures when a report is made, not stored.
}

// DriftPoint is one sample of a run's resources.
type DriftPoint struct {
	// Second is the time since the start of the measured phase.
	Second float64 `json:"second"`
	// HarnessRSSBytes is the harness process's resident memory; MySQLRSS
	// and RedisRSS the server processes' (local backend: absent when the
	// process is not on this host), RedisUsedBytes Redis's used_memory.
	HarnessRSSBytes  int64 `json:"harness_rss_bytes"`
	HarnessHeapBytes int64 `json:"harness_heap_bytes"`
	MySQLRSSBytes    int64 `json:"mysql_rss_bytes,omitempty"`
	RedisUsedBytes   int64 `json:"redis_used_bytes,omitempty"`
	// OrdersRows and OutboxRows are the tables' row counts as InnoDB
	// estimates them (information_schema; a count would scan the table);
	// TableBytes is the data and index size of the stockbench tables.
	OrdersRows int64 `json:"orders_rows"`
	OutboxRows int64 `json:"outbox_rows"`
	TableBytes int64 `json:"table_bytes"`
	// BufferPoolDiskReads is MySQL's Innodb_buffer_pool_reads since the
	// server started: page reads the buffer pool missed and took from
	// disk. Its growth between samples shows when the tables outgrow the
	// buffer pool (the cost of table growth, named).
	BufferPoolDiskReads int64 `json:"buffer_pool_disk_reads,omitempty"`
	// HistoryLength is InnoDB's history list length: the transactions
	// whose undo records the purge has not yet removed. While it grows,
	// every change leaves old index entries and undo behind that later
	// reads step over and the purge must catch up with — a cost of the
	// store that grows with the run, not with its tables' size.
	HistoryLength int64 `json:"innodb_history_length,omitempty"`
	// RelayLagMS is the age of the oldest event the outbox relay has not
	// applied (0 when none waits), RelayBacklog how many wait. Absent for
	// strategies without a relay.
	RelayLagMS   *float64 `json:"relay_lag_ms,omitempty"`
	RelayBacklog *int64   `json:"relay_backlog,omitempty"`
	// CPUSec is the CPU time, in seconds, each process had used by the
	// sample: "mysql", "redis", "harness", as the run's CPU figures read
	// them (a restarted server's count starts again).
	CPUSec map[string]float64 `json:"cpu_sec,omitempty"`
	// RefCPUMS is the CPU time a fixed reference computation (SHA-256
	// over a block in cache; the same at every sample) took on the
	// sampler's thread. It rises when the machine computes slower (a core
	// shared on the host, a lower clock), whatever the run does.
	RefCPUMS float64 `json:"ref_cpu_ms,omitempty"`
	// Machine is the whole machine's CPU time by kind at the sample: what
	// every process on it shares (the kernel, the hypervisor). Absent
	// where /proc/stat cannot be read.
	Machine *MachineCPU `json:"machine_cpu_sec,omitempty"`
}

// MachineCPU is the CPU time of all the machine's cores since it booted,
// in seconds (/proc/stat), by kind: Kernel is system, irq and softirq time
// (system calls, the network stack); Steal the time the hypervisor gave
// the cores to other guests; Idle idle and iowait.
type MachineCPU struct {
	Total  float64 `json:"total"`
	Kernel float64 `json:"kernel"`
	Steal  float64 `json:"steal"`
	Idle   float64 `json:"idle"`
}

// MachineShare is how the machine's cores spent a window, in percent of
// their time (MachineCPU's kinds; the rest is user time).
type MachineShare struct {
	KernelPct float64 `json:"kernel_pct"`
	StealPct  float64 `json:"steal_pct"`
	IdlePct   float64 `json:"idle_pct"`
}

// DriftWindow is a stretch of the measured phase: flows per second and the
// P99 flow latency of the flows whose confirm started in it, and the
// resources at its last sample (the relay lag: its largest sample).
type DriftWindow struct {
	FromSec         float64  `json:"from_sec"`
	ToSec           float64  `json:"to_sec"`
	FlowsPerSec     float64  `json:"flows_per_sec"`
	FlowP99MS       float64  `json:"flow_p99_ms"`
	HarnessRSSBytes int64    `json:"harness_rss_bytes,omitempty"`
	MySQLRSSBytes   int64    `json:"mysql_rss_bytes,omitempty"`
	RedisUsedBytes  int64    `json:"redis_used_bytes,omitempty"`
	OrdersRows      int64    `json:"orders_rows,omitempty"`
	OutboxRows      int64    `json:"outbox_rows,omitempty"`
	RelayLagMaxMS   *float64 `json:"relay_lag_max_ms,omitempty"`
	// DiskReadsPerSec is the growth of BufferPoolDiskReads over the
	// window's samples, per second.
	DiskReadsPerSec float64 `json:"disk_reads_per_sec,omitempty"`
	// HistoryLength is InnoDB's history list length at the window's last
	// sample (DriftPoint.HistoryLength).
	HistoryLength int64 `json:"innodb_history_length,omitempty"`
	// CPUMSPerFlow is each process's CPU time per flow between the
	// window's first and last samples, in ms; RefCPUMS the median
	// reference cost of its samples.
	CPUMSPerFlow map[string]float64 `json:"cpu_ms_per_flow,omitempty"`
	RefCPUMS     float64            `json:"ref_cpu_ms,omitempty"`
	// Machine is how the machine's cores spent the time between the
	// window's first and last samples.
	Machine *MachineShare `json:"machine,omitempty"`
}

// DriftWindowSec is the length of the first and last windows compared for
// a measured phase of d seconds: a sixth of it, between 10 s and 5 min.
func DriftWindowSec(d float64) float64 { return min(300, max(10, d/6)) }

// ChangePct is (last − first) / first in percent; 0 when first is 0.
func ChangePct(first, last float64) float64 {
	if first == 0 {
		return 0
	}
	return 100 * (last - first) / first
}
