package runner

import (
	"math/bits"
	"slices"
	"sync"
)

// Per-second flow latencies. The series' P99 of each second, of each
// minute and of the first and last windows of a long run need a mergeable
// distribution per second; keeping every flow's latency for that made the
// harness's memory grow with the number of flows (4 bytes each, about
// 40 MB an hour at 3000 flows/s). A second is kept as raw samples only
// while it is young; once a stripe has moved two seconds past it, its
// samples are folded into one sparse log-linear histogram per second shared
// by the run's stripes: at most a few hundred bins of 6 bytes whatever the
// flow rate, so an hour costs a few megabytes, not tens.

// latSubBins is the number of bins per power of two: a bin is at most
// 1/64 (1.6 %) of its value wide, and values under 128 µs are exact.
const latSubBins = 64

// latBin is the bin of a latency of v µs (v ≥ 0).
func latBin(v int32) uint16 {
	u := uint32(max(v, 0))
	k := bits.Len32(u)
	if k <= 7 {
		return uint16(u)
	}
	shift := k - 7
	return uint16(shift*latSubBins + int(u>>shift))
}

// latBinValue is the highest latency (µs) of bin i, as an HDR histogram
// reports a percentile: a quantile read from bins never understates.
func latBinValue(i uint16) int64 {
	if i < 2*latSubBins {
		return int64(i)
	}
	shift := int(i)/latSubBins - 1
	m := int64(i) - int64(shift*latSubBins)
	return (m+1)<<shift - 1
}

// latBins is one second's sparse histogram: bins ascending, with counts.
type latBins struct {
	idx []uint16
	n   []uint32
}

// add folds raw samples (µs) into the histogram.
func (b *latBins) add(raw []int32) {
	if len(raw) == 0 {
		return
	}
	in := make([]uint16, len(raw))
	for i, v := range raw {
		in[i] = latBin(v)
	}
	slices.Sort(in)
	var o latBins
	for k := 0; k < len(in); {
		e := k
		for e < len(in) && in[e] == in[k] {
			e++
		}
		o.idx, o.n = append(o.idx, in[k]), append(o.n, uint32(e-k))
		k = e
	}
	b.merge(o)
}

// merge adds o's counts to b.
func (b *latBins) merge(o latBins) {
	if len(o.idx) == 0 {
		return
	}
	idx := make([]uint16, 0, len(b.idx)+len(o.idx))
	n := make([]uint32, 0, len(b.idx)+len(o.idx))
	i, j := 0, 0
	for i < len(b.idx) || j < len(o.idx) {
		switch {
		case j == len(o.idx) || (i < len(b.idx) && b.idx[i] < o.idx[j]):
			idx, n = append(idx, b.idx[i]), append(n, b.n[i])
			i++
		case i == len(b.idx) || o.idx[j] < b.idx[i]:
			idx, n = append(idx, o.idx[j]), append(n, o.n[j])
			j++
		default:
			idx, n = append(idx, b.idx[i]), append(n, b.n[i]+o.n[j])
			i, j = i+1, j+1
		}
	}
	b.idx, b.n = slices.Clip(idx), slices.Clip(n)
}

// latStore is the folded seconds of a run, shared by its stripes.
type latStore struct {
	mu   sync.Mutex
	secs []latBins
}

// add folds raw samples of second i.
func (s *latStore) add(i int, raw []int32) {
	if len(raw) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.secs) <= i {
		s.secs = append(s.secs, latBins{})
	}
	s.secs[i].add(raw)
}

// absorb adds another store's seconds to s (recorders built apart); o
// must be complete (every recorder writing to it folded).
func (s *latStore) absorb(o *latStore) {
	if o == nil || o == s {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.secs) < len(o.secs) {
		s.secs = append(s.secs, latBins{})
	}
	for i, b := range o.secs {
		s.secs[i].merge(b)
	}
}

// empty reports whether s holds no second.
func (s *latStore) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.secs) == 0
}

// quantile is the q-quantile (µs) of seconds [from, to), 0 when they hold
// no flow.
func (s *latStore) quantile(from, to int, q float64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var counts [latBinLimit]uint64
	var total uint64
	for i := max(0, from); i < to && i < len(s.secs); i++ {
		b := s.secs[i]
		for k, ix := range b.idx {
			counts[ix] += uint64(b.n[k])
			total += uint64(b.n[k])
		}
	}
	if total == 0 {
		return 0
	}
	// The same rank as the sorted-sample rule it replaces: the sample at
	// index ⌊q·n⌋ (0-based), the largest when that is past the end.
	rank := min(total-1, uint64(q*float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen > rank {
			return latBinValue(uint16(i))
		}
	}
	return 0
}

// latBinLimit bounds the bins of an int32 latency.
const latBinLimit = 25*latSubBins + 2*latSubBins
