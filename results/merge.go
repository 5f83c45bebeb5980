package results

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// HistogramNames are the latency histograms a run carries.
var HistogramNames = []string{"reserve", "confirm", "cancel", "refund", "flow"}

// Movements name Run.Units: the units each kind of acknowledged operation
// moved (a reserve reserves, a confirm sells, a cancel releases, a refund
// gives back).
var Movements = []string{"reserved", "sold", "released", "refunded"}

// MovementOf is the movement of operation op ("" for none).
func MovementOf(op string) string {
	switch op {
	case "reserve":
		return "reserved"
	case "confirm":
		return "sold"
	case "cancel":
		return "released"
	case "refund":
		return "refunded"
	}
	return ""
}

// EncodeHistogram gives h in HdrHistogram's V2 compressed encoding (base64).
func EncodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return string(b), nil
}

// DecodeHistogram reads one histogram of Run.Histograms.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}

// PercentilesOf summarises a histogram of microseconds in milliseconds.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Percentiles{
		Count: h.TotalCount(),
		P50:   ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// SpectrumOf samples a flow histogram at SpectrumQuantiles (nil when empty).
func SpectrumOf(h *hdrhistogram.Histogram) []QuantileMS {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	out := make([]QuantileMS, 0, len(SpectrumQuantiles))
	for _, q := range SpectrumQuantiles {
		out = append(out, QuantileMS{Q: q, MS: float64(h.ValueAtQuantile(q)) / 1000})
	}
	return out
}

// SaturatedPct is the share of its host's cores past which a generator
// counts as saturated.
const SaturatedPct = 80

// mergeCounter combines one counter over generators (each shard's own is
// kept in Shards): counts add up (restocks, retries, batches, recovered
// orders…), and so does the harness's CPU (the generators together);
// maxima and percentiles take the largest (an upper bound), minima the
// smallest, and rates, means, shares and durations the mean.
func mergeCounter(name string, vs []float64) float64 {
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(name, s) })
	}
	switch {
	case strings.HasSuffix(name, "_max") || has("_p50", "_p90", "_p99", "_max_"):
		return slices.Max(vs)
	case strings.HasSuffix(name, "_min"):
		return slices.Min(vs)
	case has("per_", "_mean", "_pct", "_window", "_sec"):
		return sum(vs) / float64(len(vs))
	}
	return sum(vs)
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

// runKey identifies the runs of several shards that are one run.
type runKey struct {
	strategy, scenario, value string
	repeat                    int
}

// Merge combines the results of several generators of the same runs into
// one: per (strategy, scenario, value, repeat), the histograms are merged
// exactly and the percentiles recomputed from them; counts, journeys,
// flows, attempts and restocks are summed; the window is the union of the
// shards' measured phases (by MeasuredFrom), TPS the flows over it; series
// are aligned by wall-clock second and summed. A second's flow_p99_ms is
// the largest of the shards' (an upper bound: per-second histograms do not
// travel). A sale's figures (Flash) and the service model's are merged
// too (mergeFlash, mergeService). The audit is the first shard's: grade the stores again after a
// merge (the shards' own audits see only their part). Every shard must
// carry its histograms.
func Merge(shards []*Results) (*Results, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("merge: no results")
	}
	out := &Results{Format: Format, Config: shards[0].Config, Env: shards[0].Env, Sweep: shards[0].Sweep}
	groups := map[runKey][]Run{}
	var order []runKey
	for _, r := range shards {
		if out.Calibration == nil {
			out.Calibration = r.Calibration
		}
		out.Interrupted = out.Interrupted || r.Interrupted
		for _, run := range r.Runs {
			k := runKey{run.Strategy, run.Scenario, run.Value, run.Repeat}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], run)
		}
	}
	for _, k := range order {
		run, err := MergeRuns(groups[k])
		if err != nil {
			return nil, fmt.Errorf("merge %s on %s: %w", k.strategy, k.scenario, err)
		}
		out.Runs = append(out.Runs, run)
	}
	out.Config.Generators = len(shards)
	if slices.ContainsFunc(out.Runs, func(r Run) bool { return r.Repeat > 1 }) {
		out.Aggregates = Aggregates(out)
	}
	return out, nil
}

