package scenarios

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
)

// Profile says when buyers arrive, as offsets from the start of load. One
// model serves every scenario that starts buyers on a schedule (the fixed
// scenarios' buyers; a timed scenario's open loop). The kinds, with the
// --arrival syntax that names them:
//
//	window   "0-1s", "50ms", "0"   each buyer at a uniform draw from the range
//	                               ("0": all at once)
//	poisson  "poisson:5000"        exponential gaps at 5000 arrivals/s
//	stages   "stages:2s@100,1s@5000,5s@5000"
//	                               k6's ramping arrival rate: the rate goes
//	                               linearly from the previous stage's target
//	                               (0 before the first) to this one's over the
//	                               stage; arrivals fall where the integral of
//	                               the rate crosses a whole number
//	spike    "spike:200@5s", "spike:200@5s+0-100ms"
//	                               Poisson background at 200/s until 5 s, then
//	                               every remaining buyer at 5 s (or spread
//	                               uniformly over 0-100 ms after it)
//	csv      "csv:rates.csv"       replay of a recorded rate curve: lines
//	                               "second,rate" (a header line is allowed),
//	                               seconds strictly increasing from 0; each
//	                               rate holds until the next listed second,
//	                               the last for one second; placed as stages
//
// A profile with an end (stages, csv) may start fewer buyers than asked;
// the rest (poisson, window, spike) start exactly the buyers asked.
type Profile struct {
	Kind ProfileKind
	// Window is the window kind's range and the spike's spread after At.
	Window Range
	// Rate is the poisson rate and the spike's background rate, per second.
	Rate float64
	// At is the spike's start.
	At time.Duration
	// Segments are the stages and the csv curve, as linear ramps.
	Segments []Segment
	// text is the profile as given, for the record.
	text string
}

// ProfileKind names an arrival model.
type ProfileKind string

// The arrival models.
const (
	KindWindow  ProfileKind = "window"
	KindPoisson ProfileKind = "poisson"
	KindStages  ProfileKind = "stages"
	KindSpike   ProfileKind = "spike"
	KindCSV     ProfileKind = "csv"
)

// Segment is a stretch of a rate curve: the rate goes linearly from From
// to To (arrivals per second) over Dur.
type Segment struct {
	Dur      time.Duration
	From, To float64
}

// AllAtOnce is the profile that starts every buyer at the start.
var AllAtOnce = Profile{Kind: KindWindow, text: "0"}

// String is the profile as it was given (ParseProfile reads it back).
func (p Profile) String() string {
	if p.text != "" {
		return p.text
	}
	if p.Kind == KindWindow || p.Kind == "" {
		return p.Window.String()
	}
	return string(p.Kind)
}

// Rated says whether the profile is a rate curve (poisson, stages, spike,
// csv) rather than a window.
func (p Profile) Rated() bool { return p.Kind != KindWindow && p.Kind != "" }

// End is when a curve with an end (stages, csv) ends; 0 when it has none.
func (p Profile) End() time.Duration {
	var d time.Duration
	for _, s := range p.Segments {
		d += s.Dur
	}
	return d
}

// ParseProfile reads an --arrival value (see Profile). Errors are one line.
func ParseProfile(s string) (Profile, error) {
	s = strings.TrimSpace(s)
	kind, arg, found := strings.Cut(s, ":")
	if !found {
		if s == "all" {
			return Profile{Kind: KindWindow, text: s}, nil
		}
		r, err := ParseRange(s)
		if err != nil {
			return Profile{}, err
		}
		return Profile{Kind: KindWindow, Window: r, text: s}, nil
	}
	p := Profile{Kind: ProfileKind(kind), text: s}
	switch p.Kind {
	case KindPoisson:
		r, err := parseRate(arg)
		if err != nil || r <= 0 {
			return Profile{}, fmt.Errorf("%q: poisson needs a positive rate per second, as in poisson:5000", s)
		}
		p.Rate = r
	case KindStages:
		segs, err := parseStages(arg)
		if err != nil {
			return Profile{}, fmt.Errorf("%q: %w", s, err)
		}
		p.Segments = segs
	case KindSpike:
		rate, rest, ok := strings.Cut(arg, "@")
		r, err := parseRate(rate)
		if !ok || err != nil || r < 0 {
			return Profile{}, fmt.Errorf("%q: want spike:RATE@T0 or spike:RATE@T0+SPREAD, as in spike:200@5s+0-100ms", s)
		}
		at, spread, hasSpread := strings.Cut(rest, "+")
		t0, err := parseDur(at)
		if err != nil {
			return Profile{}, fmt.Errorf("%q: spike start: %w", s, err)
		}
		p.Rate, p.At = r, t0
		if hasSpread {
			if p.Window, err = ParseRange(spread); err != nil {
				return Profile{}, fmt.Errorf("%q: spike spread: %w", s, err)
			}
		}
	case KindCSV:
		segs, err := readRateCSV(arg)
		if err != nil {
			return Profile{}, err
		}
		p.Segments = segs
	default:
		return Profile{}, fmt.Errorf("%q: unknown arrival kind %q (want a range such as 0-1s, poisson:R, stages:D@R,…, spike:R@T0, csv:FILE)", s, kind)
	}
	return p, nil
}

func parseRate(s string) (float64, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "/s")
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("rate %q is not a number", s)
	}
	return r, nil
}

