// Package scenarios turns a scenario's parameters into buyer journeys. It is
// pure and seeded: the same parameters and seed give the same journeys, and
// it imports no database code. scenario.go holds the Scenario interface and
// the registry (All, Lookup), the only place a scenario's name is branched on.
package scenarios

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Op is one call a buyer makes.
type Op int

// The operations.
const (
	Reserve Op = iota
	Confirm
	Cancel
)

func (o Op) String() string { return [...]string{"reserve", "confirm", "cancel"}[o] }

// Phase is a set of calls a buyer starts together, after waiting Think
// (think time: pay delay, or a wait past the deadline; never counted as
// latency).
type Phase struct {
	Think time.Duration
	Ops   []Op
	// IfReserved skips the phase when no reserve of the journey succeeded:
	// a buyer who got no unit does not pay.
	IfReserved bool
}

// Journey is one buyer's order.
type Journey struct {
	OrderID string
	SKU     string
	Qty     int64
	// TTL is the reservation's time to live, from the reserve call.
	TTL time.Duration
	// Kind names the journey's shape, for reports (buy, abandon, race…).
	Kind   string
	Phases []Phase
}

// Range is a uniform duration range; Min == Max is a fixed value.
type Range struct{ Min, Max time.Duration }

// ParseRange reads "200ms-500ms", "300ms" or "0".
func ParseRange(s string) (Range, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	a, err := parseDur(lo)
	if err != nil {
		return Range{}, fmt.Errorf("range %q: %w", s, err)
	}
	b := a
	if found {
		if b, err = parseDur(hi); err != nil {
			return Range{}, fmt.Errorf("range %q: %w", s, err)
		}
	}
	if b < a {
		return Range{}, fmt.Errorf("range %q: upper bound below lower bound", s)
	}
	return Range{a, b}, nil
}

func parseDur(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("negative duration %s", s)
	}
	return d, err
}

// String formats the range the way ParseRange reads it.
func (r Range) String() string {
	if r.Min == r.Max {
		return r.Min.String()
	}
	return r.Min.String() + "-" + r.Max.String()
}

// Draw returns a uniform value in the range.
func (r Range) Draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// FlashParams are the classic flash sale: Buyers buyers released together
// (or arriving over Arrival) on Stock units of one SKU; each reserves one unit, waits a pay delay and
// confirms, except a fraction Abandon that never pays.
type FlashParams struct {
	Stock  int64
	Buyers int
	// Arrival spreads the buyers' arrival after the start: each waits a
	// uniform draw from it before reserving (zero: all at once).
	Arrival  Range
	PayDelay Range
	Abandon  float64
	TTL      time.Duration
	Seed     uint64
}

// FlashSKU is the one SKU of the flash and race scenarios.
const FlashSKU = "FLASH-1"

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// Flash builds the journeys of a flash sale.
func Flash(p FlashParams) []Journey {
	rng := newRand(p.Seed)
	out := make([]Journey, p.Buyers)
	for i := range out {
		j := Journey{OrderID: fmt.Sprintf("flash-%d-%05d", p.Seed, i), SKU: FlashSKU, Qty: 1, TTL: p.TTL,
			Kind: "buy", Phases: []Phase{{Ops: []Op{Reserve}}}}
		pay := p.PayDelay.Draw(rng)
		if p.Arrival.Max > 0 {
			// Drawn only when set, so seeds without a spread keep their journeys.
			j.Phases[0].Think = p.Arrival.Draw(rng)
		}
		if rng.Float64() < p.Abandon {
			j.Kind = "abandon"
		} else {
			j.Phases = append(j.Phases, Phase{Think: pay, Ops: []Op{Confirm}, IfReserved: true})
		}
		out[i] = j
	}
	return out
}

// RaceParams shape the race scenario: the failure reports of the classic
// article — confirm and cancel arriving together, duplicate deliveries of
// confirm and cancel (an at-least-once queue retrying), cancels arriving
// before their reservation, and payment after the reservation expired.
type RaceParams struct {
	Stock    int64
	Buyers   int
	PayDelay Range
	TTL      time.Duration
	// ShortTTL is the reservation lifetime of the pay-after-expiry buyers;
	// they pay ShortTTL + 3×ShortTTL/2 after reserving.
	ShortTTL time.Duration
	Seed     uint64
}

// RaceKinds lists the race journeys with their share of buyers.
var RaceKinds = []struct {
	Kind  string
	Share float64
}{
	{"confirm-cancel-race", 0.30},
	{"duplicate-confirm", 0.20},
	{"duplicate-cancel", 0.15},
	{"cancel-before-reserve", 0.15},
	{"pay-after-expiry", 0.10},
	{"buy", 0.10},
}

// Race builds the journeys of the race scenario.
func Race(p RaceParams) []Journey {
	rng := newRand(p.Seed)
	out := make([]Journey, p.Buyers)
	for i := range out {
		x, kind := rng.Float64(), RaceKinds[len(RaceKinds)-1].Kind
		for _, k := range RaceKinds {
			if x < k.Share {
				kind = k.Kind
				break
			}
			x -= k.Share
		}
		pay := p.PayDelay.Draw(rng)
		j := Journey{OrderID: fmt.Sprintf("race-%d-%05d", p.Seed, i), SKU: FlashSKU, Qty: 1, TTL: p.TTL, Kind: kind}
		reserve := Phase{Ops: []Op{Reserve}}
		switch kind {
		case "confirm-cancel-race":
			j.Phases = []Phase{reserve, {Think: pay, Ops: []Op{Confirm, Cancel}, IfReserved: true}}
		case "duplicate-confirm":
			j.Phases = []Phase{reserve, {Think: pay, Ops: []Op{Confirm, Confirm}, IfReserved: true}, {Ops: []Op{Confirm}, IfReserved: true}}
		case "duplicate-cancel":
			j.Phases = []Phase{reserve, {Think: pay, Ops: []Op{Cancel, Cancel}, IfReserved: true}, {Ops: []Op{Cancel}, IfReserved: true}}
		case "cancel-before-reserve":
			// The late reserve must be refused and the payment with it.
			j.Phases = []Phase{{Ops: []Op{Cancel}}, {Think: pay / 4, Ops: []Op{Reserve}}, {Ops: []Op{Confirm}}}
		case "pay-after-expiry":
			j.TTL = p.ShortTTL
			j.Phases = []Phase{reserve, {Think: p.ShortTTL + p.ShortTTL*3/2, Ops: []Op{Confirm}, IfReserved: true}}
		default:
			j.Phases = []Phase{reserve, {Think: pay, Ops: []Op{Confirm}, IfReserved: true}}
		}
		out[i] = j
	}
	return out
}
