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
	// Refund gives a confirmed order's units back (the refund journey).
	Refund
)

func (o Op) String() string { return [...]string{"reserve", "confirm", "cancel", "refund"}[o] }

// Phase is a set of calls a buyer starts together, after waiting Think
// (think time: pay delay, or a wait past the deadline; never counted as
// latency).
type Phase struct {
	Think time.Duration
	Ops   []Op
	// IfReserved skips the phase when no reserve of the journey succeeded:
	// a buyer who got no unit does not pay.
	IfReserved bool
	// IfConfirmed skips the phase when no confirm of the journey
	// succeeded: only a buyer who paid asks for a refund.
	IfConfirmed bool
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
	// Buyer names who makes the journey ("" for no one in particular);
	// several journeys of one buyer are a repeat buyer's tries. Limit,
	// when positive, is the units a buyer may hold of the SKU (the
	// reservation's per-buyer limit).
	Buyer string
	Limit int64
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

// FlashParams are the classic flash sale: Buyers buyers on Stock units of
// one SKU; each reserves one unit, waits a pay delay and confirms, except a
// fraction Abandon that never pays. When they arrive is the arrival
// profile's business (Profile, Schedule), not the journeys'.
type FlashParams struct {
	Stock    int64
	Buyers   int
	PayDelay Range
	Abandon  float64
	TTL      time.Duration
	Seed     uint64
	// LimitPerBuyer, when positive, caps the units each buyer may hold.
	LimitPerBuyer int64
	// RepeatBuyers is the share of buyers who try RepeatTries times (a
	// double click, a bot), each try a journey of its own with its own
	// order id, arriving one after the other (so, in an all-at-once or
	// short arrival window, at the same time). Journeys still number
	// Buyers: they count tries, and a repeat buyer's last tries may be cut
	// off at the end.
	RepeatBuyers float64
	RepeatTries  int
}

// FlashSKU is the one SKU of the flash and race scenarios.
const FlashSKU = "FLASH-1"

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// seqID names the n-th id issued under prefix. n is zero-padded to a fixed
// width so that ids sort in the order they were issued: they are primary
// keys (orders, buyer_holds), and an id that sorts into the middle of the
// ones before it makes every insert land on an old, half-split page — on an
// hour-long run the index outgrows the buffer pool and every insert may
// read a page from disk (#27). Nine digits outlast any run.
func seqID(prefix string, n int) string { return fmt.Sprintf("%s-%09d", prefix, n) }

// Generator hands out a fixed scenario's journeys one at a time, in buyer
// order, so a million buyers are never held at once. Not safe for
// concurrent use.
type Generator interface {
	// Next returns buyer i's journey, i counting from 0 on each call.
	Next() Journey
}

// FlashGen generates flash journeys lazily.
type FlashGen struct {
	p   FlashParams
	rng *rand.Rand
	i   int
	// buyer counts the buyers so far; left is the tries the current one
	// has still to make.
	buyer, left int
	// orders and buyers start the ids: "flash-<seed>", "buyer-<seed>".
	orders, buyers string
}

// NewFlash is the generator of p's journeys.
func NewFlash(p FlashParams) *FlashGen {
	return &FlashGen{p: p, rng: newRand(p.Seed), orders: fmt.Sprintf("flash-%d", p.Seed), buyers: fmt.Sprintf("buyer-%d", p.Seed)}
}

// Next returns the next buyer's journey.
func (g *FlashGen) Next() Journey {
	p := g.p
	j := Journey{OrderID: seqID(g.orders, g.i), SKU: FlashSKU, Qty: 1, TTL: p.TTL,
		Kind: "buy", Phases: []Phase{{Ops: []Op{Reserve}}}, Limit: p.LimitPerBuyer}
	g.i++
	if p.LimitPerBuyer > 0 || p.RepeatBuyers > 0 {
		// Buyers, with their repeat tries: drawn only when asked for, so
		// the journeys of a run without them stay as they were.
		if g.left == 0 {
			g.buyer++
			g.left = 1
			if g.rng.Float64() < p.RepeatBuyers {
				g.left = max(p.RepeatTries, 2)
			}
		}
		g.left--
		j.Buyer = seqID(g.buyers, g.buyer-1)
	}
	pay := p.PayDelay.Draw(g.rng)
	if g.rng.Float64() < p.Abandon {
		j.Kind = "abandon"
	} else {
		j.Phases = append(j.Phases, Phase{Think: pay, Ops: []Op{Confirm}, IfReserved: true})
	}
	return j
}

// Flash builds the journeys of a flash sale (all of them: for tests and
// small runs; the runner uses NewFlash).
func Flash(p FlashParams) []Journey { return drain(NewFlash(p), p.Buyers) }

func drain(g Generator, n int) []Journey {
	out := make([]Journey, n)
	for i := range out {
		out[i] = g.Next()
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

// RaceGen generates race journeys lazily.
type RaceGen struct {
	p   RaceParams
	rng *rand.Rand
	i   int
	// orders starts the order ids: "race-<seed>".
	orders string
}

// NewRace is the generator of p's journeys.
func NewRace(p RaceParams) *RaceGen {
	return &RaceGen{p: p, rng: newRand(p.Seed), orders: fmt.Sprintf("race-%d", p.Seed)}
}

// Race builds the journeys of the race scenario (all of them).
func Race(p RaceParams) []Journey { return drain(NewRace(p), p.Buyers) }

// Next returns the next buyer's journey.
func (g *RaceGen) Next() Journey {
	p, rng := g.p, g.rng
	i := g.i
	g.i++
	x, kind := rng.Float64(), RaceKinds[len(RaceKinds)-1].Kind
	for _, k := range RaceKinds {
		if x < k.Share {
			kind = k.Kind
			break
		}
		x -= k.Share
	}
	pay := p.PayDelay.Draw(rng)
	j := Journey{OrderID: seqID(g.orders, i), SKU: FlashSKU, Qty: 1, TTL: p.TTL, Kind: kind}
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
	return j
}
