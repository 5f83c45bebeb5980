package runner

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
)

// saleBucket is the width of a sale's timeline buckets.
const saleBucket = 10 * time.Millisecond

// maxSaleBuckets bounds a timeline (an hour of 10 ms buckets); events past
// it land in the last bucket.
const maxSaleBuckets = 360_000

// buyerEnd is what became of one buyer of a fixed scenario.
type buyerEnd int

const (
	endServed buyerEnd = iota
	endRefused
	endShed
	endTimedOut
	endAbandoned
	endFailed
	// endLimited: refused for the per-buyer limit (the buyer already
	// holds its allowance; not a buyer turned away).
	endLimited
	nEnds
)

// sale is a recorder's share of a sale's figures (fixed scenarios). It is
// guarded by its recorder's lock.
type sale struct {
	stock                      int64
	fine                       []fineBucket
	firstRes, lastRes, lastSld time.Time
	reserved, sold             int64
	ends                       [nEnds]int64
	earlyBuyers, earlyWon      int64
	refusal, winner, shed      *hdrhistogram.Histogram
}

type fineBucket struct{ reserves, refusals, sheds, timeouts, sold, released int64 }

func newSale(stock int64) *sale { return &sale{stock: stock} }

func (s *sale) bucket(from, at time.Time) *fineBucket {
	i := min(max(0, int(at.Sub(from)/saleBucket)), maxSaleBuckets-1)
	for len(s.fine) <= i {
		s.fine = append(s.fine, fineBucket{})
	}
	return &s.fine[i]
}

func record(h **hdrhistogram.Histogram, d time.Duration) {
	if *h == nil {
		*h = newHist()
	}
	_ = (*h).RecordValue(min(max(d.Microseconds(), histMin), histMax))
}

// op places one operation's answer, which the client got at at.
func (s *sale) op(r *recorder, name string, cls inventory.Outcome, at time.Time, lat time.Duration) {
	switch name {
	case "reserve":
		b := s.bucket(r.from, at)
		switch cls {
		case inventory.OK:
			b.reserves++
			s.reserved++
			if s.firstRes.IsZero() || at.Before(s.firstRes) {
				s.firstRes = at
			}
			if at.After(s.lastRes) {
				s.lastRes = at
			}
			record(&s.winner, lat)
		case inventory.OutOfStock:
			b.refusals++
			record(&s.refusal, lat)
		case inventory.Busy:
			b.sheds++
			record(&s.shed, lat)
		case inventory.Timeout, inventory.OutcomeUnknown:
			b.timeouts++
		}
	case "cancel":
		if cls == inventory.OK {
			s.bucket(r.from, at).released++
		}
	}
}

// flow places a completed flow (its confirm answered at at).
func (s *sale) flow(from, at time.Time) {
	s.bucket(from, at).sold++
	s.sold++
	if at.After(s.lastSld) {
		s.lastSld = at
	}
}

// end counts a buyer's fate; early marks one of the first Stock arrivals
// who meant to pay.
func (s *sale) end(e buyerEnd, early bool) {
	s.ends[e]++
	if early {
		s.earlyBuyers++
		if e == endServed {
			s.earlyWon++
		}
	}
}

func mergeHist(dst **hdrhistogram.Histogram, h *hdrhistogram.Histogram) {
	if h == nil {
		return
	}
	if *dst == nil {
		*dst = newHist()
	}
	(*dst).Merge(h)
}

func (s *sale) merge(o *sale) {
	for i, b := range o.fine {
		for len(s.fine) <= i {
			s.fine = append(s.fine, fineBucket{})
		}
		m := &s.fine[i]
		m.reserves += b.reserves
		m.refusals += b.refusals
		m.sheds += b.sheds
		m.timeouts += b.timeouts
		m.sold += b.sold
		m.released += b.released
	}
	if !o.firstRes.IsZero() && (s.firstRes.IsZero() || o.firstRes.Before(s.firstRes)) {
		s.firstRes = o.firstRes
	}
	if o.lastRes.After(s.lastRes) {
		s.lastRes = o.lastRes
	}
	if o.lastSld.After(s.lastSld) {
		s.lastSld = o.lastSld
	}
	s.reserved += o.reserved
	s.sold += o.sold
	for i := range s.ends {
		s.ends[i] += o.ends[i]
	}
	s.earlyBuyers += o.earlyBuyers
	s.earlyWon += o.earlyWon
	mergeHist(&s.refusal, o.refusal)
	mergeHist(&s.winner, o.winner)
	mergeHist(&s.shed, o.shed)
}

