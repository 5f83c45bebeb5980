package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Params are every scenario's knobs, resolved from flags; each scenario
// reads the ones it needs (Scenario.Flags names them for the CLI).
type Params struct {
	// Stock is the units of each SKU of the catalog (and the restock
	// quantity of a timed scenario).
	Stock  int64
	Buyers int
	// Rate, when positive, drives a timed scenario open loop at this many
	// arrivals per second (Buyers then bounds the concurrency).
	Rate     float64
	PayDelay Range
	// Arrival is when the buyers of a fixed scenario arrive (the race
	// scenario's arrive all at once whatever it says).
	Arrival Profile
	// SustainedPayDelay is the think time of the sustained scenario.
	SustainedPayDelay Range
	Abandon           float64
	TTL               time.Duration
	// ShortTTL is the reservation lifetime of the race scenario's
	// pay-after-expiry buyers.
	ShortTTL time.Duration
	Seed     uint64
	// Timed scenarios: how long, on how many SKUs, picked how, doing what.
	Duration, Warmup time.Duration
	SKUs             int
	Skew             Skew
	Mix              Mix
	NoRestock        bool
	// LimitPerBuyer, RepeatBuyers and RepeatTries are the flash sale's
	// per-buyer limit and repeat buyers (FlashParams).
	LimitPerBuyer int64
	RepeatBuyers  float64
	RepeatTries   int
}

// Scenario is one way buyers behave, in one of two shapes: a fixed list of
// journeys played once from a start barrier (flash, race), or a timed
// stream each worker draws from for Warmup + Duration (sustained). The
// runner asks the scenario, never its name, which shape it has.
type Scenario interface {
	Name() string
	// Catalog names the SKUs; each starts with Params.Stock units.
	Catalog(p Params) []string
	// Timed says the scenario is a stream (Source) rather than a fixed list
	// (Journeys): it runs for a duration, may run open loop and restocks.
	Timed() bool
	// Sale says the scenario is a sale judged as one — sell-out time,
	// buyers served and refused, fairness, units left unsold while buyers
	// were turned away (flash) — rather than a stream or a race of
	// decisions on one order (race: its refusals are not an undersell).
	Sale() bool
	// Fixed generates the fixed journeys, lazily (nil for a timed
	// scenario); Arrivals says when they start.
	Fixed(p Params) Generator
	Arrivals(p Params) Profile
	// Source is worker w's endless journey stream (nil for a fixed one).
	Source(p Params, worker int) *Source
	// Reads names the Params fields (as spelled in Params) that only this
	// scenario reads: a front end refuses them when it is not chosen
	// (flash's Arrival and race's ShortTTL are not listed: they have
	// always been accepted, and ignored, with other scenarios).
	Reads() []string
	// Config records the knobs this scenario reads into k (the resolved
	// configuration of results.json); knobs it does not read stay unset.
	Config(p Params, k *Knobs)
}

// Knobs are the scenario settings a run records in results.json (config):
// each is set only when a scenario that reads it ran, so a flash-only run
// records no duration. Durations are Go duration strings.
type Knobs struct {
	Abandon  *float64 `json:"abandon,omitempty"`
	PayDelay string   `json:"pay_delay,omitempty"`
	Arrival  string   `json:"arrival,omitempty"`
	ShortTTL string   `json:"short_ttl,omitempty"`
	Duration string   `json:"duration,omitempty"`
	Warmup   string   `json:"warmup,omitempty"`
	SKUs     int      `json:"skus,omitempty"`
	Skew     string   `json:"skew,omitempty"`
	Mix      string   `json:"mix,omitempty"`
	// Restock is false when the timed scenario ran without restocks.
	Restock *bool `json:"restock,omitempty"`
	// Rate is the open-loop arrival rate (0: closed loop).
	Rate              *float64 `json:"rate,omitempty"`
	SustainedPayDelay string   `json:"sustained_pay_delay,omitempty"`
	// The flash sale's per-buyer limit and repeat buyers, when asked for.
	LimitPerBuyer int64   `json:"limit_per_buyer,omitempty"`
	RepeatBuyers  float64 `json:"repeat_buyers,omitempty"`
	RepeatTries   int     `json:"repeat_tries,omitempty"`
}

// All lists the scenarios, in the order the CLI offers them.
var All = []Scenario{flash{}, race{}, sustained{}}

