package runner

import "reflect"

// resolvedGrid is the configuration recorded for a set of plans: the first
// plan's resolved settings, except that a setting the plans do not share
// (the swept parameter of a sweep) holds the list of its values, one per
// plan in order, instead of the first value alone.
func resolvedGrid(plans []Plan) map[string]any {
	m := plans[0].Resolved()
	if len(plans) < 2 {
		return m
	}
	all := make([]map[string]any, len(plans))
	for i, pl := range plans {
		all[i] = pl.Resolved()
	}
	for k := range m {
		varies := false
		for _, o := range all[1:] {
			varies = varies || !reflect.DeepEqual(o[k], m[k])
		}
		if !varies {
			continue
		}
		vals := make([]any, len(all))
		for i, o := range all {
			vals[i] = o[k]
		}
		m[k] = vals
	}
	return m
}
