package runner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nearMS: a latency read from the folded bins is the highest value of its
// bin, at most 1/latSubBins above the value recorded.
func nearMS(got, want float64) bool {
	return got >= want && got <= want*(1+1.0/latSubBins)
}

// TestLatBin: every latency lands in a bin whose reported value is not
// below it and at most 1/64 above; small values are exact; bins ascend
// with values.
func TestLatBin(t *testing.T) {
	for _, c := range []struct {
		v     int32
		exact bool
	}{
		{0, true}, {1, true}, {63, true}, {127, true}, {128, false}, {129, false},
		{1000, false}, {3000, false}, {65_535, false}, {1_000_000, false}, {math.MaxInt32, false},
	} {
		got := latBinValue(latBin(c.v))
		if got < int64(c.v) || float64(got-int64(c.v)) > float64(c.v)/latSubBins || (c.exact && got != int64(c.v)) {
			t.Errorf("latency %d µs reads back as %d", c.v, got)
		}
		if int(latBin(c.v)) >= latBinLimit {
			t.Errorf("latency %d µs: bin %d past the limit %d", c.v, latBin(c.v), latBinLimit)
		}
	}
	for v := int32(1); v < 1<<20; v += 7 {
		if latBin(v) < latBin(v-1) {
			t.Fatalf("bin of %d below bin of %d", v, v-1)
		}
	}
}

// TestLatStoreQuantile: the quantile of folded seconds is the sorted-sample
// rule's value to within a bin, over any range of seconds, folded in any
// number of pieces; a second holds at most one bin per distinct value
// whatever the number of flows.
func TestLatStoreQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name   string
		secs   int
		perSec int
		pieces int
		from   int
		to     int
	}{
		{"one second", 1, 1000, 1, 0, 1},
		{"a window", 10, 500, 3, 2, 7},
		{"one flow", 1, 1, 1, 0, 1},
		{"past the end", 3, 100, 2, 1, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &latStore{}
			var want []int32
			for i := range c.secs {
				raw := make([]int32, c.perSec)
				for k := range raw {
					raw[k] = int32(200 + rng.ExpFloat64()*5000)
				}
				if i >= c.from && i < c.to {
					want = append(want, raw...)
				}
				step := (len(raw) + c.pieces - 1) / c.pieces
				for k := 0; k < len(raw); k += step {
					s.add(i, raw[k:min(len(raw), k+step)])
				}
			}
			slices.Sort(want)
			for _, q := range []float64{0.5, 0.99, 1} {
				exp := float64(want[min(len(want)-1, int(q*float64(len(want))))]) / 1000
				if got := float64(s.quantile(c.from, c.to, q)) / 1000; !nearMS(got, exp) {
					t.Errorf("q%v = %v ms, want %v", q, got, exp)
				}
			}
			if s.quantile(c.secs+5, c.secs+6, 0.99) != 0 {
				t.Errorf("a range with no flow has a quantile")
			}
		})
	}
	s := &latStore{}
	for range 100 {
		s.add(0, []int32{1000, 1001, 5000})
	}
	if b := s.secs[0]; len(b.idx) != 2 || b.n[0] != 200 || b.n[1] != 100 {
		t.Fatalf("300 flows of 3 distinct latencies (two in one bin): bins %v counts %v", b.idx, b.n)
	}
}

// TestStripesFold: a run's stripes fold a second into their shared store
// once they record two seconds past it, a late flow of a folded second goes
// straight there, and the merged total reads every flow.
func TestStripesFold(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := newStripes(2, from, time.Time{})
	at := func(sec float64) time.Time { return from.Add(time.Duration(sec * float64(time.Second))) }
	recs.at(0).flow(at(0.1), time.Millisecond)
	recs.at(1).flow(at(0.2), 2*time.Millisecond)
	recs.at(0).flow(at(2.5), 3*time.Millisecond) // stripe 0 folds second 0
	if recs.at(0).series[0].flowLat != nil || recs.at(1).series[0].flowLat == nil {
		t.Fatalf("stripe 0 kept second 0 raw, or stripe 1 folded it early")
	}
	recs.at(0).flow(at(0.3), 4*time.Millisecond) // late: second 0 is folded
	total := newRecorder(time.Time{}, time.Time{})
	for _, r := range recs {
		total.merge(r)
	}
	pts := total.seriesPoints()
	if total.flows != 4 || len(pts) != 3 || !nearMS(pts[0].FlowP99MS, 4) || !nearMS(pts[2].FlowP99MS, 3) || pts[1].FlowP99MS != 0 {
		t.Fatalf("flows %d, points %+v", total.flows, pts)
	}
	if got := float64(total.latencies().quantile(0, 3, 0.5)) / 1000; !nearMS(got, 3) {
		t.Fatalf("median of 1, 2, 3, 4 ms (rank 2): %v ms", got)
	}
}

// TestMergeRunsOnce: stripes of two runs merged one by one into a total
// count every flow once, and neither run's store is written to.
func TestMergeRunsOnce(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := newStripes(2, from, time.Time{}), newStripes(2, from, time.Time{})
	for i, r := range []*recorder{a.at(0), a.at(1), b.at(0), b.at(1)} {
		r.flow(from.Add(time.Duration(i)*time.Second), time.Millisecond)
	}
	total := newRecorder(time.Time{}, time.Time{})
	for _, r := range []*recorder{a.at(0), b.at(0), a.at(1), b.at(1)} {
		total.merge(r)
	}
	count := func(s *latStore) (n uint32) {
		for _, b := range s.secs {
			for _, c := range b.n {
				n += c
			}
		}
		return n
	}
	if n := count(total.latencies()); n != 4 || total.flows != 4 {
		t.Fatalf("%d flows, %d latencies in the total's store", total.flows, n)
	}
	if count(a.at(0).lat) != 2 || count(b.at(0).lat) != 2 {
		t.Fatalf("a run's store changed: %d and %d", count(a.at(0).lat), count(b.at(0).lat))
	}
}
