package reports

import (
	"testing"
	"time"
)

// TestCounterText: an instant counter (key ending in _unix_ms) reads as
// seconds into the measured phase; every other counter, and an instant of
// a run that does not say when its measured phase began, as its value.
func TestCounterText(t *testing.T) {
	from := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, key string
		v         float64
		from      time.Time
		want      string
	}{
		{"a count", "degrade_to_mysql", 1, from, "degrade_to_mysql 1"},
		{"an instant after the start", "degrade_at_S_to_mysql_unix_ms", float64(from.Add(5630 * time.Millisecond).UnixMilli()), from, "degrade_at_S_to_mysql at +5.63 s"},
		{"an instant in the warm-up", "degrade_first_switch_unix_ms", float64(from.Add(-250 * time.Millisecond).UnixMilli()), from, "degrade_first_switch at -0.25 s"},
		{"an instant without a start", "degrade_last_back_unix_ms", 1.5e12, time.Time{}, "degrade_last_back_unix_ms 1.5e+12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := counterText(c.key, c.v, c.from); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
