package results

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/stockbench/stockbench/scenarios"
)

// Config is the fully resolved configuration of a run, as results.json
// records it. Durations are Go duration strings. In a sweep or curve (more
// than one plan) it holds the first plan's settings and Swept names the
// settings the plans do not share; their values are in Results.Sweep and
// each run's param and value.
type Config struct {
	Strategies        []string `json:"strategies"`
	Scenarios         []string `json:"scenarios"`
	Stock             int64    `json:"stock"`
	Buyers            int      `json:"buyers"`
	TTL               string   `json:"ttl"`
	Seed              uint64   `json:"seed"`
	Repeat            int      `json:"repeat"`
	OpTimeout         string   `json:"op_timeout"`
	CASRetry          string   `json:"cas_retry"`
	CASMaxAttempts    int      `json:"cas_max_attempts"`
	CASMaxWait        string   `json:"cas_max_wait"`
	OutboxPeriod      string   `json:"outbox_period"`
	ReconcilePeriod   string   `json:"reconcile_period"`
	SweepPeriod       string   `json:"sweep_period"`
	CalibrateDuration string   `json:"calibrate_duration"`
	Pool              int      `json:"pool"`
	BatchMax          int      `json:"batch_max"`
	BatchWait         string   `json:"batch_wait"`
	// Buckets is the buckets strategy's rows per SKU.
	Buckets int `json:"buckets,omitempty"`
	// Degrade is lua-tcc's degradation switch (--degrade: mysql), with
	// its per-call Redis timeout; empty when off.
	Degrade        string `json:"degrade,omitempty"`
	DegradeTimeout string `json:"degrade_timeout,omitempty"`
	// SoldOutFlag is lua-tcc's in-process sold-out flag's longest life
	// (--soldout-flag); empty when off.
	SoldOutFlag string `json:"soldout_flag,omitempty"`
	// Inflight and Queue are the service model (--inflight, --queue):
	// calls in each strategy instance at once (0: none) and new requests
	// that may wait.
	Inflight int `json:"inflight"`
	Queue    int `json:"queue"`
	// ClientRetry is how many times a buyer retries a call shed, timed
	// out or of unknown outcome, with the same order id, after a backoff
	// drawn from RetryBackoff and doubled each time (--client-retry).
	ClientRetry  int    `json:"client_retry"`
	RetryBackoff string `json:"retry_backoff"`
	// Faults is the fault plan (--fault), one spec each.
	Faults []string `json:"faults,omitempty"`
	// Weights are the recommendation weights as given.
	Weights string `json:"weights,omitempty"`
	// Preset names the preset the run started from ("article": reports
	// show the article's figures beside the measured ones).
	Preset string `json:"preset,omitempty"`
	// RTT is the network profile between the service and its stores
	// (--rtt: a profile name, one RTT with jitter, or one per store);
	// empty is plain loopback. A sweep over rtt names it in Swept.
	RTT string `json:"rtt,omitempty"`
	// Isolation is the level the MySQL strategies' sessions ran at
	// (--isolation: rc, rr); empty: the server's default, which
	// env.mysql_isolation names.
	Isolation string `json:"isolation,omitempty"`
	// Generators is how many generator processes played a merged run.
	Generators int `json:"generators,omitempty"`
	// Swept names the settings (JSON keys) whose value differs between
	// the plans of a sweep or curve.
	Swept []string `json:"swept,omitempty"`
	// The knobs of the scenarios that ran.
	scenarios.Knobs
}

