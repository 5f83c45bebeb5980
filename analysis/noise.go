package analysis

import (
	"math"

	"github.com/stockbench/stockbench/results"
)

// NoiseConfidence is the two-sided confidence of a run pair's noise
// margin: a change inside the margin is what the runs' own second-to-second
// variation explains at this confidence.
const NoiseConfidence = 0.99

// MinNoiseSeconds is the fewest whole measured seconds a run needs for its
// per-second series to measure its own noise. A shorter run (a 100-unit
// flash sale is over in half a second) tells nothing of its noise.
const MinNoiseSeconds = 3

// wholeSeconds is the per-second series of the measured phase without a
// last, partial second (the buyers' tail past the end), whose count would
// read as a drop. Warm-up is not in the series.
func wholeSeconds(r results.Run) []results.SeriesPoint {
	s := r.Series
	if n := int(math.Floor(r.DurationSec + 1e-9)); r.DurationSec > 0 && n < len(s) {
		s = s[:n]
	}
	return s
}

// tpsNoisePct is the noise margin of the change of mean flows per second
// from old to new, in percent of old's mean: the half-width of the
// NoiseConfidence interval of the difference of the two files' per-second
// flow counts (Welch's t, unequal variances; the seconds of all repeats
// pooled). ok is false when either file has fewer than MinNoiseSeconds
// whole seconds.
func tpsNoisePct(old, new []results.Run) (pct float64, ok bool) {
	flows := func(runs []results.Run) []float64 {
		var xs []float64
		for _, r := range runs {
			for _, p := range wholeSeconds(r) {
				xs = append(xs, float64(p.Flows))
			}
		}
		return xs
	}
	a, b := flows(old), flows(new)
	m, _ := meanVar(a)
	half, ok := welchHalfWidth(a, b)
	if !ok || m <= 0 {
		return 0, false
	}
	return 100 * half / m, true
}

// p99NoisePct is the noise margin of a P99 rise from old to new, in
// percent: the per-second flow P99s are compared on a log scale (a tail
// is skewed; one slow second must not swamp the others), and the margin
// is the upper end of the NoiseConfidence interval of their ratio. Seconds
// without a completed flow have no P99 and are left out.
func p99NoisePct(old, new []results.Run) (pct float64, ok bool) {
	logs := func(runs []results.Run) []float64 {
		var xs []float64
		for _, r := range runs {
			for _, p := range wholeSeconds(r) {
				if p.Flows > 0 && p.FlowP99MS > 0 {
					xs = append(xs, math.Log(p.FlowP99MS))
				}
			}
		}
		return xs
	}
	half, ok := welchHalfWidth(logs(old), logs(new))
	if !ok {
		return 0, false
	}
	return 100 * (math.Exp(half) - 1), true
}

// welchHalfWidth is the half-width of the NoiseConfidence interval of
// mean(b) - mean(a), by Welch's t with the Welch–Satterthwaite degrees of
// freedom. ok is false when either sample has fewer than MinNoiseSeconds
// values.
func welchHalfWidth(a, b []float64) (float64, bool) {
	if len(a) < MinNoiseSeconds || len(b) < MinNoiseSeconds {
		return 0, false
	}
	_, va := meanVar(a)
	_, vb := meanVar(b)
	qa, qb := va/float64(len(a)), vb/float64(len(b))
	se2 := qa + qb
	if se2 == 0 {
		return 0, true
	}
	df := se2 * se2 / (qa*qa/float64(len(a)-1) + qb*qb/float64(len(b)-1))
	return tQuantile(1-(1-NoiseConfidence)/2, df) * math.Sqrt(se2), true
}

// meanVar is the mean and the unbiased sample variance of xs.
func meanVar(xs []float64) (mean, variance float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// tQuantile is the p quantile (p > 0.5) of Student's t distribution with
// df degrees of freedom, found by bisection on its distribution function.
func tQuantile(p, df float64) float64 {
	lo, hi := 0.0, 1e4
	for range 200 {
		mid := (lo + hi) / 2
		if tCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tCDF is Student's t distribution function at t ≥ 0.
func tCDF(t, df float64) float64 {
	return 1 - 0.5*betaInc(df/2, 0.5, df/(df+t*t))
}

// betaInc is the regularized incomplete beta function I_x(a, b), by its
// continued fraction (Numerical Recipes, betai and betacf).
func betaInc(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

// betaCF evaluates the incomplete beta's continued fraction (modified
// Lentz's method).
func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		aa := fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm))
		d, c = lentz(aa, d, c)
		h *= d * c
		aa = -(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1))
		d, c = lentz(aa, d, c)
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-14 {
			break
		}
	}
	return h
}

// lentz is one step of Lentz's method for a continued fraction with
// partial numerator aa: the next D (inverted) and C, kept off zero.
func lentz(aa, d, c float64) (float64, float64) {
	const tiny = 1e-300
	d, c = 1+aa*d, 1+aa/c
	if math.Abs(d) < tiny {
		d = tiny
	}
	if math.Abs(c) < tiny {
		c = tiny
	}
	return 1 / d, c
}
