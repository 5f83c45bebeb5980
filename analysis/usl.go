package analysis

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/stockbench/stockbench/results"
)

// USLPoint is one measured throughput at one concurrency.
type USLPoint struct {
	N, X float64
}

// USL is a fit of Gunther's Universal Scalability Law,
//
//	X(N) = λN / (1 + σ(N−1) + κN(N−1)),
//
// to (concurrency, throughput) points: λ the throughput of one client
// alone, σ the contention (the serialised share: σ ≈ 1 is one at a time),
// κ the coherency cost (the crosstalk that makes throughput fall past a
// peak). R2 is the coefficient of determination of X; PeakN is the
// concurrency of the highest throughput, N* = √((1−σ)/κ), +Inf when κ is
// 0 (throughput only levels off, at λ/σ); PeakX is X(PeakN) (λ/σ then).
type USL struct {
	Lambda float64 `json:"lambda"`
	Sigma  float64 `json:"sigma"`
	Kappa  float64 `json:"kappa"`
	R2     float64 `json:"r2"`
	PeakN  float64 `json:"peak_n"`
	PeakX  float64 `json:"peak_x"`
	Points int     `json:"points"`
}

// X is the fitted throughput at concurrency n.
func (u USL) X(n float64) float64 {
	return u.Lambda * n / (1 + u.Sigma*(n-1) + u.Kappa*n*(n-1))
}

// ErrUSLPoints: a fit needs three points or more at two concurrencies
// or more, every one positive.
var ErrUSLPoints = errors.New("usl: need at least 3 points with N ≥ 1 and X > 0, at 2 or more concurrencies")

// FitUSL fits σ, κ and λ to pts by least squares on X, with σ in [0, 1]
// and κ ≥ 0. For given σ and κ the best λ is closed-form; σ and κ are
// found by a Nelder–Mead search started from Gunther's linearisation
// (N/C(N) − 1 = σ(N−1) + κN(N−1), C the throughput relative to the
// smallest N's per-client rate). Deterministic: the same points give
// the same fit.
func FitUSL(pts []USLPoint) (USL, error) {
	distinct := map[float64]bool{}
	for _, p := range pts {
		if p.N < 1 || p.X <= 0 || math.IsNaN(p.X) || math.IsInf(p.X, 0) {
			return USL{}, fmt.Errorf("%w: point (%g, %g)", ErrUSLPoints, p.N, p.X)
		}
		distinct[p.N] = true
	}
	if len(pts) < 3 || len(distinct) < 2 {
		return USL{}, ErrUSLPoints
	}
	ps := append([]USLPoint(nil), pts...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].N < ps[j].N })

	clamp := func(s, k float64) (float64, float64) { return min(1, max(0, s)), max(0, k) }
	// lambda is the least-squares λ for σ, κ; sse its squared error.
	lambda := func(s, k float64) (l, sse float64) {
		var xf, ff float64
		for _, p := range ps {
			f := p.N / (1 + s*(p.N-1) + k*p.N*(p.N-1))
			xf += p.X * f
			ff += f * f
		}
		l = xf / ff
		for _, p := range ps {
			d := p.X - l*p.N/(1+s*(p.N-1)+k*p.N*(p.N-1))
			sse += d * d
		}
		return l, sse
	}
	cost := func(v [2]float64) float64 {
		s, k := clamp(v[0], v[1])
		_, sse := lambda(s, k)
		// Outside the bounds, a penalty that leads back in.
		return sse * (1 + math.Abs(v[0]-s) + math.Abs(v[1]-k)*1e3)
	}
	start := linearUSL(ps)
	best := nelderMead(cost, start, [2]float64{0.05, max(1e-4, start[1])}, 2000)
	s, k := clamp(best[0], best[1])
	// A coherency term that adds less than a millionth at the largest N
	// measured is the search's residue, not crosstalk: without it the
	// peak would be put at billions of clients, far past the data.
	if nmax := ps[len(ps)-1].N; k*nmax*(nmax-1) < 1e-6 {
		k = 0
	}
	l, sse := lambda(s, k)

	var mean, sst float64
	for _, p := range ps {
		mean += p.X
	}
	mean /= float64(len(ps))
	for _, p := range ps {
		sst += (p.X - mean) * (p.X - mean)
	}
	u := USL{Lambda: l, Sigma: s, Kappa: k, Points: len(ps), R2: 1}
	if sst > 0 {
		u.R2 = 1 - sse/sst
	}
	switch {
	case k > 0:
		u.PeakN = math.Sqrt((1 - s) / k)
		u.PeakX = u.X(u.PeakN)
	case s > 0:
		u.PeakN, u.PeakX = math.Inf(1), l/s
	default:
		u.PeakN, u.PeakX = math.Inf(1), math.Inf(1)
	}
	return u, nil
}

