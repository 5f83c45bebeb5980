package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
)

// TestRecorderOp: an operation is counted only when it started inside the
// window; errors count in the series but answers do not; a reserve counts
// as an attempt; unclassified error texts are kept once.
func TestRecorderOp(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Second)
	boom := errors.New("boom")
	cases := []struct {
		name                  string
		op                    string
		reserve               bool
		at                    time.Duration // after from
		err                   error
		wantCounted, wantFail bool
		wantClass             string
	}{
		{"ok reserve inside", "reserve", true, time.Second, nil, true, false, "ok"},
		{"out of stock is an answer", "reserve", true, 2 * time.Second, inventory.ErrOutOfStock, true, false, "out_of_stock"},
		{"already final is an answer", "cancel", false, 2 * time.Second, inventory.ErrAlreadyFinal, true, false, "already_final"},
		{"an error inside fails", "confirm", false, 3 * time.Second, boom, true, true, "error"},
		{"warm-up is not measured", "reserve", true, -time.Second, boom, false, false, ""},
		{"the drain after the end is not measured", "confirm", false, 10 * time.Second, boom, false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorder(from, to)
			failed := r.op(c.op, c.reserve, 1, from.Add(c.at), time.Millisecond, c.err)
			if failed != c.wantFail {
				t.Fatalf("failed = %v, want %v", failed, c.wantFail)
			}
			n := r.counts[c.op][c.wantClass]
			if c.wantCounted != (n == 1) || !c.wantCounted && len(r.counts) != 0 {
				t.Fatalf("counts %v, want one %q: %v", r.counts, c.wantClass, c.wantCounted)
			}
			if !c.wantCounted {
				return
			}
			b := r.series[int(c.at/time.Second)]
			if (b.errors == 1) != c.wantFail || (b.attempts == 1) != c.reserve || (r.attempts == 1) != c.reserve {
				t.Fatalf("series %+v, attempts %d", b, r.attempts)
			}
			if r.hist[c.op].TotalCount() != 1 {
				t.Fatalf("latency not recorded")
			}
			if (len(r.errs) == 1) != (c.wantClass == "error") {
				t.Fatalf("error texts %q", r.errs)
			}
		})
	}
}

// TestRecorderMerge: merging workers' recorders sums counts, flows,
// attempts, journeys and series second by second, and
// keeps each distinct error text once.
func TestRecorderMerge(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := newRecorder(from, time.Time{}), newRecorder(from, time.Time{})
	a.op("reserve", true, 1, from, time.Millisecond, nil)
	a.flow(from.Add(time.Second), 2*time.Millisecond)
	a.op("confirm", false, 1, from, time.Millisecond, errors.New("boom"))
	a.journey("buy")
	b.op("reserve", true, 1, from.Add(3*time.Second), time.Millisecond, inventory.ErrOutOfStock)
	b.op("confirm", false, 1, from, time.Millisecond, errors.New("boom"))
	b.flow(from.Add(3*time.Second), 4*time.Millisecond)
	b.journey("buy")
	b.journey("abandon")

	total := newRecorder(time.Time{}, time.Time{})
	total.merge(a)
	total.merge(b)
	switch {
	case total.counts["reserve"]["ok"] != 1 || total.counts["reserve"]["out_of_stock"] != 1 || total.counts["confirm"]["error"] != 2:
		t.Fatalf("counts %v", total.counts)
	case total.flows != 2 || total.hist["flow"].TotalCount() != 2 || total.attempts != 2:
		t.Fatalf("flows %d (hist %d), attempts %d", total.flows, total.hist["flow"].TotalCount(), total.attempts)
	case total.journeys["buy"] != 2 || total.journeys["abandon"] != 1:
		t.Fatalf("journeys %v", total.journeys)
	case len(total.errs) != 1:
		t.Fatalf("error texts %q, want boom once", total.errs)
	case len(total.series) != 4 || total.series[0].attempts != 1 || total.series[0].errors != 2 ||
		total.series[1].flows != 1 || total.series[3].flows != 1 || total.series[3].attempts != 1:
		t.Fatalf("series %+v", total.series)
	}
	pts := total.seriesPoints()
	if !nearMS(pts[1].FlowP99MS, 2) || !nearMS(pts[3].FlowP99MS, 4) {
		t.Fatalf("series points %+v", pts)
	}
}

// TestRecorderUnits: an acknowledged operation counts the units it moved
// under its movement (reserve → reserved, confirm → sold, cancel →
// released, refund → refunded); a refusal, an error or an operation
// outside the window moves none; merging sums them.
func TestRecorderUnits(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Second)
	cases := []struct {
		name string
		op   string
		qty  int64
		at   time.Duration
		err  error
		want map[string]int64
	}{
		{"a reserve of 3 reserves 3", "reserve", 3, time.Second, nil, map[string]int64{"reserved": 3}},
		{"a confirm of 2 sells 2", "confirm", 2, time.Second, nil, map[string]int64{"sold": 2}},
		{"a cancel releases", "cancel", 4, time.Second, nil, map[string]int64{"released": 4}},
		{"a refund refunds", "refund", 5, time.Second, nil, map[string]int64{"refunded": 5}},
		{"a refusal moves nothing", "reserve", 3, time.Second, inventory.ErrOutOfStock, map[string]int64{}},
		{"an error moves nothing", "confirm", 2, time.Second, errors.New("boom"), map[string]int64{}},
		{"an already-final cancel moves nothing", "cancel", 2, time.Second, inventory.ErrAlreadyFinal, map[string]int64{}},
		{"warm-up is not measured", "reserve", 3, -time.Second, nil, map[string]int64{}},
	}
	total := newRecorder(time.Time{}, time.Time{})
	sum := map[string]int64{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorder(from, to)
			r.op(c.op, c.op == "reserve", c.qty, from.Add(c.at), time.Millisecond, c.err)
			if len(r.units) != len(c.want) {
				t.Fatalf("units %v, want %v", r.units, c.want)
			}
			for mv, n := range c.want {
				if r.units[mv] != n {
					t.Fatalf("units %v, want %v", r.units, c.want)
				}
				sum[mv] += n
			}
			total.merge(r)
		})
	}
	if len(total.units) != len(sum) {
		t.Fatalf("merged units %v, want %v", total.units, sum)
	}
	for mv, n := range sum {
		if total.units[mv] != n {
			t.Fatalf("merged units %v, want %v", total.units, sum)
		}
	}
}
