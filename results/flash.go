package results

import (
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Flash is a one-SKU sale measured as a sale (runs of the fixed scenarios):
// how long until it sold out, what was sold, what became of every buyer,
// how fast the refused heard so, whether the earliest buyers won, and what
// stayed unsold while buyers were turned away. Times are from the start of
// load; the figures count what the clients were told (the audit grades the
// stores).
type Flash struct {
	Stock int64 `json:"stock"`
	// Buyers is how many buyers arrived (started their journey).
	Buyers int64 `json:"buyers"`
	// Reserved and Sold count acknowledged reserves and confirms.
	Reserved int64 `json:"reserved"`
	Sold     int64 `json:"sold"`
	// SoldOut says Sold reached Stock.
	SoldOut bool `json:"sold_out"`
	// FirstReserveMS is when the first reserve was acknowledged;
	// ReservedOutMS the time from it to the last acknowledged reserve (the
	// last unit reserved), SoldOutMS from it to the last acknowledged
	// confirm (the last unit sold).
	FirstReserveMS float64 `json:"first_reserve_ms"`
	ReservedOutMS  float64 `json:"reserved_out_ms"`
	SoldOutMS      float64 `json:"sold_out_ms"`
	// What became of each buyer: served (paid), refused (out of stock, at
	// reserve or at confirm), shed (the service was busy), timed out (a
	// call timed out or its outcome is unknown), abandoned (reserved and
	// never meant to pay), failed (any other error).
	Served    int64 `json:"served"`
	Refused   int64 `json:"refused"`
	Shed      int64 `json:"shed"`
	TimedOut  int64 `json:"timed_out"`
	Abandoned int64 `json:"abandoned"`
	Failed    int64 `json:"failed"`
	// Limited counts buyers' tries refused for the per-buyer limit (the
	// buyer already held its allowance): neither served nor turned away.
	Limited int64 `json:"limited,omitempty"`
	// LateStarts counts buyers who started more than 10 ms after their
	// scheduled arrival (the harness could not keep up; k6's dropped
	// iterations, except that they still ran).
	LateStarts int64 `json:"late_starts"`
	// Reserve latency by answer: refusals (out of stock), winners (ok) and
	// sheds (busy), each its own distribution.
	RefusalMS Percentiles `json:"refusal_ms"`
	WinnerMS  Percentiles `json:"winner_ms"`
	ShedMS    Percentiles `json:"shed_ms"`
	// Fairness: of the first Stock buyers to arrive who meant to pay
	// (EarlyBuyers), EarlyWon bought; FairPct = 100·EarlyWon/EarlyBuyers
	// (100: first come, first served).
	EarlyBuyers int64   `json:"early_buyers"`
	EarlyWon    int64   `json:"early_won"`
	FairPct     float64 `json:"fair_pct"`
	// TurnedAway is the buyers refused, shed or timed out; UnsoldUnits
	// (undersell, the mirror of oversell) is Stock − Sold when any buyer
	// was turned away, else 0: units left on the shelf while buyers who
	// wanted them went home.
	TurnedAway  int64 `json:"turned_away"`
	UnsoldUnits int64 `json:"unsold_units"`
	// Timeline is the sale in BucketMS buckets from the start of load.
	BucketMS int           `json:"bucket_ms"`
	Timeline []FlashBucket `json:"timeline,omitempty"`
	// Histograms holds the reserve latency distributions by answer
	// (FlashHistogramNames, encoded as Run.Histograms), so that the
	// generators of one sale merge exactly.
	Histograms map[string]string `json:"histograms,omitempty"`
}

// FlashHistogramNames names Flash.Histograms: refusals, winners, sheds.
var FlashHistogramNames = []string{"refusal", "winner", "shed"}

// FlashBucket is one bucket of a sale's timeline; events are placed at the
// moment the client got the answer.
type FlashBucket struct {
	AtMS int `json:"at_ms"`
	// UnitsLeft is Stock minus acknowledged reserves plus acknowledged
	// cancels, at the bucket's end (negative when a scheme let more
	// buyers through than it had units).
	UnitsLeft int64 `json:"units_left"`
	Reserves  int64 `json:"reserves"`
	Refusals  int64 `json:"refusals"`
	Sheds     int64 `json:"sheds"`
	Timeouts  int64 `json:"timeouts"`
	Sold      int64 `json:"sold"`
}

// Service is the service model in front of the strategy instance: at most
// Inflight requests in the strategy, at most Queue new requests waiting,
// the rest shed as busy. Inflight 0: no service model.
type Service struct {
	Inflight  int   `json:"inflight"`
	Queue     int   `json:"queue"`
	Shed      int64 `json:"shed"`
	PeakQueue int   `json:"peak_queue"`
	// ClientRetries counts the buyers' retries of calls that were shed,
	// timed out or had an unknown outcome (config client_retry).
	ClientRetries int64 `json:"client_retries"`
}

// flashShare is one generator's sale with its wall-clock start.
type flashShare struct {
	f     *Flash
	start time.Time
}

// mergeFlash combines the sale figures of the generators of one run (each
// ran its own buyers against the same stock): counts are summed; the first
// and last acknowledgements are placed on the wall clock by each
// generator's start and the union taken; the timelines are aligned by
// bucket on the wall clock and summed (the units left recomputed from the
// stock and every generator's reserves and releases); the latency
// distributions merged from their histograms; fairness, turned away and
// undersell recomputed. from is the merged run's start.
func mergeFlash(shares []flashShare, from time.Time) (*Flash, error) {
	if len(shares) == 0 {
		return nil, nil
	}
	first := shares[0].f
	m := &Flash{Stock: first.Stock, BucketMS: first.BucketMS}
	if m.BucketMS <= 0 {
		return nil, fmt.Errorf("flash figures without a bucket width")
	}
	bucket := time.Duration(m.BucketMS) * time.Millisecond
	var firstRes, lastRes, lastSold time.Time
	var reserves, released []int64
	var timeline []FlashBucket
	hists := map[string]*hdrhistogram.Histogram{}
	at := func(start time.Time, ms float64) time.Time {
		return start.Add(time.Duration(ms * float64(time.Millisecond)))
	}
	for i, sh := range shares {
		f := sh.f
		if f.Stock != m.Stock || f.BucketMS != m.BucketMS {
			return nil, fmt.Errorf("generator %d sold %d units in %d ms buckets, generator 0 %d in %d ms: not one sale",
				i, f.Stock, f.BucketMS, m.Stock, m.BucketMS)
		}
		m.Buyers += f.Buyers
		m.Reserved += f.Reserved
		m.Sold += f.Sold
		m.Served += f.Served
		m.Refused += f.Refused
		m.Shed += f.Shed
		m.TimedOut += f.TimedOut
		m.Abandoned += f.Abandoned
		m.Failed += f.Failed
		m.Limited += f.Limited
		m.LateStarts += f.LateStarts
		m.EarlyBuyers += f.EarlyBuyers
		m.EarlyWon += f.EarlyWon
		if f.Reserved > 0 {
			fr := at(sh.start, f.FirstReserveMS)
			if firstRes.IsZero() || fr.Before(firstRes) {
				firstRes = fr
			}
			if lr := at(fr, f.ReservedOutMS); lr.After(lastRes) {
				lastRes = lr
			}
			if ls := at(fr, f.SoldOutMS); f.Sold > 0 && ls.After(lastSold) {
				lastSold = ls
			}
		}
		for _, name := range FlashHistogramNames {
			enc, ok := f.Histograms[name]
			if !ok {
				if flashPercentiles(f, name).Count > 0 {
					return nil, fmt.Errorf("generator %d carries no flash %s histogram: written before flash histograms travelled", i, name)
				}
				continue
			}
			h, err := DecodeHistogram(enc)
			if err != nil {
				return nil, fmt.Errorf("generator %d, flash %s: %w", i, name, err)
			}
			if hists[name] == nil {
				hists[name] = h
			} else {
				hists[name].Merge(h)
			}
		}
		off := int(sh.start.Sub(from) / bucket)
		left := f.Stock
		for j, b := range f.Timeline {
			k := max(0, off+j)
			for len(timeline) <= k {
				timeline = append(timeline, FlashBucket{AtMS: len(timeline) * m.BucketMS})
				reserves, released = append(reserves, 0), append(released, 0)
			}
			// The generator's own releases in the bucket, from its units
			// left: left' = left − reserves + released.
			released[k] += b.UnitsLeft - left + b.Reserves
			left = b.UnitsLeft
			reserves[k] += b.Reserves
			t := &timeline[k]
			t.Reserves += b.Reserves
			t.Refusals += b.Refusals
			t.Sheds += b.Sheds
			t.Timeouts += b.Timeouts
			t.Sold += b.Sold
		}
	}
	left := m.Stock
	for k := range timeline {
		left += released[k] - reserves[k]
		timeline[k].UnitsLeft = left
	}
	m.Timeline = timeline
	m.SoldOut = m.Sold >= m.Stock
	if !firstRes.IsZero() {
		m.FirstReserveMS = ms(firstRes.Sub(from))
		m.ReservedOutMS = ms(lastRes.Sub(firstRes))
		if !lastSold.IsZero() {
			m.SoldOutMS = ms(lastSold.Sub(firstRes))
		}
	}
	m.RefusalMS, m.WinnerMS, m.ShedMS = PercentilesOf(hists["refusal"]), PercentilesOf(hists["winner"]), PercentilesOf(hists["shed"])
	for _, name := range FlashHistogramNames {
		if h := hists[name]; h != nil {
			enc, err := EncodeHistogram(h)
			if err != nil {
				return nil, err
			}
			if m.Histograms == nil {
				m.Histograms = map[string]string{}
			}
			m.Histograms[name] = enc
		}
	}
	if m.EarlyBuyers > 0 {
		m.FairPct = 100 * float64(m.EarlyWon) / float64(m.EarlyBuyers)
	}
	m.TurnedAway = m.Refused + m.Shed + m.TimedOut
	if m.TurnedAway > 0 {
		m.UnsoldUnits = max(0, m.Stock-m.Sold)
	}
	return m, nil
}

func flashPercentiles(f *Flash, name string) Percentiles {
	switch name {
	case "refusal":
		return f.RefusalMS
	case "winner":
		return f.WinnerMS
	}
	return f.ShedMS
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
