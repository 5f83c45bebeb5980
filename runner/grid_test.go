package runner

import (
	"reflect"
	"testing"
)

// TestResolvedGrid: a sweep's config records every value of the swept
// setting, not the first one as if it were the setting of the whole run.
func TestResolvedGrid(t *testing.T) {
	plan := func(buyers int) Plan {
		return Plan{Options: Options{Scenarios: []string{"flash"}, Buyers: buyers, Stock: 10}, Param: "buyers"}
	}
	cases := []struct {
		name  string
		plans []Plan
		want  any // config["buyers"]
	}{
		// A plain run: the setting itself.
		{"one plan", []Plan{plan(50)}, 50},
		// A sweep: the list, in order.
		{"sweep", []Plan{plan(50), plan(100), plan(200)}, []any{50, 100, 200}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := resolvedGrid(c.plans)
			if !reflect.DeepEqual(m["buyers"], c.want) {
				t.Fatalf("buyers = %#v, want %#v", m["buyers"], c.want)
			}
			if m["stock"] != int64(10) {
				t.Fatalf("a setting shared by every plan changed: stock = %#v", m["stock"])
			}
		})
	}
}
