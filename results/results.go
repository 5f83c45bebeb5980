// Package results is the results.json model — a documented, versioned
// public format (docs/results-format.md): its types, reading and writing,
// and the derived views every renderer shares (rows of repeats folded to
// medians, aggregates, anomaly classes, the curve verdict). It has no
// drawing dependencies; the runner fills it and the reports package
// renders it.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
)

// Format names the version of the results.json layout. v3 made config a
// typed object (a sweep's swept settings named in config.swept) and moved
// the harness's own figures out of runs[].counters into runs[].harness; v2
// renamed the keys of audit.skus[].redis to lower case.
const Format = "stockbench.results/v3"

// olderFormats are the earlier layouts ReadJSON converts: v1 differs from
// v2 only in the case of audit.skus[].redis keys, which decoding ignores.
var olderFormats = []string{"stockbench.results/v2", "stockbench.results/v1"}

// Results is the content of results.json.
type Results struct {
	Format string `json:"format"`
	// Config is the fully resolved configuration of the run.
	Config Config `json:"config"`
	Env    Env    `json:"env"`
	Runs   []Run  `json:"runs"`
	// Calibration is present unless calibration was turned off.
	Calibration *Calibration `json:"calibration,omitempty"`
	// Sweep is present for `stockbench sweep`: the parameter and its values.
	Sweep *Sweep `json:"sweep,omitempty"`
	// Curve is present for `stockbench curve`: the highest rate each
	// strategy held under the latency SLO.
	Curve *Curve `json:"curve,omitempty"`
	// Aggregates are present when each strategy ran more than once (--repeat).
	Aggregates []Aggregate `json:"aggregates,omitempty"`
	// Interrupted is true when the run was stopped (Ctrl-C) before it ended;
	// the runs hold what was measured until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Env describes where the run happened. It never holds a password.
type Env struct {
	Backend string `json:"backend"`
	// DockerNetwork is how the docker backend reached its containers:
	// "host" (loopback, no proxy), "published" (ports through the engine)
	// or "netns" (behind a network profile: a namespace of their own over
	// the run's veth).
	DockerNetwork string `json:"docker_network,omitempty"`
	// NetworkPath says how the run's network profile (config rtt) was
	// built: the namespace and how packets are delayed; absent on
	// loopback.
	NetworkPath string `json:"network_path,omitempty"`
	// RedisClusterNodes and MySQLClusterNodes count a cluster's nodes (absent
	// for one server); MySQLSpread says whether the pools spread their
	// connections over the MySQL nodes.
	RedisClusterNodes int  `json:"redis_cluster_nodes,omitempty"`
	MySQLClusterNodes int  `json:"mysql_cluster_nodes,omitempty"`
	MySQLSpread       bool `json:"mysql_spread,omitempty"`
	// MySQLCausalReads is how a MySQL cluster's connections read what other
	// nodes committed (wsrep, group-replication, none;
	// --mysql-causal-reads), MySQLCausalAuto whether auto chose it by
	// asking the nodes. Clusters only.
	MySQLCausalReads string `json:"mysql_causal_reads,omitempty"`
	MySQLCausalAuto  bool   `json:"mysql_causal_reads_auto,omitempty"`
	// ClusterOnOneHost says every node of the run's cluster(s) listens on
	// a loopback address: the nodes share this machine's cores, so the run
	// shows the mechanics of the cluster, not its scaling.
	ClusterOnOneHost bool `json:"cluster_on_one_host,omitempty"`
	// LoadAverage is the machine's 1, 5 and 15 minute load averages when
	// the run started (/proc/loadavg; absent where there is none): how
	// busy the cores the figures were measured on already were.
	LoadAverage  string `json:"load_average,omitempty"`
	MySQLVersion string `json:"mysql_version"`
	RedisVersion string `json:"redis_version"`
	// Durability settings as reported by the servers.
	InnodbFlushLogAtTrxCommit string `json:"innodb_flush_log_at_trx_commit"`
	// MySQLIsolation is the server's default isolation level for new
	// sessions (REPEATABLE-READ on a stock InnoDB server).
	MySQLIsolation  string `json:"mysql_isolation,omitempty"`
	SyncBinlog      string `json:"sync_binlog"`
	RedisAppendOnly string `json:"redis_appendonly"`
	// RedisPersistence is the AOF setting stockbench gave the Redis it
	// started (none, everysec, always; --redis-persistence): what a Redis
	// restart keeps. Absent for external servers.
	RedisPersistence string `json:"redis_persistence,omitempty"`
	CPUModel         string `json:"cpu_model"`
	Cores            int    `json:"cores"`
	GoVersion        string `json:"go_version"`
	ToolVersion      string `json:"tool_version"`
	StartedAt        string `json:"started_at"`
}

// Percentiles of one latency distribution, in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// Run is one strategy on one scenario.
type Run struct {
	Strategy string `json:"strategy"`
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	// DurationSec is the measured phase: from the start barrier to the last
	// buyer's end.
	DurationSec float64 `json:"duration_sec"`
	// TPS is completed reserve+confirm flows per second of the measured phase.
	TPS float64 `json:"tps"`
	// Flows is the number of completed reserve+confirm flows.
	Flows int64 `json:"flows"`
	// AttemptsPerSec is reserve attempts per second.
	AttemptsPerSec float64 `json:"attempts_per_sec"`
	// LatencyMS per operation (reserve, confirm, cancel, refund) and per flow
	// (reserve + confirm, think time excluded).
	LatencyMS map[string]Percentiles `json:"latency_ms"`
	// Counts per operation per outcome class (ok, out_of_stock, conflict,
	// already_final, unknown_order, outcome_unknown, deadlock,
	// lock_wait_timeout, timeout, canceled, error).
	Counts map[string]map[string]int64 `json:"counts"`
	// Journeys counts buyers per journey kind.
	Journeys map[string]int64 `json:"journeys"`
	// Units counts the units moved by acknowledged operations of the
	// measured phase, by movement (Movements: reserved, sold, released by a
	// cancel, refunded): units, where Counts counts operations. Expiries
	// the strategy's sweeper releases are not among them (the harness does
	// not see them).
	Units map[string]int64 `json:"units,omitempty"`
	// Spectrum is the flow latency at the quantiles of SpectrumQuantiles.
	Spectrum []QuantileMS `json:"spectrum,omitempty"`
	// Param and Value name the swept parameter of a sweep run.
	Param string `json:"param,omitempty"`
	Value string `json:"value,omitempty"`
	// Series is the per-second time series of the measured phase.
	Series []SeriesPoint `json:"series,omitempty"`
	// Drift is how throughput, latency, memory, table sizes and relay lag
	// moved over a timed run (absent for flash and race, and for merged
	// generators).
	Drift *Drift `json:"drift,omitempty"`
	// Interrupted is true when Ctrl-C cut this run short: DurationSec is
	// then what was measured of its window.
	Interrupted bool `json:"interrupted,omitempty"`
	// Aborted is set when a live threshold (--abort-on) stopped the load:
	// DurationSec is then what was measured. Breaches are the
	// --threshold checks the finished run failed.
	Aborted  *Abort   `json:"aborted,omitempty"`
	Breaches []Breach `json:"breaches,omitempty"`
	// Repeat is the index (from 1) of this run among --repeat N runs.
	Repeat int `json:"repeat,omitempty"`
	// CeilingPct is reserve attempts/s as a percentage of the calibrated
	// ceiling of the store this strategy's reserve runs on (0: not calibrated).
	CeilingPct float64 `json:"ceiling_pct,omitempty"`
	// Harness holds what the harness measured of the run (server and
	// harness CPU, pool waits, restocks, open-loop drops…).
	Harness Harness `json:"harness"`
	// Counters are the strategy's own figures (CAS retries, outbox lag…).
	Counters map[string]float64 `json:"counters,omitempty"`
	// Errors holds a few distinct infrastructure error texts, for diagnosis.
	Errors []string `json:"errors,omitempty"`
	// Audit grades the stores after Settle; AuditEndOfLoad graded them when
	// the load ended, before any strategy code repaired anything, and
	// SettleRepaired is the difference per anomaly figure (positive: fewer
	// after Settle). Both are absent from files written before they existed.
	Audit          audit.Audit      `json:"audit"`
	AuditEndOfLoad *audit.Audit     `json:"audit_end_of_load,omitempty"`
	SettleRepaired map[string]int64 `json:"settle_repaired,omitempty"`
	// Phases are the run's named phases (setup, load, settle, audit) in
	// the order they ran, with how long each took and the work it did.
	Phases []Phase `json:"phases,omitempty"`
	// Incomplete names the phase that did not finish (settle or audit, cut
	// by its deadline or an error): the load figures stand, the audit
	// does not (it is absent or partial). Empty when every phase finished.
	Incomplete string `json:"incomplete,omitempty"`
	// CoreLines counts the strategy package's non-test, non-blank,
	// non-comment lines.
	CoreLines int `json:"core_lines"`
	// Faults is the run's fault timeline (--fault): each fault as it
	// happened, in plan order. Absent for a run without faults.
	Faults []FaultEvent `json:"faults,omitempty"`
	// FaultImpact is what the faults did to the run. Absent without faults.
	FaultImpact *FaultImpact `json:"fault_impact,omitempty"`
	// Histograms are the run's latency histograms (reserve, confirm,
	// cancel, flow; microseconds) in HdrHistogram's standard V2 compressed
	// encoding (base64), so shards merge exactly and other tools can read
	// them. Absent from files written before they existed.
	Histograms map[string]string `json:"histograms,omitempty"`
	// MeasuredFrom is the wall-clock start of the measured phase
	// (RFC 3339, nanoseconds): the origin of Series, by which the series
	// of several generators are aligned.
	MeasuredFrom string `json:"measured_from,omitempty"`
	// Shard is set on a run measured by one of several generators
	// (run --shard I/N): which one, where, and what it cost.
	Shard *ShardInfo `json:"shard,omitempty"`
	// Shards lists the generators of a merged run (run --procs N, merge).
	Shards []ShardInfo `json:"shards,omitempty"`
	// ShardAcks are the acknowledgements a shard's clients got and the
	// restocks it issued: what the audit after the merge grades the stores
	// against (the ledger: the catalog plus the journal rows those restocks
	// name). Only in a shard's own file.
	ShardAcks []inventory.Ack `json:"shard_acks,omitempty"`
	// Lost are the generators of a merged run (run --procs N) that died
	// before writing their results (SIGKILL, OOM): their load figures are
	// missing; what they left in their state directory was drained and
	// audited by the parent. A run with any is IncompleteGeneratorLost.
	Lost []LostGenerator `json:"lost_generators,omitempty"`
	// Flash is the sale's own figures (fixed scenarios); Service the
	// service model's settings and sheds.
	Flash   *Flash   `json:"flash,omitempty"`
	Service *Service `json:"service,omitempty"`
	// Cost is what the measured phase cost each tier per flow (results/cost.go).
	Cost *Cost `json:"cost,omitempty"`
}

// IncompleteGeneratorLost is Run.Incomplete when a generator of the run
// died before its report (Run.Lost): the audit ran, on what the others
// measured and what the dead one left, but its load is not all known.
const IncompleteGeneratorLost = "generator_lost"

// LostGenerator is one generator of a merged run that died before writing
// its results, and what its parent recovered of it.
type LostGenerator struct {
	// Index (from 0) of Of generators.
	Index int `json:"index"`
	Of    int `json:"of"`
	// Exit is how it ended ("signal: killed") and its last line of stderr.
	Exit string `json:"exit"`
	// StateDir is its state directory (run --state-dir), kept when its
	// drain did not finish, so a generator started on it again relays it.
	StateDir string `json:"state_dir,omitempty"`
	// Acks were read from its ack log (runner.AckFile) and graded with
	// the others'; TornBytes are the bytes of a last record the kill cut
	// (0: no ack was lost in the file).
	Acks      int64 `json:"acks"`
	TornBytes int64 `json:"torn_bytes,omitempty"`
	// AckError says why its ack log could not be read to its end.
	AckError string `json:"ack_error,omitempty"`
	// Drained are the events of its local table the parent relayed into
	// the stores (the strategy's outbox_relayed counter after its Setup
	// and Settle on that directory); DrainError says why the drain did not
	// finish ("" when it did).
	Drained    int64  `json:"drained"`
	DrainError string `json:"drain_error,omitempty"`
}

// Phase is one named phase of a run: setup (reset, load the catalog, the
// strategy's Setup), load (warm-up and measured phase), settle, audit
// (both audits).
type Phase struct {
	Name string  `json:"name"`
	Sec  float64 `json:"sec"`
	// Done of Total units of work (Unit: "SKUs" for setup and audit),
	// and the rate reached; absent for a phase that does not count its work.
	Done   int64   `json:"done,omitempty"`
	Total  int64   `json:"total,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	PerSec float64 `json:"per_sec,omitempty"`
	// Incomplete: the phase was cut (deadline or error) before it finished.
	Incomplete bool `json:"incomplete,omitempty"`
}

// ShardInfo names one generator of a run and what it measured.
type ShardInfo struct {
	// Index (from 0) of Of generators.
	Index int    `json:"index"`
	Of    int    `json:"of"`
	Host  string `json:"host"`
	PID   int    `json:"pid,omitempty"`
	// SettleFrom is when the generator began to settle its strategy
	// instance: a reservation past its deadline before the last generator
	// began to settle is stale in the audit after the merge.
	SettleFrom time.Time `json:"settle_from,omitzero"`
	// Container names the container the generator ran in (run --procs N
	// --generators docker); empty for a process.
	Container string `json:"container,omitempty"`
	// HarnessCPUPct is the generator process's CPU during the measured
	// phase, in percent of one core; Cores is its host's core count.
	HarnessCPUPct float64 `json:"harness_cpu_pct"`
	Cores         int     `json:"cores,omitempty"`
	// Saturated is set on a merged run when this generator's CPU was
	// past SaturatedPct of its host's cores: its figures may be the
	// generator's limit, not the stores'.
	Saturated bool    `json:"saturated,omitempty"`
	Flows     int64   `json:"flows"`
	TPS       float64 `json:"tps"`
	FlowP99MS float64 `json:"flow_p99_ms"`
	// Harness and Counters are the shard's own figures (its strategy
	// instance's background loop among them).
	Harness  Harness            `json:"harness"`
	Counters map[string]float64 `json:"counters,omitempty"`
}

// FaultEvent is one fault of a run's plan as the injector carried it out.
// Times are seconds from the start of the measured phase (after the
// warm-up of a timed scenario; the start barrier of flash and race), the
// same origin as the per-second series.
type FaultEvent struct {
	// Spec is the fault's canonical spec (redis-pause@5s+3s).
	Spec string `json:"spec"`
	// Kind and Target split the spec: pause, restart, latency, reset,
	// partition, app-crash; redis, mysql, app.
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// StartSec is when it took effect; EndSec when it was over (a restart:
	// when the server answered again; an instant fault: StartSec).
	StartSec float64 `json:"start_sec"`
	EndSec   float64 `json:"end_sec"`
	// Applied is false when the fault never took effect (see Error).
	Applied bool `json:"applied"`
	// Error says what failed (applying, undoing, the run ending first).
	Error string `json:"error,omitempty"`
}

// FaultImpact measures a run under faults. A fault's window runs from its
// start to one second after its end (the second in which clients notice
// the store back); series seconds overlapping a window are inside it.
type FaultImpact struct {
	// OutageSec counts the measured seconds with no completed flow;
	// OutageOutsideSec those of them outside every fault window.
	OutageSec        int `json:"outage_sec"`
	OutageOutsideSec int `json:"outage_outside_sec"`
	// PreFaultTPS is the mean flows/s of the whole seconds before the first
	// fault (0 when the fault came in the first second).
	PreFaultTPS float64 `json:"pre_fault_tps"`
	// RecoverSec is the time from the end of the last fault to the end of
	// the first second after it with at least half the pre-fault rate. -1:
	// not recovered before the measured phase ended. Absent without a
	// pre-fault rate.
	RecoverSec *float64 `json:"recover_sec,omitempty"`
	// ErrorsInWindow and ErrorsOutside count failed operations (outcome
	// classes that are not a healthy store's answer: timeout, canceled,
	// error, deadlock…) by class, by the second they ended in (when the
	// client saw the failure).
	ErrorsInWindow map[string]int64 `json:"errors_in_window"`
	ErrorsOutside  map[string]int64 `json:"errors_outside"`
	// UnitsResold is the audit's oversold units (sold beyond the stock put
	// in: a unit sold twice); UnitsLost its leaked units (neither
	// available, held by a live reservation, nor sold), after settle.
	UnitsResold int64 `json:"units_resold"`
	UnitsLost   int64 `json:"units_lost"`
}

// QuantileMS is one point of a latency spectrum.
type QuantileMS struct {
	// Q is the percentile (50, 90, 99.9…).
	Q  float64 `json:"q"`
	MS float64 `json:"ms"`
}

// SpectrumQuantiles are the percentiles a spectrum is sampled at.
var SpectrumQuantiles = []float64{50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}

// SeriesPoint is one second of the measured phase.
type SeriesPoint struct {
	Second    int     `json:"second"`
	Flows     int64   `json:"flows"`
	Attempts  int64   `json:"attempts"`
	Errors    int64   `json:"errors"`
	FlowP99MS float64 `json:"flow_p99_ms"`
	// Stores is what MySQL's and Redis's own counters said of this second
	// (absent when they were not sampled: a generator of several, or a
	// sample that failed).
	Stores *StoreSecond `json:"stores,omitempty"`
}

// Calibration holds the raw ceilings of the stores, measured in the same run.
type Calibration struct {
	Concurrency int     `json:"concurrency"`
	DurationSec float64 `json:"duration_sec"`
	// RedisEvalshaOps: EVALSHA of a reserve-shaped script on one hot key, ops/s.
	RedisEvalshaOps float64 `json:"redis_evalsha_ops"`
	// MySQLHotUpdateOps: autocommit conditional UPDATE of one hot row, ops/s.
	MySQLHotUpdateOps float64 `json:"mysql_hot_update_ops"`
	// MySQLHotTxnOps: SELECT … FOR UPDATE + UPDATE + COMMIT on one hot row, txn/s.
	MySQLHotTxnOps float64 `json:"mysql_hot_txn_ops"`
}

// Sweep names the swept parameter and its values, in order.
type Sweep struct {
	Param  string   `json:"param"`
	Values []string `json:"values"`
	// X is each value's position on a numeric axis, in Values' order and
	// in Unit ("ms" for durations and round trips, else empty), taken from
	// the typed setting each value resolved to; empty when the values are
	// not numbers (fault names, a profile without one round trip).
	X    []float64 `json:"x,omitempty"`
	Unit string    `json:"unit,omitempty"`
}

// The swept parameters renderers treat on their own: the network's round
// trip (a table of measured RTTs), the offered rate (the latency curve),
// the fault matrix's columns, and closed-loop concurrency (the USL fit).
const (
	ParamRTT    = "rtt"
	ParamRate   = "rate"
	ParamFault  = "fault"
	ParamBuyers = "buyers"
)

// Spread is min / median / max of one figure over repeats.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Aggregate summarises the repeats of one strategy.
type Aggregate struct {
	Strategy     string `json:"strategy"`
	Scenario     string `json:"scenario"`
	Value        string `json:"value,omitempty"`
	Repeats      int    `json:"repeats"`
	TPS          Spread `json:"tps"`
	FlowP99MS    Spread `json:"flow_p99_ms"`
	OversellRate Spread `json:"oversell_rate"`
	ServerCPUPct Spread `json:"server_cpu_pct"`
}

// WriteJSON writes results.json into dir, creating dir.
func WriteJSON(dir string, r *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, "results.json"), append(b, '\n'))
}

// ReadJSON reads a results.json file.
func ReadJSON(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("read results %s: %w", path, err)
	}
	var r Results
	switch {
	case head.Format == Format:
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("read results %s: %w", path, err)
		}
	case slices.Contains(olderFormats, head.Format):
		if err := readOlder(b, &r); err != nil {
			return nil, fmt.Errorf("read results %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("read results %s: format %q, want %q", path, head.Format, Format)
	}
	return &r, nil
}

// readOlder converts a v1 or v2 file: its config was an untyped object and
// its runs kept the harness's figures among their counters.
func readOlder(b []byte, r *Results) error {
	type plain Results
	var old struct {
		*plain
		Config json.RawMessage `json:"config"`
	}
	old.plain = (*plain)(r)
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	r.Config = configFromV2(old.Config)
	r.Format = Format
	for i := range r.Runs {
		run := &r.Runs[i]
		run.Harness, run.Counters = harnessFromCounters(run.Counters)
		for j := range run.Shards {
			sh := &run.Shards[j]
			sh.Harness, sh.Counters = harnessFromCounters(sh.Counters)
		}
	}
	return nil
}

// writeAtomic writes via a temporary file and a rename, so an interrupted
// write never leaves half a file.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
