package runner

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
)

// TestSaleMergesAcrossGenerators splits one sale's buyers over several
// generators that started at different moments, merges their files as
// run --procs and stockbench merge do, and wants exactly the figures of the
// same sale recorded by one generator.
func TestSaleMergesAcrossGenerators(t *testing.T) {
	cases := []struct {
		name    string
		offsets []time.Duration // each generator's start after the first's
		stock   int64
		buyers  int
		seed    uint64
	}{
		{"one generator", []time.Duration{0}, 50, 400, 1},
		{"two, started together", []time.Duration{0, 0}, 50, 400, 2},
		{"three, staggered", []time.Duration{0, 20 * time.Millisecond, 130 * time.Millisecond}, 100, 2000, 3},
		{"oversold (no atomicity)", []time.Duration{0, 40 * time.Millisecond}, 10, 300, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			g := len(c.offsets)
			whole := newRecorder(from, time.Time{})
			whole.sale = newSale(c.stock)
			parts := make([]*recorder, g)
			late := make([]int64, g)
			for i := range parts {
				parts[i] = newRecorder(from.Add(c.offsets[i]), time.Time{})
				parts[i].sale = newSale(c.stock)
			}
			playSale(whole, parts, late, c.stock, c.buyers, c.seed, c.name == "oversold (no atomicity)")
			var allLate int64
			runs := make([]results.Run, g)
			for i, p := range parts {
				allLate += late[i]
				runs[i] = results.Run{Strategy: "s", Scenario: "flash", MeasuredFrom: p.from.Format(time.RFC3339Nano),
					Flash: p.sale.figures(p.from, late[i])}
			}
			want := whole.sale.figures(from, allLate)
			got, err := results.MergeRuns(runs)
			if err != nil {
				t.Fatal(err)
			}
			if got.Flash == nil {
				t.Fatal("merged run has no sale figures")
			}
			gotF, wantF := *got.Flash, *want
			for _, f := range []*results.Flash{&gotF, &wantF} {
				f.Histograms = nil
				for _, x := range []*float64{&f.FirstReserveMS, &f.ReservedOutMS, &f.SoldOutMS, &f.FairPct} {
					*x = math.Round(*x*1000) / 1000
				}
			}
			if !reflect.DeepEqual(gotF, wantF) {
				t.Errorf("merged sale differs from the sale recorded whole:\n got %+v\nwant %+v", gotF, wantF)
			}
			if g > 1 && len(got.Flash.Histograms) == 0 {
				t.Error("the merged sale carries no histograms: a second merge could not be exact")
			}
		})
	}
}

// playSale plays buyers buyers of a sale of stock units, seeded, each the
// buyer of one of the generators parts (round robin) and of whole: a
// random outcome, recorded alike in both; late counts each part's late
// starts. With oversell the sale does not stop at the stock.
func playSale(whole *recorder, parts []*recorder, late []int64, stock int64, buyers int, seed uint64, oversell bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	us := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo)) * time.Microsecond }
	sold := int64(0)
	for b := range buyers {
		k := b % len(parts)
		p := parts[k]
		both := func(fn func(r *recorder)) { fn(whole); fn(p) }
		start := p.from.Add(us(0, 500_000))
		if rng.IntN(10) == 0 {
			late[k]++
		}
		lat := us(50, 80_000)
		at := start.Add(lat)
		var end buyerEnd
		switch x := rng.IntN(10); {
		case x < 6 && (sold < stock || oversell):
			both(func(r *recorder) { r.sale.op(r, "reserve", inventory.OK, at, lat) })
			switch {
			case rng.IntN(8) == 0:
				cat := at.Add(us(1000, 200_000))
				both(func(r *recorder) { r.sale.op(r, "cancel", inventory.OK, cat, us(50, 5000)) })
				end = endAbandoned
			default:
				sat := at.Add(us(200_000, 500_000))
				both(func(r *recorder) { r.sale.flow(r.from, sat) })
				sold++
				end = endServed
			}
		case x < 8:
			both(func(r *recorder) { r.sale.op(r, "reserve", inventory.OutOfStock, at, lat) })
			end = endRefused
		case x < 9:
			both(func(r *recorder) { r.sale.op(r, "reserve", inventory.Busy, at, lat) })
			end = endShed
		default:
			both(func(r *recorder) { r.sale.op(r, "reserve", inventory.Timeout, at, lat) })
			end = endTimedOut
		}
		early := int64(b) < stock
		whole.sale.end(end, early)
		p.sale.end(end, early)
	}
}

// TestSaleMergeRefusesMixedRuns: generators of one run either all carry
// sale figures of the same sale or none.
func TestSaleMergeRefusesMixedRuns(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	sale := func(stock int64) *results.Flash { return &results.Flash{Stock: stock, BucketMS: 10} }
	cases := []struct {
		name string
		a, b *results.Flash
	}{
		{"sale in one generator only", sale(100), nil},
		{"two different stocks", sale(100), sale(50)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := results.MergeRuns([]results.Run{{MeasuredFrom: at, Flash: c.a}, {MeasuredFrom: at, Flash: c.b}})
			if err == nil {
				t.Fatal("merged")
			}
		})
	}
}
