package reports

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/netpath"
)

// networkLine says which network the run modelled and the round trips it
// measured through it: the profile (config rtt; loopback without one) and
// each store's median RTT over the runs (a range when they differ, as in a
// sweep over rtt). Empty for results that recorded neither.
func networkLine(r *results.Results) string {
	pr, err := netpath.Parse(r.Config.RTT)
	desc := pr.Describe()
	switch {
	case err != nil:
		desc = "rtt " + r.Config.RTT
	case !pr.Set && r.Env.Backend == "external":
		desc = "the real network to the external servers (no --rtt profile)"
	case !pr.Set && r.Env.DockerNetwork == "published":
		desc = "the container engine's published ports (no --rtt profile)"
	case !pr.Set:
		desc = "loopback, no --rtt profile (a round trip costs tens of microseconds, far less than across any real network)"
	}
	if slices.Contains(r.Config.Swept, results.ParamRTT) && r.Sweep != nil {
		desc = "swept rtt over " + strings.Join(r.Sweep.Values, ", ")
	}
	var mysql, redis []float64
	for _, run := range r.Runs {
		if v := run.Harness.MySQLRTTMS; v != nil {
			mysql = append(mysql, *v)
		}
		if v := run.Harness.RedisRTTMS; v != nil {
			redis = append(redis, *v)
		}
	}
	if r.Config.RTT == "" && len(mysql) == 0 {
		return ""
	}
	s := "Network: " + desc
	if len(mysql) > 0 || len(redis) > 0 {
		s += fmt.Sprintf("; measured RTT (median of %d idle round trips before each run) MySQL %s, Redis %s", probeRounds, msRange(mysql), msRange(redis))
	}
	return s + "."
}

// probeRounds is servers.ProbeRounds (reports does not import servers).
const probeRounds = 200

func msRange(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if hi-lo < 0.005 {
		return fmt.Sprintf("%.3f ms", lo)
	}
	return fmt.Sprintf("%.3f–%.3f ms", lo, hi)
}

// rttSweepTable tabulates a sweep over rtt: per value, the RTT each
// store measured, and each strategy's throughput and P99; no head for
// any other sweep.
func rttSweepTable(a *analysis.Analysis) table {
	r := a.Results
	if r.Sweep == nil || r.Sweep.Param != results.ParamRTT {
		return table{}
	}
	rows := a.Rows
	var names []string
	for _, row := range rows {
		if !slices.Contains(names, row.Strategy) {
			names = append(names, row.Strategy)
		}
	}
	t := table{Head: []string{"rtt", "measured MySQL RTT ms", "measured Redis RTT ms"}, Align: "l" + strings.Repeat("r", 2+2*len(names))}
	for _, n := range names {
		t.Head = append(t.Head, n+" flows/s", n+" P99 ms")
	}
	for _, v := range r.Sweep.Values {
		var mysql, redis []float64
		for _, run := range r.Runs {
			if run.Value != v {
				continue
			}
			if p := run.Harness.MySQLRTTMS; p != nil {
				mysql = append(mysql, *p)
			}
			if p := run.Harness.RedisRTTMS; p != nil {
				redis = append(redis, *p)
			}
		}
		row := []string{v, medianStr(mysql), medianStr(redis)}
		for _, n := range names {
			i := slices.IndexFunc(rows, func(row analysis.Row) bool { return row.Strategy == n && row.Value == v })
			if i < 0 {
				row = append(row, "—", "—")
				continue
			}
			row = append(row, f1(rows[i].TPS), f2(rows[i].P99))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func medianStr(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return fmt.Sprintf("%.3f", s[len(s)/2])
}