// figures turns the merged sale into results.Flash; from is the start of
// load, late the late starts.
func (s *sale) figures(from time.Time, late int64) *results.Flash {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	f := &results.Flash{Stock: s.stock, Reserved: s.reserved, Sold: s.sold, SoldOut: s.sold >= s.stock,
		Served: s.ends[endServed], Refused: s.ends[endRefused], Shed: s.ends[endShed],
		TimedOut: s.ends[endTimedOut], Abandoned: s.ends[endAbandoned], Failed: s.ends[endFailed], Limited: s.ends[endLimited],
		LateStarts: late, EarlyBuyers: s.earlyBuyers, EarlyWon: s.earlyWon, BucketMS: int(saleBucket / time.Millisecond)}
	for _, n := range s.ends {
		f.Buyers += n
	}
	if !s.firstRes.IsZero() {
		f.FirstReserveMS = ms(s.firstRes.Sub(from))
		f.ReservedOutMS = ms(s.lastRes.Sub(s.firstRes))
		if !s.lastSld.IsZero() {
			f.SoldOutMS = ms(s.lastSld.Sub(s.firstRes))
		}
	}
	f.RefusalMS, f.WinnerMS, f.ShedMS = percentiles(s.refusal), percentiles(s.winner), percentiles(s.shed)
	for i, h := range []*hdrhistogram.Histogram{s.refusal, s.winner, s.shed} {
		if h == nil {
			continue
		}
		// They travel so that the generators of one sale merge exactly.
		if enc, err := results.EncodeHistogram(h); err == nil {
			if f.Histograms == nil {
				f.Histograms = map[string]string{}
			}
			f.Histograms[results.FlashHistogramNames[i]] = enc
		}
	}
	if s.earlyBuyers > 0 {
		f.FairPct = 100 * float64(s.earlyWon) / float64(s.earlyBuyers)
	}
	f.TurnedAway = f.Refused + f.Shed + f.TimedOut
	if f.TurnedAway > 0 {
		f.UnsoldUnits = max(0, s.stock-s.sold)
	}
	left := s.stock
	f.Timeline = make([]results.FlashBucket, len(s.fine))
	for i, b := range s.fine {
		left += b.released - b.reserves
		f.Timeline[i] = results.FlashBucket{AtMS: i * f.BucketMS, UnitsLeft: left, Reserves: b.reserves,
			Refusals: b.refusals, Sheds: b.sheds, Timeouts: b.timeouts, Sold: b.sold}
	}
	return f
}

// outcomes collects the answers one buyer got, to say what became of it.
type outcomes struct{ shed, refused, timedOut, limited bool }

func (o *outcomes) add(r opResult) {
	switch inventory.Classify(r.err) {
	case inventory.Busy:
		o.shed = true
	case inventory.OutOfStock:
		o.refused = true
	case inventory.LimitExceeded:
		o.limited = true
	case inventory.Timeout, inventory.OutcomeUnknown:
		o.timedOut = true
	}
}

// end is the buyer's fate: served wins over everything; then shed,
// refused and timed out in that order; a reserved buyer who never meant to
// pay abandoned; anything else failed.
func (o outcomes) end(reserved, served bool, kind string) buyerEnd {
	switch {
	case served:
		return endServed
	case o.shed:
		return endShed
	case o.refused:
		return endRefused
	case o.timedOut:
		return endTimedOut
	case o.limited:
		return endLimited
	case reserved && kind == "abandon":
		return endAbandoned
	}
	return endFailed
}