// MergeRuns merges the runs of several generators of one run (see Merge).
func MergeRuns(runs []Run) (Run, error) {
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("no runs")
	}
	m := runs[0]
	m.Shard, m.ShardAcks, m.Faults, m.FaultImpact, m.Drift = nil, nil, nil, nil, nil
	m.Counts, m.Journeys, m.Units = map[string]map[string]int64{}, map[string]int64{}, nil
	m.Errors, m.Series, m.Shards = nil, nil, nil
	m.Flows = 0
	hists := map[string]*hdrhistogram.Histogram{}
	var from, to time.Time
	var attempts float64
	counters := map[string][]float64{}
	var harness []Harness
	var sales []flashShare
	var service *Service
	for i, r := range runs {
		if len(r.Faults) > 0 {
			return Run{}, fmt.Errorf("runs with faults do not merge")
		}
		for _, name := range HistogramNames {
			enc, ok := r.Histograms[name]
			if !ok {
				if r.LatencyMS[name].Count > 0 {
					return Run{}, fmt.Errorf("generator %d carries no %s histogram: written before histograms travelled", i, name)
				}
				continue
			}
			h, err := DecodeHistogram(enc)
			if err != nil {
				return Run{}, fmt.Errorf("generator %d, %s: %w", i, name, err)
			}
			if hists[name] == nil {
				hists[name] = h
			} else {
				hists[name].Merge(h)
			}
		}
		for op, byClass := range r.Counts {
			if m.Counts[op] == nil {
				m.Counts[op] = map[string]int64{}
			}
			for cls, n := range byClass {
				m.Counts[op][cls] += n
			}
		}
		for kind, n := range r.Journeys {
			m.Journeys[kind] += n
		}
		for mv, n := range r.Units {
			if m.Units == nil {
				m.Units = map[string]int64{}
			}
			m.Units[mv] += n
		}
		for _, e := range r.Errors {
			if len(m.Errors) < 10 && !slices.Contains(m.Errors, e) {
				m.Errors = append(m.Errors, e)
			}
		}
		m.Flows += r.Flows
		attempts += r.AttemptsPerSec * r.DurationSec
		m.Interrupted = m.Interrupted || r.Interrupted
		for k, v := range r.Counters {
			counters[k] = append(counters[k], v)
		}
		harness = append(harness, r.Harness)
		start, err := r.from()
		if err != nil {
			return Run{}, fmt.Errorf("generator %d: %w", i, err)
		}
		if (r.Flash != nil) != (runs[0].Flash != nil) {
			return Run{}, fmt.Errorf("generator %d: sale figures in some generators only", i)
		}
		if r.Flash != nil {
			sales = append(sales, flashShare{r.Flash, start})
		}
		service = mergeService(service, r.Service)
		end := start.Add(time.Duration(r.DurationSec * float64(time.Second)))
		if i == 0 || start.Before(from) {
			from = start
		}
		if i == 0 || end.After(to) {
			to = end
		}
		info := ShardInfo{Index: i, Of: len(runs)}
		if r.Shard != nil {
			info = *r.Shard
		}
		info.Flows, info.TPS, info.FlowP99MS = r.Flows, r.TPS, r.LatencyMS["flow"].P99
		info.Harness, info.Counters = r.Harness, r.Counters
		m.Shards = append(m.Shards, info)
	}
	markSaturated(m.Shards)
	for _, r := range runs {
		start, _ := r.from()
		off := int(math.Round(start.Sub(from).Seconds()))
		for _, p := range r.Series {
			i := p.Second - 1 + off
			for len(m.Series) <= i {
				m.Series = append(m.Series, SeriesPoint{Second: len(m.Series) + 1})
			}
			s := &m.Series[i]
			s.Flows += p.Flows
			s.Attempts += p.Attempts
			s.Errors += p.Errors
			s.FlowP99MS = max(s.FlowP99MS, p.FlowP99MS)
		}
	}
	m.DurationSec = to.Sub(from).Seconds()
	m.MeasuredFrom = from.Format(time.RFC3339Nano)
	m.TPS, m.AttemptsPerSec = 0, 0
	if m.DurationSec > 0 {
		m.TPS = float64(m.Flows) / m.DurationSec
		m.AttemptsPerSec = attempts / m.DurationSec
	}
	m.LatencyMS = map[string]Percentiles{}
	m.Histograms = map[string]string{}
	for _, name := range HistogramNames {
		m.LatencyMS[name] = PercentilesOf(hists[name])
		if h := hists[name]; h != nil {
			enc, err := EncodeHistogram(h)
			if err != nil {
				return Run{}, err
			}
			m.Histograms[name] = enc
		}
	}
	m.Spectrum = SpectrumOf(hists["flow"])
	m.Counters = map[string]float64{}
	for k, vs := range counters {
		m.Counters[k] = mergeCounter(k, vs)
	}
	m.Harness = MergeHarness(harness)
	m.Service = service
	flash, err := mergeFlash(sales, from)
	if err != nil {
		return Run{}, fmt.Errorf("sale figures: %w", err)
	}
	m.Flash = flash
	m.Harness.HarnessCPUMSPer1kFlows = nil
	if cpu := m.Harness.HarnessCPUPct; cpu != nil && m.Flows > 0 && m.DurationSec > 0 {
		m.Harness.HarnessCPUMSPer1kFlows = Float(*cpu / 100 * m.DurationSec * 1000 / float64(m.Flows) * 1000)
	}
	return m, nil
}

// mergeService adds one generator's service model figures to m: each
// generator ran its own service in front of its own strategy instance, so
// the limits stay one generator's, sheds and retries are summed and the
// peak queue is the largest of them.
func mergeService(m, s *Service) *Service {
	if s == nil {
		return m
	}
	if m == nil {
		c := *s
		return &c
	}
	m.Shed += s.Shed
	m.ClientRetries += s.ClientRetries
	m.PeakQueue = max(m.PeakQueue, s.PeakQueue)
	return m
}

// markSaturated flags the generators of each host whose CPU together was
// past SaturatedPct of that host's cores: their load may be what the
// generators could drive, not what the stores could take.
func markSaturated(shards []ShardInfo) {
	byHost := map[string]float64{}
	for _, s := range shards {
		byHost[s.Host] += s.HarnessCPUPct
	}
	for i, s := range shards {
		shards[i].Saturated = s.Cores > 0 && byHost[s.Host] > SaturatedPct*float64(s.Cores)
	}
}

// from is the wall-clock start of a run's measured phase.
func (r Run) from() (time.Time, error) {
	if r.MeasuredFrom == "" {
		return time.Time{}, fmt.Errorf("no measured_from: written before runs recorded their start")
	}
	t, err := time.Parse(time.RFC3339Nano, r.MeasuredFrom)
	if err != nil {
		return time.Time{}, fmt.Errorf("measured_from: %w", err)
	}
	return t, nil
}
