package scenarios

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		in      string
		want    Range
		wantErr bool
	}{
		{"200ms-500ms", Range{200 * time.Millisecond, 500 * time.Millisecond}, false},
		{"300ms", Range{300 * time.Millisecond, 300 * time.Millisecond}, false},
		{"0", Range{}, false},
		{"500ms-200ms", Range{}, true}, // reversed
		{"abc", Range{}, true},
		{"-5ms", Range{}, true}, // empty lower bound
	}
	for _, c := range cases {
		got, err := ParseRange(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && got != c.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, err %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestFlashSeeded(t *testing.T) {
	p := FlashParams{Stock: 100, Buyers: 120, PayDelay: Range{200 * time.Millisecond, 500 * time.Millisecond}, Abandon: 0.25, TTL: time.Second, Seed: 7}
	a, b := Flash(p), Flash(p)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different journeys")
	}
	p.Seed = 8
	if reflect.DeepEqual(a, Flash(p)) {
		t.Fatal("different seeds gave the same journeys")
	}
	abandon := 0
	for _, j := range a {
		if j.Kind == "abandon" {
			abandon++
			continue
		}
		d := j.Phases[1].Think
		if d < 200*time.Millisecond || d > 500*time.Millisecond {
			t.Fatalf("pay delay %v outside range", d)
		}
	}
	if abandon < 15 || abandon > 45 {
		t.Fatalf("%d of 120 abandon at 25%%", abandon)
	}
}

func TestRaceMix(t *testing.T) {
	js := Race(RaceParams{Stock: 100, Buyers: 2000, PayDelay: Range{0, 10 * time.Millisecond}, TTL: time.Minute, ShortTTL: 100 * time.Millisecond, Seed: 1})
	seen := map[string]int{}
	for _, j := range js {
		seen[j.Kind]++
	}
	for _, k := range RaceKinds {
		want := k.Share * 2000
		if got := float64(seen[k.Kind]); got < want*0.7 || got > want*1.3 {
			t.Errorf("%s: %v journeys, want about %v", k.Kind, got, want)
		}
	}
}

func TestParseSkewAndMix(t *testing.T) {
	skews := []struct {
		in      string
		want    Skew
		wantErr bool
	}{
		{"uniform", Skew{Kind: "uniform"}, false},
		{"zipf:1.1", Skew{Kind: "zipf", S: 1.1}, false},
		{"hot:3", Skew{Kind: "hot", K: 3}, false},
		{"zipf:0.9", Skew{}, true}, // Go's zipf needs s > 1
		{"hot:0", Skew{}, true},
		{"normal", Skew{}, true},
	}
	for _, c := range skews {
		got, err := ParseSkew(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && (got != c.want || got.String() != c.in) {
			t.Errorf("ParseSkew(%q) = %+v, %v", c.in, got, err)
		}
	}
	mixes := []struct {
		in      string
		want    Mix
		wantErr bool
	}{
		{"confirm=0.9,cancel=0.1", Mix{Confirm: 0.9, Cancel: 0.1}, false},
		{"confirm=0.5,cancel=0.25,abandon=0.25", Mix{Confirm: 0.5, Cancel: 0.25, Abandon: 0.25}, false},
		{"confirm=0.7,cancel=0.1,refund=0.1,abandon=0.1", Mix{Confirm: 0.7, Cancel: 0.1, Refund: 0.1, Abandon: 0.1}, false},
		{"confirm=0.5", Mix{}, true},         // does not sum to 1
		{"confirm=1,return=0", Mix{}, true},  // unknown share
		{"confirm=-1,cancel=2", Mix{}, true}, // negative share
	}
	for _, c := range mixes {
		got, err := ParseMix(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && got != c.want {
			t.Errorf("ParseMix(%q) = %+v, %v", c.in, got, err)
		}
	}
}

func TestSourceSeededAndSkewed(t *testing.T) {
	p := SustainedParams{SKUs: 100, Skew: Skew{Kind: "zipf", S: 1.2}, Mix: Mix{Confirm: 0.8, Cancel: 0.1, Abandon: 0.1}, Seed: 4}
	a, b := NewSource(p, 3), NewSource(p, 3)
	counts := make([]int, p.SKUs)
	kinds := map[string]int{}
	for i := 0; i < 5000; i++ {
		ja, jb := a.Next(time.Minute), b.Next(time.Minute)
		if !reflect.DeepEqual(ja, jb) {
			t.Fatal("same seed and worker gave different journeys")
		}
		var idx int
		if _, err := fmt.Sscanf(ja.SKU, "SKU-%d", &idx); err != nil || idx < 0 || idx >= p.SKUs {
			t.Fatalf("SKU %q outside the catalog", ja.SKU)
		}
		counts[idx]++
		kinds[ja.Kind]++
	}
	if counts[0] < 5*counts[50] {
		t.Errorf("zipf:1.2 is not skewed: first SKU %d picks, SKU 50 %d", counts[0], counts[50])
	}
	if kinds["buy"] < 3600 || kinds["cancel"] < 300 || kinds["abandon"] < 300 {
		t.Errorf("mix not followed: %v", kinds)
	}
	hot := NewSource(SustainedParams{SKUs: 100, Skew: Skew{Kind: "hot", K: 2}, Mix: Mix{Confirm: 1}, Seed: 1}, 0)
	for i := 0; i < 1000; i++ {
		if s := hot.Next(time.Minute).SKU; s != SKUName(0) && s != SKUName(1) {
			t.Fatalf("hot:2 picked %s", s)
		}
	}
}

// TestFlashLazy: the generator hands out the journeys Flash returns, one
// at a time, in buyer order.
func TestFlashLazy(t *testing.T) {
	p := FlashParams{Stock: 100, Buyers: 120, PayDelay: Range{200 * time.Millisecond, 500 * time.Millisecond}, Abandon: 0.1, TTL: time.Second, Seed: 3}
	all, g := Flash(p), NewFlash(p)
	for i := range all {
		j := g.Next()
		if j.OrderID != all[i].OrderID || j.Kind != all[i].Kind || len(j.Phases) != len(all[i].Phases) {
			t.Fatalf("buyer %d: %+v, want %+v", i, j, all[i])
		}
		if j.Phases[0].Think != 0 {
			t.Fatalf("buyer %d waits %v before reserving: arrival is the schedule's", i, j.Phases[0].Think)
		}
	}
}

// TestFlashRepeatBuyers: a share of buyers try several times, one try
// after the other, each with its own order id; without the flags no
// journey names a buyer and the journeys are those of before.
func TestFlashRepeatBuyers(t *testing.T) {
	base := FlashParams{Stock: 10, Buyers: 2000, PayDelay: Range{Max: time.Millisecond}, TTL: time.Second, Seed: 3}
	cases := []struct {
		name          string
		limit         int64
		share         float64
		tries         int
		wantRepeaters bool
	}{
		{"no flags", 0, 0, 2, false},
		{"limit only", 1, 0, 2, false},
		{"double clicks", 1, 0.3, 2, true},
		{"bots", 2, 0.1, 5, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base
			p.LimitPerBuyer, p.RepeatBuyers, p.RepeatTries = c.limit, c.share, c.tries
			js := Flash(p)
			tries := map[string]int{}
			ids := map[string]bool{}
			last := ""
			for i, j := range js {
				if ids[j.OrderID] {
					t.Fatalf("order id %s twice", j.OrderID)
				}
				ids[j.OrderID] = true
				if j.Limit != c.limit {
					t.Fatalf("journey %d: limit %d, want %d", i, j.Limit, c.limit)
				}
				if c.limit == 0 && c.share == 0 {
					if j.Buyer != "" {
						t.Fatalf("journey %d names buyer %q without the flags", i, j.Buyer)
					}
					continue
				}
				if tries[j.Buyer] > 0 && j.Buyer != last {
					t.Fatalf("journey %d: buyer %s tries again, not right after its last try", i, j.Buyer)
				}
				tries[j.Buyer]++
				last = j.Buyer
			}
			if c.limit == 0 && c.share == 0 {
				if !reflect.DeepEqual(js, Flash(base)) {
					t.Fatal("journeys changed without the flags")
				}
				return
			}
			repeaters := 0
			for b, n := range tries {
				if n != 1 && n != c.tries && !(b == last && n < c.tries) {
					t.Fatalf("buyer %s tried %d times, want 1 or %d", b, n, c.tries)
				}
				if n > 1 {
					repeaters++
				}
			}
			share := float64(repeaters) / float64(len(tries))
			if c.wantRepeaters != (repeaters > 0) || c.wantRepeaters && (share < c.share/2 || share > c.share*2) {
				t.Fatalf("%d of %d buyers repeated (share %.3f), want about %.2f", repeaters, len(tries), share, c.share)
			}
		})
	}
}

// TestIDsSortInIssueOrder: every generator's ids (orders, and buyers where
// the journeys name one) sort in the order they were issued, across the
// digit counts where unpadded numbers stop sorting (9 → 10, 99999 →
// 100000): they are primary keys, and an id sorting into the middle of the
// earlier ones turns each insert into a random page write.
func TestIDsSortInIssueOrder(t *testing.T) {
	const n = 100_050
	flash := NewFlash(FlashParams{Stock: 10, Buyers: n, LimitPerBuyer: 1, RepeatBuyers: 0.1, RepeatTries: 2, TTL: time.Second, Seed: 1})
	race := NewRace(RaceParams{Stock: 10, Buyers: n, TTL: time.Second, Seed: 1})
	source := NewSource(SustainedParams{SKUs: 1, Mix: Mix{Confirm: 1}, Seed: 1}, 7)
	cases := []struct {
		name string
		next func() (order, buyer string)
	}{
		{"flash", func() (string, string) { j := flash.Next(); return j.OrderID, j.Buyer }},
		{"race", func() (string, string) { j := race.Next(); return j.OrderID, "" }},
		{"sustained", func() (string, string) { j := source.Next(time.Second); return j.OrderID, "" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lastOrder, lastBuyer := "", ""
			for i := 0; i < n; i++ {
				order, buyer := c.next()
				if order <= lastOrder {
					t.Fatalf("order id %d %q sorts before the one issued before it, %q", i, order, lastOrder)
				}
				if buyer < lastBuyer {
					t.Fatalf("buyer id %q (journey %d) sorts before the one issued before it, %q", buyer, i, lastBuyer)
				}
				lastOrder, lastBuyer = order, buyer
			}
		})
	}
}

// TestRefundJourney: a refund share gives journeys that reserve, pay
// (confirm) and then, only if the confirm succeeded, send a refund twice
// at once — after a draw of the pay delay; without the share there is
// none.
func TestRefundJourney(t *testing.T) {
	for _, c := range []struct {
		name      string
		mix       Mix
		wantShare float64 // of 2000 journeys, within 0.05
	}{
		{"every buyer refunds", Mix{Refund: 1}, 1},
		{"a tenth refund", Mix{Confirm: 0.7, Cancel: 0.1, Refund: 0.1, Abandon: 0.1}, 0.1},
		{"no refund share", Mix{Confirm: 0.9, Cancel: 0.1}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := NewSource(SustainedParams{SKUs: 3, Skew: Skew{Kind: "uniform"}, Mix: c.mix, PayDelay: Range{Min: time.Millisecond, Max: 2 * time.Millisecond}, Seed: 7}, 0)
			n := 0
			for i := 0; i < 2000; i++ {
				j := src.Next(time.Minute)
				if j.Kind != "refund" {
					continue
				}
				n++
				if len(j.Phases) != 3 || j.Phases[1].Ops[0] != Confirm || !j.Phases[1].IfReserved {
					t.Fatalf("refund journey %+v: want reserve, then confirm if reserved", j)
				}
				last := j.Phases[2]
				if len(last.Ops) != 2 || last.Ops[0] != Refund || last.Ops[1] != Refund || !last.IfConfirmed || last.Think < time.Millisecond {
					t.Fatalf("refund journey's last phase %+v: want a refund arriving twice at once after a pay delay, only if confirmed", last)
				}
			}
			if got := float64(n) / 2000; got < c.wantShare-0.05 || got > c.wantShare+0.05 {
				t.Fatalf("%.3f of the journeys refund, want %.2f", got, c.wantShare)
			}
		})
	}
	if Refund.String() != "refund" {
		t.Fatalf("Refund op named %q", Refund.String())
	}
}