// Names are the accepted scenario names.
func Names() []string {
	out := make([]string, len(All))
	for i, s := range All {
		out[i] = s.Name()
	}
	return out
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, error) {
	for _, s := range All {
		if s.Name() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown scenario %q (want %s)", name, strings.Join(Names(), ", "))
}

// IsTimed says whether the named scenario is timed (false when unknown).
func IsTimed(name string) bool {
	s, err := Lookup(name)
	return err == nil && s.Timed()
}

// Owner names the scenario that alone reads the Params field knob, or ""
// when every scenario may (or none).
func Owner(knob string) string {
	for _, s := range All {
		if slices.Contains(s.Reads(), knob) {
			return s.Name()
		}
	}
	return ""
}

// Misplaced finds the first Params field (in the order of All and of each
// scenario's Reads) that set reports as set while its scenario is not
// among chosen; "" when there is none.
func Misplaced(chosen []string, set func(knob string) bool) (knob, owner string) {
	for _, s := range All {
		if slices.Contains(chosen, s.Name()) {
			continue
		}
		for _, f := range s.Reads() {
			if set(f) {
				return f, s.Name()
			}
		}
	}
	return "", ""
}

// SplitList splits a comma-separated list of scenario names, trimming
// spaces ("flash, sustained" names two).
func SplitList(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// flash and race play Journeys on the one FlashSKU.
type flash struct{}

func (flash) Name() string               { return "flash" }
func (flash) Catalog(Params) []string    { return []string{FlashSKU} }
func (flash) Timed() bool                { return false }
func (flash) Sale() bool                 { return true }
func (flash) Source(Params, int) *Source { return nil }
func (flash) Reads() []string            { return []string{"LimitPerBuyer", "RepeatBuyers", "RepeatTries"} }
func (flash) Fixed(p Params) Generator {
	return NewFlash(FlashParams{Stock: p.Stock, Buyers: p.Buyers, PayDelay: p.PayDelay, Abandon: p.Abandon, TTL: p.TTL, Seed: p.Seed,
		LimitPerBuyer: p.LimitPerBuyer, RepeatBuyers: p.RepeatBuyers, RepeatTries: p.RepeatTries})
}
func (flash) Arrivals(p Params) Profile { return p.Arrival }
func (flash) Config(p Params, k *Knobs) {
	k.Abandon, k.PayDelay, k.Arrival = &p.Abandon, p.PayDelay.String(), p.Arrival.String()
	if p.LimitPerBuyer > 0 || p.RepeatBuyers > 0 {
		k.LimitPerBuyer, k.RepeatBuyers, k.RepeatTries = p.LimitPerBuyer, p.RepeatBuyers, max(p.RepeatTries, 2)
	}
}

type race struct{}

func (race) Name() string               { return "race" }
func (race) Catalog(Params) []string    { return []string{FlashSKU} }
func (race) Timed() bool                { return false }
func (race) Sale() bool                 { return false }
func (race) Source(Params, int) *Source { return nil }
func (race) Reads() []string            { return nil }
func (race) Fixed(p Params) Generator {
	return NewRace(RaceParams{Stock: p.Stock, Buyers: p.Buyers, PayDelay: p.PayDelay, TTL: p.TTL, ShortTTL: p.ShortTTL, Seed: p.Seed})
}
func (race) Arrivals(Params) Profile { return AllAtOnce }
func (race) Config(p Params, k *Knobs) {
	k.ShortTTL, k.PayDelay = p.ShortTTL.String(), p.PayDelay.String()
}

type sustained struct{}

func (sustained) Name() string              { return "sustained" }
func (sustained) Timed() bool               { return true }
func (sustained) Sale() bool                { return false }
func (sustained) Fixed(Params) Generator    { return nil }
func (sustained) Arrivals(p Params) Profile { return p.Arrival }
func (sustained) Reads() []string {
	return []string{"Duration", "Warmup", "SKUs", "Skew", "Mix", "NoRestock", "Rate"}
}
func (sustained) Catalog(p Params) []string {
	out := make([]string, p.SKUs)
	for i := range out {
		out[i] = SKUName(i)
	}
	return out
}
func (sustained) Source(p Params, worker int) *Source {
	return NewSource(SustainedParams{SKUs: p.SKUs, Skew: p.Skew, Mix: p.Mix, PayDelay: p.SustainedPayDelay, Seed: p.Seed}, worker)
}
func (sustained) Config(p Params, k *Knobs) {
	restock := !p.NoRestock
	k.Duration, k.Warmup, k.SKUs = p.Duration.String(), p.Warmup.String(), p.SKUs
	k.Skew, k.Mix, k.Restock, k.Rate = p.Skew.String(), p.Mix.String(), &restock, &p.Rate
	k.SustainedPayDelay = p.SustainedPayDelay.String()
}
