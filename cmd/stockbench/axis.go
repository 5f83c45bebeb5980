package main

import (
	"flag"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
)

// axis collects where each value of a sweep sits on a numeric axis, read
// from the typed setting the value resolved to (never from its text), so
// that renderers draw and compare the sweep without parsing it back.
type axis struct {
	xs      []float64
	unit    string
	numeric bool
}

func newAxis() *axis { return &axis{numeric: true} }

// add places one resolved value of the swept flag fl: a duration in
// milliseconds, a number as itself, --rtt as the MySQL round trip of its
// profile, --service (and --param instances) as its count of service
// processes. Any other kind of value makes the sweep categorical.
func (a *axis) add(fl *flag.Flag, o runner.Options) {
	x, unit, ok := axisValue(fl, o)
	if !ok || (len(a.xs) > 0 && unit != a.unit) {
		a.numeric = false
		return
	}
	a.xs, a.unit = append(a.xs, x), unit
}

func axisValue(fl *flag.Flag, o runner.Options) (float64, string, bool) {
	switch fl.Name {
	case results.ParamRTT:
		return ms(o.Network.MySQL.RTT), "ms", true
	case "service":
		// The number of service processes; 0 in process.
		return float64(o.Service.Procs), "", true
	}
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return 0, "", false
	}
	switch v := g.Get().(type) {
	case time.Duration:
		return ms(v), "ms", true
	case int:
		return float64(v), "", true
	case int64:
		return float64(v), "", true
	case uint64:
		return float64(v), "", true
	case float64:
		return v, "", true
	}
	return 0, "", false
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// record sets the sweep's axis when every value had a place on it.
func (a *axis) record(sw *results.Sweep) *results.Sweep {
	if a.numeric && len(a.xs) == len(sw.Values) {
		sw.X, sw.Unit = a.xs, a.unit
	}
	return sw
}