// SweptKeys names the JSON keys whose values differ between the configs.
func SweptKeys(cs []Config) []string {
	if len(cs) < 2 {
		return nil
	}
	maps := make([]map[string]any, len(cs))
	for i, c := range cs {
		b, _ := json.Marshal(c)
		json.Unmarshal(b, &maps[i])
	}
	var out []string
	for _, m := range maps {
		for k := range m {
			if slices.Contains(out, k) {
				continue
			}
			for _, o := range maps {
				if !reflect.DeepEqual(o[k], m[k]) {
					out = append(out, k)
					break
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Harness holds what the harness measures of every run, beside the
// strategy's own counters (Run.Counters). CPU figures are percent of one
// core over the measured phase and absent where they could not be sampled;
// every other figure is absent when it is 0.
type Harness struct {
	// ServerCPUPct is MySQL + Redis; MySQLCPUPct and RedisCPUPct apart.
	ServerCPUPct *float64 `json:"server_cpu_pct,omitempty"`
	MySQLCPUPct  *float64 `json:"mysql_cpu_pct,omitempty"`
	RedisCPUPct  *float64 `json:"redis_cpu_pct,omitempty"`
	// HarnessCPUPct is this process's own CPU (summed over generators);
	// HarnessCPUMSPer1kFlows is that CPU time per thousand completed flows.
	HarnessCPUPct          *float64 `json:"harness_cpu_pct,omitempty"`
	HarnessCPUMSPer1kFlows *float64 `json:"harness_cpu_ms_per_1k_flows,omitempty"`
	// BackgroundLoopSec is how long the strategy instance's background
	// loop (sweeper, recovery, relay, reconciler) ran.
	BackgroundLoopSec float64 `json:"background_loop_sec,omitempty"`
	// Restocks counts restocks issued (timed scenarios).
	Restocks int64 `json:"restocks,omitempty"`
	// OpenLateStarts and OpenDropped count open-loop arrivals that started
	// late, or not at all because every worker was busy.
	OpenLateStarts int64 `json:"open_late_starts,omitempty"`
	OpenDropped    int64 `json:"open_dropped,omitempty"`
	// AppCrashes counts strategy instances dropped by app-crash faults.
	AppCrashes int64 `json:"app_crashes,omitempty"`
	// Pool waits: how often a caller found every connection busy, how long
	// callers waited in all (ms), per store; the wait per operation.
	MySQLPoolWaits    int64   `json:"mysql_pool_waits,omitempty"`
	MySQLPoolWaitMS   float64 `json:"mysql_pool_wait_ms,omitempty"`
	RedisPoolWaits    int64   `json:"redis_pool_waits,omitempty"`
	RedisPoolWaitMS   float64 `json:"redis_pool_wait_ms,omitempty"`
	RedisPoolTimeouts int64   `json:"redis_pool_timeouts,omitempty"`
	PoolWaitMSPerOp   float64 `json:"pool_wait_ms_per_op,omitempty"`
	// MySQLRTTMS and RedisRTTMS are each store's round trip measured
	// before the run's load: the median of servers.ProbeRounds requests
	// one at a time (SELECT 1, PING) on an idle connection of the run's
	// pool, through the run's network path; the P99s beside them.
	MySQLRTTMS    *float64 `json:"mysql_rtt_ms,omitempty"`
	RedisRTTMS    *float64 `json:"redis_rtt_ms,omitempty"`
	MySQLRTTP99MS *float64 `json:"mysql_rtt_p99_ms,omitempty"`
	RedisRTTP99MS *float64 `json:"redis_rtt_p99_ms,omitempty"`
	// Galera certification failures and brute-force aborts (clusters).
	GaleraCertFailures *int64 `json:"galera_cert_failures,omitempty"`
	GaleraBFAborts     *int64 `json:"galera_bf_aborts,omitempty"`
	// PeakRSSMB is this process's peak resident memory over the run
	// (VmHWM, reset at the run's start when PeakRSSReset; otherwise the
	// process's peak since it started). Buyers counts journeys begun;
	// HarnessCPUMSPer1kBuyers is the process's CPU time (user + system,
	// from getrusage) over the load phase per thousand of them.
	PeakRSSMB               *float64 `json:"peak_rss_mb,omitempty"`
	PeakRSSReset            bool     `json:"peak_rss_reset,omitempty"`
	Buyers                  int64    `json:"buyers,omitempty"`
	HarnessCPUMSPer1kBuyers *float64 `json:"harness_cpu_ms_per_1k_buyers,omitempty"`
	// SetupSKUsPerSec is the catalog's SKUs over the setup phase's seconds
	// (reset, the MySQL rows, the strategy's Setup: its Redis hashes).
	SetupSKUsPerSec float64 `json:"setup_skus_per_sec,omitempty"`
	// HarnessHeapBytesPerSKU is the live heap that the catalog, the
	// ledger and the strategy's setup added, per SKU of the catalog (the
	// harness's whole memory: PeakRSSMB).
	HarnessHeapBytesPerSKU float64 `json:"harness_heap_bytes_per_sku,omitempty"`
	// RedisUsedMemoryBytes is Redis's used_memory (summed over a cluster's
	// masters) when the load ended; RedisBytesPerSKU is what the
	// strategy's Setup added to it, per SKU (Redis strategies only).
	RedisUsedMemoryBytes int64   `json:"redis_used_memory_bytes,omitempty"`
	RedisBytesPerSKU     float64 `json:"redis_bytes_per_sku,omitempty"`
}

// harnessKeys are the JSON keys of Harness: what files before format v3
// kept in counters.
var harnessKeys = func() []string {
	var out []string
	t := reflect.TypeFor[Harness]()
	for i := 0; i < t.NumField(); i++ {
		k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, k)
	}
	return out
}()

// harnessFromCounters moves the harness figures a pre-v3 file kept in a
// run's counters into Harness, leaving the strategy's own.
func harnessFromCounters(counters map[string]float64) (Harness, map[string]float64) {
	moved := map[string]float64{}
	for _, k := range harnessKeys {
		if v, ok := counters[k]; ok {
			moved[k] = v
			delete(counters, k)
		}
	}
	var h Harness
	b, _ := json.Marshal(moved)
	json.Unmarshal(b, &h)
	return h, counters
}

// MergeHarness folds the generators' harness figures of one merged run:
// counts and the harness CPU add up; Redis's used memory is the
// largest any generator saw; server CPU (each generator sampled
// the same servers) and the per-op pool wait are means over the generators
// that have them, and so is the background loop's time.
func MergeHarness(hs []Harness) Harness {
	var m Harness
	if len(hs) == 0 {
		return m
	}
	var mysql, redis, server, harness []float64
	var rtt [4][]float64
	var cert, bf []int64
	for _, h := range hs {
		mysql, redis, server = appendSet(mysql, h.MySQLCPUPct), appendSet(redis, h.RedisCPUPct), appendSet(server, h.ServerCPUPct)
		harness = appendSet(harness, h.HarnessCPUPct)
		for i, p := range h.rtts() {
			rtt[i] = appendSet(rtt[i], p)
		}
		m.BackgroundLoopSec += h.BackgroundLoopSec / float64(len(hs))
		m.Restocks += h.Restocks
		m.OpenLateStarts += h.OpenLateStarts
		m.OpenDropped += h.OpenDropped
		m.AppCrashes += h.AppCrashes
		m.MySQLPoolWaits += h.MySQLPoolWaits
		m.MySQLPoolWaitMS += h.MySQLPoolWaitMS
		m.RedisPoolWaits += h.RedisPoolWaits
		m.RedisPoolWaitMS += h.RedisPoolWaitMS
		m.RedisPoolTimeouts += h.RedisPoolTimeouts
		m.PoolWaitMSPerOp += h.PoolWaitMSPerOp / float64(len(hs))
		m.SetupSKUsPerSec += h.SetupSKUsPerSec / float64(len(hs))
		m.HarnessHeapBytesPerSKU += h.HarnessHeapBytesPerSKU / float64(len(hs))
		m.RedisUsedMemoryBytes = max(m.RedisUsedMemoryBytes, h.RedisUsedMemoryBytes)
		m.RedisBytesPerSKU += h.RedisBytesPerSKU / float64(len(hs))
		if h.GaleraCertFailures != nil && h.GaleraBFAborts != nil {
			cert, bf = append(cert, *h.GaleraCertFailures), append(bf, *h.GaleraBFAborts)
		}
	}
	m.MySQLCPUPct, m.RedisCPUPct, m.ServerCPUPct = mean(mysql), mean(redis), mean(server)
	m.MySQLRTTMS, m.RedisRTTMS, m.MySQLRTTP99MS, m.RedisRTTP99MS = mean(rtt[0]), mean(rtt[1]), mean(rtt[2]), mean(rtt[3])
	if len(harness) > 0 {
		m.HarnessCPUPct = Float(sum(harness))
	}
	if len(cert) > 0 {
		var c, b int64
		for i := range cert {
			c, b = c+cert[i], b+bf[i]
		}
		m.GaleraCertFailures, m.GaleraBFAborts = Int(c), Int(b)
	}
	return m
}

func (h Harness) rtts() [4]*float64 {
	return [4]*float64{h.MySQLRTTMS, h.RedisRTTMS, h.MySQLRTTP99MS, h.RedisRTTP99MS}
}

func appendSet(vs []float64, p *float64) []float64 {
	if p == nil {
		return vs
	}
	return append(vs, *p)
}

func mean(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	return Float(sum(vs) / float64(len(vs)))
}

// Float returns a pointer to v, for the optional figures of Harness.
func Float(v float64) *float64 { return &v }

// Int returns a pointer to v, for the optional figures of Harness.
func Int(v int64) *int64 { return &v }

// configFromV2 reads a pre-v3 file's config, a JSON object of settings in
// which a sweep's swept setting held the list of its values: each known
// setting is decoded on its own, and a list where one value belongs marks
// the setting swept.
func configFromV2(raw json.RawMessage) Config {
	var c Config
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return c
	}
	for k, v := range m {
		one, _ := json.Marshal(map[string]json.RawMessage{k: v})
		if err := json.Unmarshal(one, &c); err != nil {
			c.Swept = append(c.Swept, k)
		}
	}
	slices.Sort(c.Swept)
	return c
}

// Figures lists the harness figures that are set, by JSON key: what
// renderers print beside the strategy's counters.
func (h Harness) Figures() map[string]float64 {
	var m map[string]float64
	b, _ := json.Marshal(h)
	json.Unmarshal(b, &m)
	return m
}
