package runner

import "github.com/stockbench/stockbench/results"

// resolvedGrid is the configuration recorded for a set of plans: the first
// plan's resolved settings, with the settings the plans do not share (the
// swept parameter of a sweep) named in Swept, so that no reader takes the
// first plan's value for the setting of the whole run.
func resolvedGrid(plans []Plan) results.Config {
	all := make([]results.Config, len(plans))
	for i, pl := range plans {
		all[i] = pl.Resolved()
	}
	c := all[0]
	c.Swept = results.SweptKeys(all)
	return c
}