// linearUSL is Gunther's linearised estimate of σ and κ: with λ0 the
// per-client throughput at the smallest N, y = N/C − 1 where C = X/λ0,
// regressed through the origin on x1 = N−1 and x2 = N(N−1).
func linearUSL(ps []USLPoint) [2]float64 {
	l0 := ps[0].X / ps[0].N
	var a11, a12, a22, b1, b2 float64
	for _, p := range ps {
		y := p.N/(p.X/l0) - 1
		x1, x2 := p.N-1, p.N*(p.N-1)
		a11 += x1 * x1
		a12 += x1 * x2
		a22 += x2 * x2
		b1 += x1 * y
		b2 += x2 * y
	}
	det := a11*a22 - a12*a12
	if det == 0 {
		return [2]float64{0.1, 0}
	}
	s := (b1*a22 - b2*a12) / det
	k := (a11*b2 - a12*b1) / det
	return [2]float64{min(1, max(0, s)), max(0, k)}
}

// nelderMead minimises f over two variables from x0, with initial steps
// step, for at most iters iterations.
func nelderMead(f func([2]float64) float64, x0, step [2]float64, iters int) [2]float64 {
	type vert struct {
		x [2]float64
		v float64
	}
	mk := func(x [2]float64) vert { return vert{x, f(x)} }
	s := []vert{mk(x0), mk([2]float64{x0[0] + step[0], x0[1]}), mk([2]float64{x0[0], x0[1] + step[1]})}
	lerp := func(a, b [2]float64, t float64) [2]float64 {
		return [2]float64{a[0] + t*(b[0]-a[0]), a[1] + t*(b[1]-a[1])}
	}
	for range iters {
		sort.Slice(s, func(i, j int) bool { return s[i].v < s[j].v })
		if math.Abs(s[2].v-s[0].v) <= 1e-15*(1+math.Abs(s[0].v)) &&
			math.Abs(s[2].x[0]-s[0].x[0])+math.Abs(s[2].x[1]-s[0].x[1]) < 1e-14 {
			break
		}
		c := lerp(s[0].x, s[1].x, 0.5) // centroid of the best two
		r := mk(lerp(s[2].x, c, 2))    // reflection
		switch {
		case r.v < s[0].v:
			if e := mk(lerp(s[2].x, c, 3)); e.v < r.v {
				s[2] = e
			} else {
				s[2] = r
			}
		case r.v < s[1].v:
			s[2] = r
		default:
			if ct := mk(lerp(s[2].x, c, 0.5)); ct.v < s[2].v {
				s[2] = ct
			} else {
				for i := 1; i < 3; i++ {
					s[i] = mk(lerp(s[0].x, s[i].x, 0.5))
				}
			}
		}
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v < s[j].v })
	return s[0].x
}

// StrategyUSL is one strategy's USL fit over a sweep of buyers on one
// scenario: every run (repeats apart) is a point (buyers, TPS). Err says
// why there is no fit (Fit is then zero).
type StrategyUSL struct {
	Strategy string `json:"strategy"`
	Scenario string `json:"scenario"`
	Fit      USL    `json:"fit"`
	Err      string `json:"error,omitempty"`
}

// USLFits fits the USL per strategy and scenario of a `sweep --param
// buyers` (closed loop: the buyers are the concurrency); nil for any
// other file. Strategies and scenarios keep the order of the runs.
func USLFits(r *results.Results) []StrategyUSL {
	if r == nil || r.Sweep == nil || r.Sweep.Param != results.ParamBuyers {
		return nil
	}
	xs, _, ok := SweepX(r.Sweep)
	if !ok {
		return nil
	}
	type key struct{ strategy, scenario string }
	var order []key
	pts := map[key][]USLPoint{}
	for _, run := range r.Runs {
		n, ok := xs[run.Value]
		if !ok {
			continue
		}
		k := key{run.Strategy, run.Scenario}
		if _, seen := pts[k]; !seen {
			order = append(order, k)
		}
		pts[k] = append(pts[k], USLPoint{N: n, X: run.TPS})
	}
	var out []StrategyUSL
	for _, k := range order {
		s := StrategyUSL{Strategy: k.strategy, Scenario: k.scenario}
		fit, err := FitUSL(pts[k])
		if err != nil {
			s.Err = err.Error()
		} else {
			s.Fit = fit
		}
		out = append(out, s)
	}
	return out
}
