package reports

import (
	"reflect"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestFaultWindows: the shaded stretches are the union of the runs'
// applied windows (each run times the same plan a little differently), an
// instant fault gets a sliver, and a fault never applied is not shaded.
func TestFaultWindows(t *testing.T) {
	row := func(evs ...results.FaultEvent) results.Row {
		return results.Row{Runs: []results.Run{{Faults: evs}}}
	}
	ev := func(from, to float64, applied bool) results.FaultEvent {
		return results.FaultEvent{StartSec: from, EndSec: to, Applied: applied}
	}
	cases := []struct {
		name string
		rows []results.Row
		want [][2]float64
	}{
		{"one window", []results.Row{row(ev(2, 4, true))}, [][2]float64{{2, 4}}},
		{"overlapping runs merge", []results.Row{row(ev(2, 4, true)), row(ev(2.1, 5.8, true))}, [][2]float64{{2, 5.8}}},
		{"apart stay apart, in order", []results.Row{row(ev(6, 7, true)), row(ev(1, 2, true))}, [][2]float64{{1, 2}, {6, 7}}},
		{"an instant fault gets a sliver", []results.Row{row(ev(3, 3, true))}, [][2]float64{{3, 3.1}}},
		{"not applied: not shaded", []results.Row{row(ev(3, 4, false))}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := faultWindows(c.rows); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("faultWindows = %v, want %v", got, c.want)
			}
		})
	}
}