// parseStages reads "2s@100,1s@5000": ramps from the previous target.
func parseStages(s string) ([]Segment, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no stages (want DURATION@RATE,…, as in stages:2s@100,1s@5000)")
	}
	var out []Segment
	prev := 0.0
	for _, part := range strings.Split(s, ",") {
		d, r, ok := strings.Cut(strings.TrimSpace(part), "@")
		if !ok {
			return nil, fmt.Errorf("stage %q: want DURATION@RATE", part)
		}
		dur, err := parseDur(d)
		if err != nil {
			return nil, fmt.Errorf("stage %q: %w", part, err)
		}
		rate, err := parseRate(r)
		if err != nil {
			return nil, fmt.Errorf("stage %q: %w", part, err)
		}
		if rate < 0 {
			return nil, fmt.Errorf("stage %q: negative rate", part)
		}
		out = append(out, Segment{Dur: dur, From: prev, To: rate})
		prev = rate
	}
	if total := (Profile{Segments: out}).End(); total <= 0 {
		return nil, errors.New("stages last no time")
	}
	return out, nil
}

// readRateCSV reads a "second,rate" curve into constant segments.
func readRateCSV(path string) ([]Segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rate curve: %w", err)
	}
	defer f.Close()
	type row struct{ sec, rate float64 }
	var rows []row
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		a, b, ok := strings.Cut(line, ",")
		sec, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
		rate, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if len(rows) == 0 && n == 1 && (err1 != nil || err2 != nil) {
			continue // a header
		}
		switch {
		case !ok || err1 != nil || err2 != nil:
			return nil, fmt.Errorf("rate curve %s line %d: want second,rate", path, n)
		case sec < 0 || rate < 0 || math.IsNaN(sec+rate) || math.IsInf(sec+rate, 0):
			return nil, fmt.Errorf("rate curve %s line %d: negative or not finite", path, n)
		case len(rows) > 0 && sec <= rows[len(rows)-1].sec:
			return nil, fmt.Errorf("rate curve %s line %d: second %g not after %g (seconds must increase)", path, n, sec, rows[len(rows)-1].sec)
		}
		rows = append(rows, row{sec, rate})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rate curve %s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("rate curve %s: no second,rate line", path)
	}
	var out []Segment
	if rows[0].sec > 0 {
		out = append(out, Segment{Dur: secs(rows[0].sec)})
	}
	for i, r := range rows {
		d := time.Second
		if i+1 < len(rows) {
			d = secs(rows[i+1].sec - r.sec)
		}
		out = append(out, Segment{Dur: d, From: r.rate, To: r.rate})
	}
	return out, nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Schedule hands out the arrival offsets of a profile in increasing order.
// It holds O(1) state whatever the number of buyers. Not safe for
// concurrent use.
type Schedule struct {
	p     Profile
	n, i  int
	rng   *rand.Rand
	u     float64       // window: last order statistic in [0,1)
	t     time.Duration // poisson, spike: last arrival
	spike int           // spike: index of the first spike arrival (-1: not yet)
	// segments: position in the curve
	seg    int
	segAt  time.Duration // start of seg
	target float64       // the next arrival's integral, counted from seg's start
}

// NewSchedule is the schedule of n buyers arriving by p, seeded.
func NewSchedule(p Profile, n int, seed uint64) *Schedule {
	return &Schedule{p: p, n: n, rng: rand.New(rand.NewPCG(seed, 0xa441)), spike: -1}
}

// Next returns the next arrival's offset, or false when every buyer has
// arrived or the curve has ended.
func (s *Schedule) Next() (time.Duration, bool) {
	if s.i >= s.n {
		return 0, false
	}
	var at time.Duration
	ok := true
	switch s.p.Kind {
	case KindPoisson:
		s.t += secs(s.rng.ExpFloat64() / s.p.Rate)
		at = s.t
		if s.i == 0 {
			at, s.t = 0, 0
		}
	case KindSpike:
		if s.spike < 0 && s.p.Rate > 0 {
			next := s.t + secs(s.rng.ExpFloat64()/s.p.Rate)
			if s.i == 0 {
				next = 0
			}
			if next < s.p.At {
				s.t = next
				at = next
				break
			}
		}
		if s.spike < 0 {
			s.spike, s.u = s.i, 0
		}
		at = s.p.At + s.windowNext(s.p.Window, s.n-s.spike)
	case KindStages, KindCSV:
		at, ok = s.curveNext()
	default:
		at = s.windowNext(s.p.Window, s.n)
	}
	if !ok {
		s.i = s.n
		return 0, false
	}
	s.i++
	return at, true
}

// windowNext draws the next of m sorted uniforms over r (order statistics
// drawn in order: U(k+1) = 1 − (1 − U(k))·V^(1/(m−k))).
func (s *Schedule) windowNext(r Range, m int) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	k := s.i
	if s.spike >= 0 {
		k -= s.spike
	}
	s.u = 1 - (1-s.u)*math.Pow(s.rng.Float64(), 1/float64(m-k))
	return r.Min + time.Duration(s.u*float64(r.Max-r.Min))
}

// curveNext places the next arrival where the curve's integral reaches the
// next whole number (the first at the integral's 0, i.e. the curve's first
// instant of positive rate).
func (s *Schedule) curveNext() (time.Duration, bool) {
	for s.seg < len(s.p.Segments) {
		g := s.p.Segments[s.seg]
		d := g.Dur.Seconds()
		total := (g.From + g.To) / 2 * d
		if s.target < total {
			at := s.segAt + secs(solveRamp(g.From, g.To, d, s.target))
			s.target++
			return at, true
		}
		// carry what is left of this segment's mass into the next
		s.target -= total
		s.segAt += g.Dur
		s.seg++
	}
	return 0, false
}

// solveRamp is the time x in [0,d] where ∫₀ˣ (a + (b−a)t/d) dt = m.
func solveRamp(a, b, d, m float64) float64 {
	if m <= 0 {
		return 0
	}
	k := (b - a) / d
	if math.Abs(k) < 1e-12 {
		return m / a
	}
	disc := a*a + 2*k*m
	if disc < 0 {
		disc = 0
	}
	return (-a + math.Sqrt(disc)) / k
}
