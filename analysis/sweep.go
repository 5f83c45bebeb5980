package analysis

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/netpath"
)

// SweepX is the numeric position of each swept value and its unit, as
// the sweep recorded them (Sweep.X, from the typed setting each value
// resolved to); ok is false when the values are not numbers. A file
// written before the axis was recorded is read as it was then: the values
// themselves when all are numbers, milliseconds when all are durations
// (rtt values as the profile's MySQL RTT).
func SweepX(sw *results.Sweep) (xs map[string]float64, unit string, ok bool) {
	if sw == nil {
		return nil, "", false
	}
	if len(sw.X) > 0 {
		if len(sw.X) != len(sw.Values) {
			return nil, "", false
		}
		xs = make(map[string]float64, len(sw.Values))
		for i, v := range sw.Values {
			xs[v] = sw.X[i]
		}
		return xs, sw.Unit, true
	}
	return legacySweepX(sw)
}

// legacySweepX reads the axis of a file that did not record it.
func legacySweepX(sw *results.Sweep) (xs map[string]float64, unit string, ok bool) {
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
		if sw.Param == results.ParamRTT {
			return xs, "ms", true
		}
		return xs, "", true
	}
	xs = make(map[string]float64, len(sw.Values))
	for _, v := range sw.Values {
		if sw.Param == results.ParamRTT {
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
	// Metric is "throughput" or "P99"; Unit is the swept value's unit
	// ("ms" for durations and rtt, else empty).
	Metric, Unit  string
	Before, After string // the leader before the crossing, and after
	Lo, Hi, X     float64
}

// crossings finds where the strategies' lines cross on throughput (the
// higher leads) and on P99 (the lower leads) over a numeric sweep. Only
// strategies Safe at both ends take part: a lead taken by a strategy that
// broke a rule, or was not proven, is no lead.
func crossings(sw *results.Sweep, rows []Row) []Crossing {
	if sw == nil {
		return nil
	}
	xs, unit, ok := SweepX(sw)
	if !ok {
		return nil
	}
	type series map[float64]results.Row
	by := map[string]series{}
	var names []string
	for _, row := range rows {
		if row.Safety.Kind != Safe {
			continue
		}
		if by[row.Strategy] == nil {
			by[row.Strategy] = series{}
			names = append(names, row.Strategy)
		}
		by[row.Strategy][xs[row.Value]] = row.Row
	}
	var pts []float64
	for _, v := range sw.Values {
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
					out = append(out, Crossing{Metric: m.name, Unit: unit, Before: before, After: after, Lo: pts[k], Hi: pts[k+1], X: x})
				}
			}
		}
	}
	return out
}
