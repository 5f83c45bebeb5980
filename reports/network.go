package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/netpath"
)

// NetworkLine says which network the run modelled and the round trips it
// measured through it: the profile (config rtt; loopback without one) and
// each store's median RTT over the runs (a range when they differ, as in a
// sweep over rtt). Empty for results that recorded neither.
func NetworkLine(r *results.Results) string {
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
	if slices.Contains(r.Config.Swept, "rtt") && r.Sweep != nil {
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

// sweepX is the numeric position of each swept value: the value itself
// when all are numbers, milliseconds when all are durations (rtt values
// as the profile's MySQL RTT); ok is false when they are not all either.
func sweepX(sw *results.Sweep) (xs map[string]float64, unit string, ok bool) {
	xs = make(map[string]float64, len(sw.Values))
	for _, v := range sw.Values {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			xs = nil
			break
		}
		xs[v] = f
	}
	if xs != nil {
		if sw.Param == "rtt" {
			return xs, "ms", true
		}
		return xs, "", true
	}
	xs = make(map[string]float64, len(sw.Values))
	for _, v := range sw.Values {
		if sw.Param == "rtt" {
			pr, err := netpath.Parse(v)
			if err != nil {
				return nil, "", false
			}
			xs[v] = float64(pr.MySQL.RTT) / float64(time.Millisecond)
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, "", false
		}
		xs[v] = float64(d) / float64(time.Millisecond)
	}
	return xs, "ms", true
}

// Crossing is a point of a numeric sweep where two strategies swap places
// on one metric: between the swept values Lo and Hi, at X by linear
// interpolation of both lines.
type Crossing struct {
	Metric        string
	Before, After string // the leader before the crossing, and after
	Lo, Hi, X     float64
}

// Crossings finds where the strategies' lines cross on throughput (the
// higher leads) and on P99 (the lower leads) over a numeric sweep, per
// scenario. Unsafe rows take part: their verdict is the safety column's.
func Crossings(r *results.Results) []Crossing {
	if r.Sweep == nil {
		return nil
	}
	xs, _, ok := sweepX(r.Sweep)
	if !ok {
		return nil
	}
	rows := results.Rows(r)
	type series map[float64]results.Row
	by := map[string]series{}
	var names []string
	for _, row := range rows {
		if by[row.Strategy] == nil {
			by[row.Strategy] = series{}
			names = append(names, row.Strategy)
		}
		by[row.Strategy][xs[row.Value]] = row
	}
	var pts []float64
	for _, v := range r.Sweep.Values {
		if !slices.Contains(pts, xs[v]) {
			pts = append(pts, xs[v])
		}
	}
	slices.Sort(pts)
	metrics := []struct {
		name   string
		val    func(results.Row) float64
		higher bool
	}{
		{"throughput", func(r results.Row) float64 { return r.TPS }, true},
		{"P99", func(r results.Row) float64 { return r.P99 }, false},
	}
	var out []Crossing
	for _, m := range metrics {
		for i, a := range names {
			for _, b := range names[i+1:] {
				for k := 0; k+1 < len(pts); k++ {
					ra0, okA0 := by[a][pts[k]]
					rb0, okB0 := by[b][pts[k]]
					ra1, okA1 := by[a][pts[k+1]]
					rb1, okB1 := by[b][pts[k+1]]
					if !okA0 || !okB0 || !okA1 || !okB1 {
						continue
					}
					d0, d1 := m.val(ra0)-m.val(rb0), m.val(ra1)-m.val(rb1)
					if d0 == 0 || d1 == 0 || (d0 > 0) == (d1 > 0) {
						continue
					}
					x := pts[k] + (pts[k+1]-pts[k])*math.Abs(d0)/(math.Abs(d0)+math.Abs(d1))
					before, after := a, b
					if (d0 > 0) != m.higher {
						before, after = b, a
					}
					out = append(out, Crossing{Metric: m.name, Before: before, After: after, Lo: pts[k], Hi: pts[k+1], X: x})
				}
			}
		}
	}
	return out
}

// rttSweepTable tabulates a sweep over rtt: per value, the RTT each
// store measured, and each strategy's throughput and P99; no head for
// any other sweep.
func rttSweepTable(r *results.Results) table {
	if r.Sweep == nil || r.Sweep.Param != "rtt" {
		return table{}
	}
	rows := results.Rows(r)
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
			i := slices.IndexFunc(rows, func(row results.Row) bool { return row.Strategy == n && row.Value == v })
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
