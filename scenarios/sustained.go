package scenarios

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Skew says how buyers pick a SKU of the catalog.
type Skew struct {
	// Kind is "uniform", "zipf" or "hot".
	Kind string
	// S is the zipf exponent (> 1).
	S float64
	// K is the number of hot SKUs: every buyer picks one of the first K.
	K int
}

// ParseSkew reads "uniform", "zipf:1.1" or "hot:1".
func ParseSkew(s string) (Skew, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
	switch kind {
	case "uniform":
		if arg != "" {
			return Skew{}, fmt.Errorf("skew %q: uniform takes no argument", s)
		}
		return Skew{Kind: kind}, nil
	case "zipf":
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v <= 1 {
			return Skew{}, fmt.Errorf("skew %q: zipf needs an exponent above 1, as in zipf:1.1", s)
		}
		return Skew{Kind: kind, S: v}, nil
	case "hot":
		k, err := strconv.Atoi(arg)
		if err != nil || k < 1 {
			return Skew{}, fmt.Errorf("skew %q: hot needs a positive SKU count, as in hot:1", s)
		}
		return Skew{Kind: kind, K: k}, nil
	}
	return Skew{}, fmt.Errorf("skew %q: want uniform, zipf:S or hot:K", s)
}

// String formats the skew the way ParseSkew reads it.
func (k Skew) String() string {
	switch k.Kind {
	case "zipf":
		return "zipf:" + strconv.FormatFloat(k.S, 'g', -1, 64)
	case "hot":
		return "hot:" + strconv.Itoa(k.K)
	}
	return "uniform"
}

// Mix is the share of sustained buyers who confirm, cancel, refund
// (confirm, then ask for their money back: the order is refunded some time
// after its confirm, by a request that arrives twice at once), or abandon (never pay; the reservation expires). The
// shares sum to 1.
type Mix struct{ Confirm, Cancel, Abandon, Refund float64 }

// ParseMix reads "confirm=0.8,cancel=0.1,refund=0.05,abandon=0.05";
// omitted shares are 0.
func ParseMix(s string) (Mix, error) {
	var m Mix
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || f < 0 {
			return m, fmt.Errorf("mix %q: want name=share pairs such as confirm=0.9,cancel=0.1", s)
		}
		switch k {
		case "confirm":
			m.Confirm = f
		case "cancel":
			m.Cancel = f
		case "refund":
			m.Refund = f
		case "abandon":
			m.Abandon = f
		default:
			return m, fmt.Errorf("mix %q: unknown share %q (want confirm, cancel, refund, abandon)", s, k)
		}
	}
	if sum := m.Confirm + m.Cancel + m.Refund + m.Abandon; sum < 0.999 || sum > 1.001 {
		return m, fmt.Errorf("mix %q: shares sum to %g, want 1", s, sum)
	}
	return m, nil
}

// String formats the mix the way ParseMix reads it (the refund share only
// when there is one, so a mix without refunds reads as it always did).
func (m Mix) String() string {
	s := fmt.Sprintf("confirm=%g,cancel=%g,abandon=%g", m.Confirm, m.Cancel, m.Abandon)
	if m.Refund > 0 {
		s += fmt.Sprintf(",refund=%g", m.Refund)
	}
	return s
}

// SKUName is the name of catalog SKU i of the sustained scenario.
func SKUName(i int) string { return fmt.Sprintf("SKU-%05d", i) }

// SustainedParams shape the sustained scenario's journeys.
type SustainedParams struct {
	SKUs     int
	Skew     Skew
	Mix      Mix
	PayDelay Range
	Seed     uint64
}

// Source hands one worker its endless sequence of journeys. Each worker has
// its own Source, seeded from the run's seed and the worker's index, so a
// worker's sequence of choices is the same from run to run. Not safe for
// concurrent use.
type Source struct {
	p   SustainedParams
	seq int
	// prefix starts the worker's order ids: "s<seed>-w<worker>".
	prefix string
	rng    *rand.Rand
	zipf   *rand.Zipf
}

// NewSource builds the journey source of one worker.
func NewSource(p SustainedParams, worker int) *Source {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(worker)+1))
	s := &Source{p: p, rng: rng, prefix: fmt.Sprintf("s%d-w%d", p.Seed, worker)}
	if p.Skew.Kind == "zipf" && p.SKUs > 1 {
		s.zipf = rand.NewZipf(rng, p.Skew.S, 1, uint64(p.SKUs-1))
	}
	return s
}

// PickSKU returns the index of the next SKU.
func (s *Source) PickSKU() int {
	switch {
	case s.zipf != nil:
		return int(s.zipf.Uint64())
	case s.p.Skew.Kind == "hot":
		return s.rng.IntN(min(s.p.Skew.K, s.p.SKUs))
	}
	return s.rng.IntN(s.p.SKUs)
}

// Next returns the worker's next journey; ttl is the reservation lifetime.
func (s *Source) Next(ttl time.Duration) Journey {
	s.seq++
	j := Journey{OrderID: seqID(s.prefix, s.seq), SKU: SKUName(s.PickSKU()), Qty: 1, TTL: ttl}
	reserve := Phase{Ops: []Op{Reserve}}
	pay := s.p.PayDelay.Draw(s.rng)
	switch x := s.rng.Float64(); {
	case x < s.p.Mix.Confirm:
		j.Kind, j.Phases = "buy", []Phase{reserve, {Think: pay, Ops: []Op{Confirm}, IfReserved: true}}
	case x < s.p.Mix.Confirm+s.p.Mix.Cancel:
		j.Kind, j.Phases = "cancel", []Phase{reserve, {Think: pay, Ops: []Op{Cancel}, IfReserved: true}}
	case x < s.p.Mix.Confirm+s.p.Mix.Cancel+s.p.Mix.Refund:
		// Pays, then asks for the money back after another draw of the pay
		// delay (the time to change one's mind) — and the refund request
		// arrives twice at once, as the article's did (取消和退款请求重复
		// 到达: a retried callback, two gateways): a strategy must release
		// the units once.
		back := s.p.PayDelay.Draw(s.rng)
		j.Kind, j.Phases = "refund", []Phase{reserve, {Think: pay, Ops: []Op{Confirm}, IfReserved: true},
			{Think: back, Ops: []Op{Refund, Refund}, IfConfirmed: true}}
	default:
		j.Kind, j.Phases = "abandon", []Phase{reserve}
	}
	return j
}
