package audit

import (
	"reflect"
	"strings"
	"testing"
)

// TestClassesHaveFields: every class names an integer field of Audit by
// its JSON key, once, and reads and writes that field.
func TestClassesHaveFields(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Classes {
		if c.field == nil {
			t.Errorf("class %q: no Audit field has that JSON key", c.Key)
			continue
		}
		if seen[c.Key] {
			t.Errorf("class %q listed twice", c.Key)
		}
		seen[c.Key] = true
		if c.Title == "" || c.Counted == "" || (c.Unit != "units" && c.Unit != "count") {
			t.Errorf("class %q: title %q, unit %q, counted %q: each must be set", c.Key, c.Title, c.Unit, c.Counted)
		}
		var a Audit
		c.add(&a, 7)
		if got := c.Of(a); got != 7 {
			t.Errorf("class %q: add 7 then Of = %d", c.Key, got)
		}
	}
	// Every integer count of Audit that is not a class is named here, so a
	// new count cannot be added without deciding whether it is a class.
	notClasses := map[string]bool{"confirmed_units": true, "missing_redis_stock": true, "anomalies": true,
		"skus_audited": true, "skus_with_anomaly": true, "deviation_units": true, "max_sku_deviation": true}
	ty := reflect.TypeFor[Audit]()
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int64:
			if !seen[key] && !notClasses[key] {
				t.Errorf("Audit.%s (%q) is a count but no class: add a row to Classes or to notClasses here", f.Name, key)
			}
		}
	}
}

// TestRepairedAndCount: Repaired differences and Count sums cover every
// class, the one Repaired used to miss (refused_after_reserve) included.
func TestRepairedAndCount(t *testing.T) {
	for _, c := range Classes {
		t.Run(c.Key, func(t *testing.T) {
			var before, after Audit
			c.add(&before, 3)
			c.add(&after, 1)
			before.Recount()
			after.Recount()
			got := Repaired(before, after)
			want := map[string]int64{c.Key: 2}
			if c.Severity == Unsafe {
				want["anomalies"] = 2
				if before.Anomalies != 3 || before.Count() != 3 {
					t.Errorf("Anomalies %d, Count %d: want 3", before.Anomalies, before.Count())
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Repaired = %v, want %v", got, want)
			}
		})
	}
}

// TestAddViolations: a cluster's disagreeing nodes are invariant
// violations, counted in Anomalies.
func TestAddViolations(t *testing.T) {
	var a Audit
	a.AddViolations([]string{"node 2 disagrees", "node 3 disagrees"})
	if a.InvariantViolations != 2 || a.Anomalies != 2 || len(a.Violations) != 2 {
		t.Fatalf("got %d violations, %d anomalies, %d texts; want 2, 2, 2", a.InvariantViolations, a.Anomalies, len(a.Violations))
	}
}
